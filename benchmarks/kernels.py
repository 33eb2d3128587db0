"""Trick kernels: trickbag vs the per-parameter loops of cheat sheets and vs timm, side by side.

Kernels, on ResNet-18-sized parameters (``torchvision.models.resnet18(weights=None)``: 11.7 M
parameters in 62 tensors) and on image batches of 32x3x32x32, 64x3x64x64, 128x3x32x32 and
256x3x224x224 (float32):

* EMA update (ResNet-18, and the default recipe's SmallCNN): ``trickbag.nn.EMA.update`` vs the
  mean-teacher loop (``e.mul_(d).add_(p, alpha=1-d)`` per parameter), the
  ``e.data = d * e.data + (1 - d) * p.data`` loop, timm ``ModelEmaV2`` and ``ModelEmaV3``;
* mixup / CutMix: ``trickbag.data.mixup`` / ``cutmix`` (new tensors, the input is left alone) and
  ``MixupCutmix`` (with label smoothing, integer labels in, soft targets out; default and
  ``inplace=True``) vs the reference repositories' ``mixup_data`` / ``rand_bbox`` code and timm
  ``Mixup`` (which mixes the input in place); ``--mix-profile`` adds the op count and CPU time per
  call of the mixing implementations;
* gradient clipping: ``trickbag.optim.clip_gradients`` (norm, value) and ``adaptive_clip_gradients``
  vs the per-parameter ``.norm().item()`` loop and timm ``dispatch_clip_grad`` (norm, value, agc);
* parameter groups: ``trickbag.nn.param_groups`` (no decay on bias / norm, layer-wise decay) vs the
  per-parameter split loop and timm ``param_groups_weight_decay`` / ``param_groups_layer_decay``.

Each kernel's implementations alternate in one process (order rotated every round, warm-up round
discarded); each round times ``--calls`` calls per implementation (state restored untimed between
calls where a call changes it; ``--scale`` multiplies the calls).  "speed-up" is, per round, the implementation's time
per call over
trickbag's, median over rounds: > 1 means trickbag is faster.  Targets: never slower than timm
(speed-up >= 1 against every timm row); >= 3x faster than the per-parameter loop for EMA.

Run: ``.venv/bin/python benchmarks/kernels.py [--rounds 7] [--threads 1] [--only ema,mix,clip,groups] [--small-only]
[--mix-profile]``
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import importlib.util
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from trickbag.data.mix import MixupCutmix, cutmix, mixup  # noqa: E402
from trickbag.nn.ema import EMA  # noqa: E402
from trickbag.nn.param_groups import param_groups  # noqa: E402
from trickbag.optim.clipping import adaptive_clip_gradients, clip_gradients  # noqa: E402

NUM_CLASSES = 1000


# --------------------------------------------------------------------------- cheat-sheet references
def ema_loop_inplace(ema_model: torch.nn.Module, model: torch.nn.Module, decay: float) -> None:
    """The mean-teacher loop (Tarvainen & Valpola 2017 code): one mul_ and one add_ per parameter."""
    with torch.no_grad():
        for e, p in zip(ema_model.parameters(), model.parameters()):
            e.mul_(decay).add_(p, alpha=1 - decay)
        for e, b in zip(ema_model.buffers(), model.buffers()):
            e.copy_(b)


def ema_loop_data(ema_model: torch.nn.Module, model: torch.nn.Module, decay: float) -> None:
    """The other common cheat-sheet form: a new tensor per parameter assigned to ``.data``."""
    for e, p in zip(ema_model.parameters(), model.parameters()):
        e.data = decay * e.data + (1 - decay) * p.data
    for e, b in zip(ema_model.buffers(), model.buffers()):
        e.data = b.data.clone()


def mixup_data(x: torch.Tensor, y: torch.Tensor, alpha: float, rng: np.random.Generator):
    """facebookresearch/mixup-cifar10's ``mixup_data`` (targets as ``y_a, y_b, lam``)."""
    lam = rng.beta(alpha, alpha)
    index = torch.randperm(x.shape[0])
    mixed_x = lam * x + (1 - lam) * x[index, :]
    return mixed_x, y, y[index], lam


def rand_bbox(size: torch.Size, lam: float, rng: np.random.Generator) -> tuple[int, int, int, int]:
    """clovaai/CutMix-PyTorch's ``rand_bbox``."""
    W, H = size[2], size[3]
    cut_rat = np.sqrt(1.0 - lam)
    cut_w, cut_h = int(W * cut_rat), int(H * cut_rat)
    cx, cy = rng.integers(W), rng.integers(H)
    bbx1, bby1 = np.clip(cx - cut_w // 2, 0, W), np.clip(cy - cut_h // 2, 0, H)
    bbx2, bby2 = np.clip(cx + cut_w // 2, 0, W), np.clip(cy + cut_h // 2, 0, H)
    return bbx1, bby1, bbx2, bby2


def cutmix_data(x: torch.Tensor, y: torch.Tensor, alpha: float, rng: np.random.Generator):
    """clovaai/CutMix-PyTorch's training-loop code (pastes into the input in place)."""
    lam = rng.beta(alpha, alpha)
    rand_index = torch.randperm(x.shape[0])
    bbx1, bby1, bbx2, bby2 = rand_bbox(x.size(), lam, rng)
    x[:, :, bbx1:bbx2, bby1:bby2] = x[rand_index, :, bbx1:bbx2, bby1:bby2]
    lam = 1 - ((bbx2 - bbx1) * (bby2 - bby1) / (x.size()[-1] * x.size()[-2]))
    return x, y, y[rand_index], lam


def clip_norm_loop(params: list[torch.Tensor], max_norm: float) -> float:
    """The per-parameter clip-by-norm loop: one ``.norm().item()`` per parameter, then one ``mul_`` each."""
    total_norm = 0.0
    for p in params:
        param_norm = p.grad.data.norm(2)
        total_norm += param_norm.item() ** 2
    total_norm = total_norm ** 0.5
    clip_coef = max_norm / (total_norm + 1e-6)
    if clip_coef < 1:
        for p in params:
            p.grad.data.mul_(clip_coef)
    return total_norm


def param_groups_loop(model: torch.nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """The per-parameter split loop: no decay on biases and 1-D tensors."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if p.ndim <= 1 or name.endswith(".bias"):
            no_decay.append(p)
        else:
            decay.append(p)
    return [{"params": no_decay, "weight_decay": 0.0}, {"params": decay, "weight_decay": weight_decay}]


# --------------------------------------------------------------------------- harness
@dataclasses.dataclass
class Kernel:
    name: str
    impls: dict[str, Callable[[], Any]]  # one call each
    reference: str = "trickbag"
    before: Callable[[], Any] | None = None  # untimed, before every call (restores what a call changed)
    targets: dict[str, float] = dataclasses.field(default_factory=dict)  # impl -> minimal speed-up of trickbag
    note: str = ""


def _minor_faults() -> int:
    """Minor page faults of this process so far (0 where ``resource`` is missing, i.e. on Windows)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on Linux / macOS
        return 0
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _timed(fn: Callable[[], Any], calls: int, before: Callable[[], Any] | None) -> dict[str, float]:
    wall = cpu = 0.0
    faults = _minor_faults()
    for _ in range(calls):
        if before is not None:
            before()
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        wall += time.perf_counter() - t0
        cpu += time.process_time() - c0
    return {"seconds": wall / calls, "cpu": cpu / calls, "faults": (_minor_faults() - faults) / calls}


TIE = 0.03  # "never slower than timm": within 3 % counts as a tie (same torch call, measurement noise)


def _verdict(speedup: float, target: float) -> str:
    if speedup >= target:
        return "yes"
    if target == 1.0 and speedup >= 1.0 - TIE:
        return "tie"
    return "NO"


def run_kernel(k: Kernel, calls: int, rounds: int, warmup: int) -> list[list[str]]:
    print(f"- {k.name} ({calls} calls x {rounds} rounds per implementation)", file=sys.stderr, flush=True)
    variants = {n: (lambda fn=fn: _timed(fn, calls, k.before)) for n, fn in k.impls.items()}
    res = C.alternate(variants, rounds, warmup, progress=False)
    ref_t = [r["seconds"] for r in res[k.reference]]
    ref_c = [r["cpu"] for r in res[k.reference]]
    rows = []
    for name, runs in res.items():
        t, c = [r["seconds"] for r in runs], [r["cpu"] for r in runs]
        sp_wall, sp_cpu = C.ratios(t, ref_t), C.ratios(c, ref_c)
        target = k.targets.get(name)
        met = ""
        if target is not None:
            met = " / ".join(_verdict(C.median(x), target) for x in (sp_wall, sp_cpu))
        rows.append([
            k.name if not rows else "",
            name,
            f"{1000 * C.median(t):.3f}",
            f"{1000 * C.median(c):.3f}",
            "1 (reference)" if name == k.reference else f"{C.median(sp_wall):.2f}",
            "" if name == k.reference else C.spread(sp_wall),
            "" if name == k.reference else f"{C.median(sp_cpu):.2f}",
            f">= {target:g}" if target is not None else "",
            met,
            f"{C.median([r['faults'] for r in runs]):.0f}",
        ])
    return rows


# --------------------------------------------------------------------------- kernels
def ema_kernel(timm: Any, model: torch.nn.Module, label: str) -> Kernel:
    decay = 0.9998
    ours = EMA(model, decay=decay)
    e_in, e_data = copy.deepcopy(model), copy.deepcopy(model)
    impls: dict[str, Callable[[], Any]] = {
        "trickbag EMA.update": lambda: ours.update(model),
        "loop: e.mul_(d).add_(p)": lambda: ema_loop_inplace(e_in, model, decay),
        "loop: e.data = d*e + (1-d)*p": lambda: ema_loop_data(e_data, model, decay),
    }
    targets = {"loop: e.mul_(d).add_(p)": 3.0, "loop: e.data = d*e + (1-d)*p": 3.0}
    if timm is not None:
        from timm.utils import ModelEmaV2, ModelEmaV3

        v2, v3 = ModelEmaV2(model, decay=decay), ModelEmaV3(model, decay=decay)
        impls["timm ModelEmaV2"] = lambda: v2.update(model)
        impls["timm ModelEmaV3"] = lambda: v3.update(model)
        targets.update({"timm ModelEmaV2": 1.0, "timm ModelEmaV3": 1.0})
    n = sum(p.numel() for p in model.parameters())
    t = sum(1 for _ in model.parameters()) + sum(1 for _ in model.buffers())
    return Kernel(f"EMA update, {label} ({n / 1e6:.2f} M params, {t} tensors)", impls, "trickbag EMA.update",
                  targets=targets)


def ema_kernels(timm: Any) -> list[Kernel]:
    import torchvision

    from trickbag.models import SmallCNN

    torch.manual_seed(0)
    return [ema_kernel(timm, torchvision.models.resnet18(weights=None), "ResNet-18"),
            ema_kernel(timm, SmallCNN(1, 10), "digits SmallCNN")]


MIX_SHAPES_SMALL = [(32, 3, 32, 32), (64, 3, 64, 64), (128, 3, 32, 32)]
MIX_SHAPE_LARGE = (256, 3, 224, 224)


def mix_calls(shape: tuple[int, ...]) -> int:
    """Calls per round: ~3e7 mixed elements per implementation and round (200 at 32x3x32x32, 4 at the large batch)."""
    return max(4, min(200, int(3e7 / math.prod(shape))))


def mix_kernels(timm: Any, shape: tuple[int, ...]) -> list[Kernel]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=g)
    y = torch.randint(0, NUM_CLASSES, (shape[0],), generator=g)
    x_timm = x.clone()  # timm and the CutMix reference mix in place: give them their own batch
    x_ref = x.clone()
    x_own = x.clone()  # for trickbag's inplace=True
    rng = np.random.default_rng(0)
    size = "x".join(map(str, shape))
    names = ["mixup", "cutmix", "mc_m", "mc_c", "mi_m", "mi_c"]
    gens = {k: torch.Generator().manual_seed(i) for i, k in enumerate(names)}
    torch.manual_seed(0)

    def mixer(kind: str, inplace: bool, generator: torch.Generator) -> MixupCutmix:
        alphas = (0.8, 0.0) if kind == "mixup" else (0.0, 1.0)
        return MixupCutmix(*alphas, num_classes=NUM_CLASSES, smoothing=0.1, generator=generator, inplace=inplace)

    mc_m, mc_c = mixer("mixup", False, gens["mc_m"]), mixer("cutmix", False, gens["mc_c"])
    mi_m, mi_c = mixer("mixup", True, gens["mi_m"]), mixer("cutmix", True, gens["mi_c"])
    plain_mix: dict[str, Callable[[], Any]] = {
        "trickbag mixup()": lambda: mixup(x, y, 0.8, num_classes=NUM_CLASSES, generator=gens["mixup"]),
        "mixup_data (mixup-cifar10)": lambda: mixup_data(x_ref, y, 0.8, rng),
    }
    plain_cut: dict[str, Callable[[], Any]] = {
        "trickbag cutmix()": lambda: cutmix(x, y, 1.0, num_classes=NUM_CLASSES, generator=gens["cutmix"]),
        "CutMix-PyTorch (in place)": lambda: cutmix_data(x_ref, y, 1.0, rng),
    }
    mixc: dict[str, Callable[[], Any]] = {"trickbag MixupCutmix": lambda: mc_m(x, y)}
    mixi: dict[str, Callable[[], Any]] = {"trickbag MixupCutmix(inplace=True)": lambda: mi_m(x_own, y)}
    cutc: dict[str, Callable[[], Any]] = {"trickbag MixupCutmix": lambda: mc_c(x, y)}
    cuti: dict[str, Callable[[], Any]] = {"trickbag MixupCutmix(inplace=True)": lambda: mi_c(x_own, y)}
    t: dict[str, float] = {}
    if timm is not None:
        from timm.data import Mixup

        tm = Mixup(mixup_alpha=0.8, cutmix_alpha=0.0, label_smoothing=0.1, num_classes=NUM_CLASSES)
        tc = Mixup(mixup_alpha=0.0, cutmix_alpha=1.0, label_smoothing=0.1, num_classes=NUM_CLASSES)
        for impls, mixer_ in ((mixc, tm), (mixi, tm), (cutc, tc), (cuti, tc)):
            impls["timm Mixup (in place)"] = lambda m=mixer_: m(x_timm, y)
        t = {"timm Mixup (in place)": 1.0}
    return [
        Kernel(f"mixup, {size}", plain_mix, "trickbag mixup()"),
        Kernel(f"mixup + smoothing + soft targets, {size}", mixc, "trickbag MixupCutmix", targets=t),
        Kernel(f"same, trickbag in place, {size}", mixi, "trickbag MixupCutmix(inplace=True)", targets=t),
        Kernel(f"cutmix, {size}", plain_cut, "trickbag cutmix()"),
        Kernel(f"cutmix + smoothing + soft targets, {size}", cutc, "trickbag MixupCutmix", targets=t),
        Kernel(f"same, trickbag in place, {size}", cuti, "trickbag MixupCutmix(inplace=True)", targets=t),
    ]


def mix_profile(timm: Any, shape: tuple[int, ...], rounds: int = 7) -> list[list[str]]:
    """Per call of each mixing implementation (with smoothing): the tensor ops it issues and where its CPU time goes.

    ``ops/call`` counts the top-level ATen ops, i.e. the torch calls made from Python (an op's own
    sub-ops are not counted); ``in ATen`` is the CPU time spent inside all ATen ops under
    ``torch.profiler`` (which adds a little per op; median of 3 profiled runs of a round's calls);
    ``call`` is the CPU time of an unprofiled call,
    the implementations alternating in rounds as in the main table (median over rounds).
    """
    from torch.profiler import ProfilerActivity, profile

    calls = mix_calls(shape)
    impls: dict[str, Callable[[], Any]] = {}
    kind = ""
    for k in mix_kernels(timm, shape):  # mixup, mixup + smoothing, same in place, cutmix, cutmix + smoothing, same ...
        if not k.name.startswith("same"):
            kind = k.name.split(",")[0].split(" ")[0]
        if "smoothing" in k.name or k.name.startswith("same"):
            for name, fn in k.impls.items():
                impls.setdefault(f"{kind}: {name}", fn)
    res = C.alternate({n: (lambda fn=fn: _timed(fn, calls, None)) for n, fn in impls.items()}, rounds, 1,
                      progress=False)
    rows: list[list[str]] = []
    for name, fn in impls.items():
        ops, aten_us = [], []
        for _ in range(3):
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                for _ in range(calls):
                    fn()
            events = [e for e in prof.events() if e.name.startswith("aten::")]
            ops.append(sum(1 for e in events if e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::")))
            aten_us.append(sum(e.self_cpu_time_total for e in events))
        kind, impl = name.split(": ", 1)
        rows.append([f"{kind}, {'x'.join(map(str, shape))}", impl, f"{C.median(ops) / calls:.1f}",
                     f"{C.median(aten_us) / calls:.0f}", f"{1e6 * C.median([r['cpu'] for r in res[name]]):.0f}"])
    return rows


def clip_kernels(timm: Any) -> list[Kernel]:
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None)
    params = list(model.parameters())
    g = torch.Generator().manual_seed(0)
    for p in params:
        p.grad = torch.randn(p.shape, generator=g)  # global norm ~3400: clipping to 1.0 is active
    saved = [p.grad.clone() for p in params]
    grads = [p.grad for p in params]

    def restore() -> None:
        torch._foreach_copy_(grads, saved)

    norm: dict[str, Callable[[], Any]] = {
        "trickbag clip_gradients(norm=)": lambda: clip_gradients(params, norm=1.0),
        "loop: p.grad.norm().item()": lambda: clip_norm_loop(params, 1.0),
    }
    value: dict[str, Callable[[], Any]] = {
        "trickbag clip_gradients(value=)": lambda: clip_gradients(params, value=0.01)
    }
    agc: dict[str, Callable[[], Any]] = {
        "trickbag adaptive_clip_gradients": lambda: adaptive_clip_gradients(params, 0.01)
    }
    nt: dict[str, float] = {}
    vt: dict[str, float] = {}
    at: dict[str, float] = {}
    if timm is not None:
        from timm.utils import dispatch_clip_grad

        norm["timm dispatch_clip_grad(norm)"] = lambda: dispatch_clip_grad(params, 1.0, mode="norm")
        value["timm dispatch_clip_grad(value)"] = lambda: dispatch_clip_grad(params, 0.01, mode="value")
        agc["timm dispatch_clip_grad(agc)"] = lambda: dispatch_clip_grad(params, 0.01, mode="agc")
        nt, vt, at = ({"timm dispatch_clip_grad(norm)": 1.0}, {"timm dispatch_clip_grad(value)": 1.0},
                      {"timm dispatch_clip_grad(agc)": 1.0})
    return [
        Kernel("clip grad norm, ResNet-18 grads", norm, "trickbag clip_gradients(norm=)", restore, nt),
        Kernel("clip grad value, ResNet-18 grads", value, "trickbag clip_gradients(value=)", restore, vt),
        Kernel("adaptive clipping (AGC), ResNet-18", agc, "trickbag adaptive_clip_gradients", restore, at),
    ]


def group_kernels(timm: Any) -> list[Kernel]:
    import torchvision

    model = torchvision.models.resnet18(weights=None)
    wd: dict[str, Callable[[], Any]] = {
        "trickbag param_groups": lambda: param_groups(model, lr=0.1, weight_decay=0.05),
        "loop: split by ndim / .bias": lambda: param_groups_loop(model, 0.05),
    }
    ld: dict[str, Callable[[], Any]] = {
        "trickbag param_groups(layer_decay=)": lambda: param_groups(model, lr=0.1, weight_decay=0.05, layer_decay=0.75),
    }
    wt: dict[str, float] = {}
    lt: dict[str, float] = {}
    if timm is not None:
        import logging

        from timm.optim import param_groups_layer_decay, param_groups_weight_decay

        logging.getLogger("timm").setLevel(logging.ERROR)
        wd["timm param_groups_weight_decay"] = lambda: param_groups_weight_decay(model, 0.05)
        ld["timm param_groups_layer_decay"] = lambda: param_groups_layer_decay(model, 0.05, layer_decay=0.75)
        wt, lt = {"timm param_groups_weight_decay": 1.0}, {"timm param_groups_layer_decay": 1.0}
    return [
        Kernel("param groups: no decay on bias/norm, ResNet-18", wd, "trickbag param_groups", targets=wt),
        Kernel("param groups: layer-wise LR decay, ResNet-18", ld, "trickbag param_groups(layer_decay=)", targets=lt),
    ]


GROUPS = ("ema", "mix", "clip", "groups")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(GROUPS), help=f"comma-separated subset of {','.join(GROUPS)}")
    parser.add_argument("--small-only", action="store_true", help="skip the 256x3x224x224 batch (quick check)")
    parser.add_argument("--mix-profile", action="store_true",
                        help="also print the per-call op profile of the mixing kernels on the small batches")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the calls per round (default 1)")
    C.add_common_args(parser, rounds=7)
    args = parser.parse_args(argv)
    only = [g.strip() for g in args.only.split(",") if g.strip()]
    bad = [g for g in only if g not in GROUPS]
    if bad or args.rounds < 1 or args.scale <= 0:
        parser.error(f"--only takes {','.join(GROUPS)} (got {bad}); --rounds >= 1; --scale > 0")
    C.setup(args, "Trick kernels: trickbag vs per-parameter loops and timm")
    timm = None
    if importlib.util.find_spec("timm") is not None:
        import timm

        print(f"timm: {timm.__version__}")
    else:
        print("timm: not installed (timm rows omitted)")
    print()

    def calls(n: int) -> int:
        return max(1, int(math.ceil(n * args.scale)))

    rows: list[list[str]] = []
    if "ema" in only:
        for k, n in zip(ema_kernels(timm), (20, 200)):
            rows += run_kernel(k, calls(n), args.rounds, args.warmup)
    if "mix" in only:
        shapes = MIX_SHAPES_SMALL + ([] if args.small_only else [MIX_SHAPE_LARGE])
        for shape in shapes:
            for k in mix_kernels(timm, shape):
                rows += run_kernel(k, calls(mix_calls(shape)), args.rounds, args.warmup)
    if "clip" in only:
        for k in clip_kernels(timm):
            rows += run_kernel(k, calls(20), args.rounds, args.warmup)
    if "groups" in only:
        for k in group_kernels(timm):
            rows += run_kernel(k, calls(50), args.rounds, args.warmup)
    print(C.markdown_table(
        ["kernel", "implementation", "wall ms/call", "CPU ms/call", "speed-up of trickbag (wall)",
         "range", "speed-up (CPU)", "target", "met (wall / CPU)", "page faults/call"],
        rows,
    ))
    print("\nms/call: median over rounds of the mean time of one call in a round. speed-up: per round, the"
          " implementation's time over trickbag's; median over rounds (> 1: trickbag faster). met: yes, NO, or tie"
          f" (a 'never slower than timm' row within {100 * TIE:.0f} % of 1). page faults/call: minor page"
          " faults of the process per call (median over rounds): first touches of freshly mapped memory, e.g."
          " batch-sized temporaries the allocator had to get from the kernel.")
    if "mix" in only and args.mix_profile:
        prof_rows: list[list[str]] = []
        for shape in MIX_SHAPES_SMALL:
            prof_rows += mix_profile(timm, shape, args.rounds)
        print("\nMixing, one call under torch.profiler (CPU, one thread):\n")
        print(C.markdown_table(["kernel (+ smoothing)", "implementation", "ops/call", "in ATen us/call (profiled)",
                                "call us/call (CPU)"], prof_rows))
    print(f"\nload average (1/5/15 min) at the end: {', '.join(f'{v:.1f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
