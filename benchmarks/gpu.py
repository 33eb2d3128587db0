"""GPU benchmark: the Trainer vs a hand loop, each recipe trick's cost, and ResNet-50 MFU, side by side in one process.

Three tables, each printed as soon as it is measured (a later section that runs out of time leaves the
earlier ones on the screen):

1. **Trainer vs hand loop.**  torchvision ResNet-18 on synthetic 3x32x32 batches that already live on the
   GPU (no loader), same initial weights, SGD with Nesterov and a cosine schedule; ``hand`` is the loop a
   careful user writes (autocast around forward + loss, running loss / accuracy kept on the device, one
   sync at the end), ``trainer`` is ``trickbag.Trainer`` with no plug-ins.  Images/s and the median
   per-round ratio trainer / hand (alternating rounds, as ``benchmarks/overhead.py``).
2. **Trick cost on the GPU.**  As ``benchmarks/trick_cost.py``, on a GPU-sized recipe: the digits recipe
   with generated 3x32x32 images, ResNet-18, batch 256, bf16, ``train.device=cuda``; each trick on vs
   off, the batch loop of epoch 2 timed (CUDA synchronised at both ends), ratio to the mean of the two
   neighbouring off runs.
3. **MFU.**  One ResNet-50 training step (bf16 autocast, channels_last, SGD) on synthetic 224x224 images:
   FLOPs of forward + backward counted by ``torch.utils.flop_counter.FlopCounterMode``, step time eager and
   after ``torch.compile``; achieved TFLOP/s and the fraction of the card's dense bf16 peak (H100 SXM:
   989 TFLOP/s; ``--peak-tflops`` for a card not in the table).

``--quick`` (for a short lease on a GPU) runs all three in under two minutes on an H100.  Without CUDA the
script says so in one line and exits 0.

Run: ``python benchmarks/gpu.py [--quick] [--only trainer,tricks,mfu] [--no-compile] [--peak-tflops T]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

# dense bf16 tensor-core peak in TFLOP/s, by a substring of torch.cuda.get_device_name() (first match wins)
PEAK_BF16_TFLOPS = (
    ("H100 PCIe", 756.0), ("H100 NVL", 835.0), ("H100", 989.4), ("H200", 989.4), ("GH200", 989.4),
    ("B200", 2250.0), ("A100", 312.0), ("L40S", 362.0), ("L40", 181.0), ("L4", 121.0), ("A10G", 70.0), ("A10", 125.0),
    ("RTX 4090", 165.2), ("RTX 3090", 71.0),
)

SECTIONS = ("trainer", "tricks", "mfu")
QUICK_TRICKS = ("ema", "sam", "mix", "label_smoothing", "clip", "channels_last", "tta")
#: what a trick needs besides enabled=true on the GPU recipe (ResNet-18, 3x32x32)
EXTRA: dict[str, list[str]] = {
    "freeze": ["tricks.freeze.patterns=[conv1.*,bn1.*]"],
    "multiscale": ["tricks.multiscale.train_sizes=[24,32,40]", "tricks.multiscale.finetune_epochs=0"],
}
#: tricks not measured here: a teacher checkpoint is needed, or the trick measures itself
SKIP_TRICKS = {"distillation": "needs a teacher checkpoint", "profile": "a profiler, not a training trick"}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short runs for a short GPU lease (< 2 min on an H100)")
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated sections of {SECTIONS}")
    parser.add_argument("--no-compile", action="store_true", help="leave out the torch.compile row of the MFU table")
    parser.add_argument("--peak-tflops", type=float, default=None,
                        help="the card's dense bf16 peak in TFLOP/s (default: looked up from the device name)")
    parser.add_argument("--tricks", default="", help="comma-separated tricks for the trick table (default: "
                        f"{','.join(QUICK_TRICKS)} with --quick, else every registered trick)")
    parser.add_argument("--threads", type=int, default=4, help="torch CPU intra-op threads (default 4)")
    parser.add_argument("--rounds", type=int, default=None,
                        help="measured rounds (default 5 for the loop table, 3 for the trick table; --quick: 3, 1)")
    parser.add_argument("--warmup", type=int, default=1, help="warm-up rounds, discarded (default 1)")
    # private: run the same code paths on the CPU with tiny sizes, to check the script without a GPU
    parser.add_argument("--device", default="cuda", help=argparse.SUPPRESS)
    parser.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--compile-backend", default="inductor", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.sections = [s.strip() for s in args.only.split(",") if s.strip()]
    bad = [s for s in args.sections if s not in SECTIONS]
    if bad:
        parser.error(f"--only: {bad} are not sections; allowed: {', '.join(SECTIONS)}")
    args.loop_rounds = args.rounds or (3 if args.quick else 5)
    args.cost_rounds = args.rounds or (1 if args.quick else 3)
    if args.loop_rounds < 1 or args.cost_rounds < 1 or args.warmup < 0:
        parser.error("--rounds must be >= 1 and --warmup >= 0")
    return args


class Sizes:
    """Problem sizes of each section: full, --quick, or the private --tiny (CPU check of the code paths)."""

    def __init__(self, quick: bool, tiny: bool) -> None:
        self.loop_batch, self.loop_steps, self.loop_image = (256, 60, 32) if not quick else (256, 30, 32)
        self.cost_samples, self.cost_batch, self.cost_image = (16384, 256, 32) if not quick else (8192, 256, 32)
        self.mfu_batch, self.mfu_image, self.mfu_warmup, self.mfu_steps = (256, 224, 10, 50) if not quick else (
            128, 224, 3, 15)
        if tiny:
            self.loop_batch, self.loop_steps, self.loop_image = 8, 3, 32
            self.cost_samples, self.cost_batch, self.cost_image = 160, 16, 32
            self.mfu_batch, self.mfu_image, self.mfu_warmup, self.mfu_steps = 2, 64, 1, 2


def sync(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def device_report(device: Any, peak: float | None) -> None:
    import torch

    if device.type != "cuda":
        print(f"device: {device} (private CPU check of the code paths: the numbers mean nothing)\n", flush=True)
        return
    p = torch.cuda.get_device_properties(device)
    print(f"gpu: {p.name}, {p.total_memory / 2**30:.0f} GiB, capability {p.major}.{p.minor}, "
          f"{p.multi_processor_count} SMs")
    print(f"cuda {torch.version.cuda}, cudnn {torch.backends.cudnn.version()}, "
          f"bf16 peak used for MFU: {f'{peak:g} TFLOP/s' if peak else 'unknown (give --peak-tflops)'}")
    print(f"TF32: matmul {torch.backends.cuda.matmul.allow_tf32}, cudnn {torch.backends.cudnn.allow_tf32} "
          "(torch defaults; the fp32 rows use them)\n", flush=True)


def peak_tflops(device: Any, given: float | None) -> float | None:
    import torch

    if given is not None or device.type != "cuda":
        return given
    name = torch.cuda.get_device_name(device)
    return next((tf for key, tf in PEAK_BF16_TFLOPS if key in name), None)


# --------------------------------------------------------------------------- 1. Trainer vs hand loop
class LoopSetup:
    """ResNet-18 initial weights and synthetic batches on the device, shared by every variant."""

    def __init__(self, device: Any, sizes: Sizes, precision: str) -> None:
        import copy

        import torch
        import torchvision

        self.device, self.precision = device, precision
        torch.manual_seed(0)
        model = torchvision.models.resnet18(num_classes=10)
        self.init = copy.deepcopy(model.state_dict())
        g = torch.Generator(device=device).manual_seed(0)
        shape = (sizes.loop_batch, 3, sizes.loop_image, sizes.loop_image)
        self.batches = [(torch.randn(shape, device=device, generator=g),
                         torch.randint(0, 10, (sizes.loop_batch,), device=device, generator=g))
                        for _ in range(sizes.loop_steps)]
        self.images = sizes.loop_batch * sizes.loop_steps

    def fresh(self) -> tuple[Any, Any, Any]:
        import torch
        import torchvision

        model = torchvision.models.resnet18(num_classes=10)
        model.load_state_dict(self.init)
        model.to(self.device)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=len(self.batches))
        return model, opt, sched

    def autocast(self) -> Any:
        import contextlib

        import torch

        if self.precision == "32":
            return contextlib.nullcontext()
        dtype = torch.bfloat16 if self.precision == "bf16" else torch.float16
        return torch.autocast(self.device.type, dtype=dtype)


def run_hand(s: LoopSetup) -> dict[str, float]:
    """The hand-written loop: the same work as the Trainer with no plug-ins (GradScaler for fp16)."""
    import torch
    import torch.nn.functional as F

    model, opt, sched = s.fresh()
    scaler = torch.amp.GradScaler(s.device.type, enabled=s.precision == "16")
    sync(s.device)
    t0 = time.perf_counter()
    model.train()
    loss_sum = torch.zeros((), device=s.device, dtype=torch.float64)
    correct = torch.zeros((), device=s.device, dtype=torch.int64)
    for x, y in s.batches:
        with s.autocast():
            out = model(x)
            loss = F.cross_entropy(out, y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        sched.step()
        with torch.no_grad():
            loss_sum += loss.detach().double() * y.shape[0]
            correct += (out.argmax(1) == y).sum()
    final = loss_sum.item() / s.images
    sync(s.device)
    return {"seconds": time.perf_counter() - t0, "loss": final}


def run_trainer(s: LoopSetup) -> dict[str, float]:
    from trickbag.train import Trainer

    model, opt, sched = s.fresh()
    sync(s.device)
    t0 = time.perf_counter()
    state = Trainer(model, opt, s.batches, scheduler=sched, precision=s.precision, device=s.device).fit()
    sync(s.device)
    return {"seconds": time.perf_counter() - t0, "loss": state.metrics["train/loss"]}


def trainer_table(C: Any, device: Any, sizes: Sizes, args: argparse.Namespace) -> None:
    precisions = ["bf16"] if args.quick else ["32", "bf16", "16"]
    rows = []
    for precision in precisions:
        s = LoopSetup(device, sizes, precision)
        results = C.alternate({"hand": lambda s=s: run_hand(s), "trainer": lambda s=s: run_trainer(s)},
                              args.loop_rounds, args.warmup)
        hand_t = [r["seconds"] for r in results["hand"]]
        for name, runs in results.items():
            t = [r["seconds"] for r in runs]
            ratio = C.ratios(t, hand_t)
            rows.append([precision, name, f"{s.images / C.median(t):,.0f}",
                         f"{1000 * C.median(t) / len(s.batches):.2f}", f"{C.median(ratio):.3f}", C.spread(ratio),
                         f"{runs[-1]['loss']:.4f}"])
    print("\n## Trainer vs hand-written loop (ResNet-18, synthetic batches on the device)\n")
    print(C.markdown_table(["precision", "variant", "images/s", "ms/step", "time ratio to hand", "range",
                            "train loss"], rows))
    print(f"\n{sizes.loop_steps} steps of batch {sizes.loop_batch} at {sizes.loop_image}x{sizes.loop_image} per run "
          "(construction included); ratio: per round, trainer time / hand time, median over rounds; same initial "
          "weights and batches (the losses agree to bf16/TF32 noise).", flush=True)


# --------------------------------------------------------------------------- 2. trick cost on the GPU
class CudaStepTimer:
    """Wall time of the batch loops of epochs >= ``skip`` (EPOCH_START to EVAL_START), the device synchronised
    at both ends; ``opener`` goes last in the plug-in list, ``closer`` first (as in trick_cost.StepTimer)."""

    def __init__(self, device: Any, skip: int) -> None:
        from trickbag.plugin.interface import Plugin

        self.device, self.skip = device, skip
        self.wall, self.batches = 0.0, 0
        self._mark: float | None = None
        timer = self

        class Opener(Plugin):
            name = "gpu_timer_open"

            def on_epoch_start(self, state: Any) -> None:
                sync(timer.device)
                timer._mark = time.perf_counter() if state.epoch >= timer.skip else None

            def on_epoch_end(self, state: Any) -> None:
                timer.close(state)

        class Closer(Plugin):
            name = "gpu_timer_close"

            def on_eval_start(self, state: Any) -> None:
                timer.close(state)

        self.opener, self.closer = Opener(), Closer()

    def close(self, state: Any) -> None:
        if self._mark is not None:
            sync(self.device)
            self.wall += time.perf_counter() - self._mark
            self.batches += state.batches_per_epoch
            self._mark = None


def cost_base(device: Any, sizes: Sizes) -> list[str]:
    """The digits recipe turned into a GPU-sized one: ResNet-18 on generated 3x32x32 images, bf16."""
    n = sizes.cost_image
    return ["data.name=fake", f"data.num_samples={sizes.cost_samples}", f"data.shape=[3,{n},{n}]",
            "data.num_classes=10", f"data.batch_size={sizes.cost_batch}", "model.name=resnet18", "model.kwargs={}",
            "train.precision=bf16", f"train.device={device}", "train.epochs=2", "log.tensorboard=false",
            "run.progress=false", "run.plots=false", "schedule.warmup_epochs=0"]


def run_cost(device: Any, base: list[str], extra: list[str]) -> dict[str, float]:
    import tempfile

    from trickbag.recipe import load_recipe
    from trickbag.train.build import build

    recipe = load_recipe("digits", [*base, *extra])
    with tempfile.TemporaryDirectory(prefix="trickbag-gpu-") as tmp:
        trainer, _ = build(recipe, run_dir=Path(tmp))
        timer = CudaStepTimer(device, skip=1)
        trainer.plugins.insert(0, timer.closer)
        trainer.add_plugin(timer.opener)  # (also rebuilds the event dispatch for the insert)
        t0 = time.perf_counter()
        trainer.fit()
        sync(device)
        fit = time.perf_counter() - t0
    if not timer.batches:
        raise RuntimeError("no epoch was timed")
    return {"seconds": timer.wall / timer.batches, "fit": fit}


def trick_list(args: argparse.Namespace) -> list[str]:
    from trickbag.tricks import TRICKS

    if args.tricks:
        wanted = [t.strip() for t in args.tricks.split(",") if t.strip()]
        unknown = [t for t in wanted if t not in TRICKS]
        if unknown:
            raise SystemExit(f"--tricks: {unknown} are not registered tricks; registered: {', '.join(TRICKS)}")
        return wanted
    return list(QUICK_TRICKS) if args.quick else [t for t in TRICKS if t not in SKIP_TRICKS]


def cost_runs(device: Any, base: list[str], names: list[str], args: argparse.Namespace) -> tuple[dict, dict, list]:
    """off, t1, off, t2, off, ... per round (order rotated); a trick that fails is dropped with its reason."""
    for _ in range(args.warmup):
        run_cost(device, base, [])
    ok, failed = list(names), {}
    ratios: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    offs: list[float] = []
    for r in range(args.cost_rounds):
        order = ok[r % len(ok):] + ok[: r % len(ok)] if ok else []
        before = run_cost(device, base, [])
        offs.append(before["seconds"])
        for name in order:
            try:
                on = run_cost(device, base, [f"tricks.{name}.enabled=true", *EXTRA.get(name, [])])
            except Exception as exc:  # a trick that cannot run here is reported, not fatal
                failed[name] = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:150]}"
                ok.remove(name)
                continue
            after = run_cost(device, base, [])
            offs.append(after["seconds"])
            ratios[name].append((on["seconds"] / ((before["seconds"] + after["seconds"]) / 2), on["seconds"]))
            print(f"  round {r + 1}/{args.cost_rounds} {name:16s} step x{ratios[name][-1][0]:.3f}", file=sys.stderr,
                  flush=True)
            before = after
    return {n: ratios[n] for n in ok}, failed, offs


def tricks_table(C: Any, device: Any, sizes: Sizes, args: argparse.Namespace) -> None:
    base = cost_base(device, sizes)
    ratios, failed, offs = cost_runs(device, base, trick_list(args), args)
    rows = [["off (recipe as is)", f"{1000 * C.median(offs):.2f}", "1", "", ""]]
    for name, pairs in ratios.items():
        r = [p[0] for p in pairs]
        expected = "1.5-2.5" if name == "sam" else "<= 1.05"
        lo, hi = (1.5, 2.5) if name == "sam" else (0.0, 1.05)
        rows.append([name, f"{1000 * C.median(p[1] for p in pairs):.2f}", f"{C.median(r):.3f}", C.spread(r),
                     f"{expected} ({'yes' if lo <= C.median(r) <= hi else 'NO'})"])
    print(f"\n## Trick cost on the GPU (ResNet-18, batch {sizes.cost_batch}, {sizes.cost_image}x{sizes.cost_image}, "
          f"bf16, {sizes.cost_samples} generated images)\n")
    print(C.markdown_table(["trick", "ms/step", "step ratio", "range", "expected (met)"], rows))
    for name, why in failed.items():
        print(f"- {name}: not measured: {why}")
    print("\nstep: the batch loop of epoch 2 (EPOCH_START to EVAL_START, CUDA synchronised) / batches; ratio: on / "
          "mean of the two neighbouring off runs, median over rounds. Expected ranges are the CPU targets of "
          "benchmarks/trick_cost.py.", flush=True)


# --------------------------------------------------------------------------- 3. MFU
def _resnet50_step(device: Any, sizes: Sizes) -> tuple[Any, Any, Any, Any]:
    """(model, optimizer, images, labels): ResNet-50 in channels_last on the device, synthetic ImageNet batch."""
    import torch
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet50().to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    b, n = sizes.mfu_batch, sizes.mfu_image
    x = torch.randn(b, 3, n, n, device=device).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (b,), device=device)
    return model, opt, x, y


def train_flops(model: Any, x: Any, y: Any) -> int:
    """FLOPs of one forward + backward (bf16 autocast), counted by torch's FlopCounterMode."""
    import torch
    import torch.nn.functional as F
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        with torch.autocast(x.device.type, dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
    model.zero_grad(set_to_none=True)
    return int(counter.get_total_flops())


def time_steps(step: Any, device: Any, warmup: int, steps: int) -> float:
    """Seconds per call of ``step`` after ``warmup`` calls, the device synchronised around the timed ones."""
    for _ in range(warmup):
        step()
    sync(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    sync(device)
    return (time.perf_counter() - t0) / steps


def mfu_table(C: Any, device: Any, sizes: Sizes, args: argparse.Namespace, peak: float | None) -> None:
    import torch
    import torch.nn.functional as F

    from trickbag.train import Trainer

    model, opt, x, y = _resnet50_step(device, sizes)
    flops = train_flops(model, x, y)

    def step(m: Any) -> None:
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    def trainer_epoch(m: Any) -> None:  # the same step through trickbag.Trainer, sizes.mfu_steps updates
        Trainer(m, opt, [(x, y)] * sizes.mfu_steps, precision="bf16", device=device).fit()

    print(f"\n## ResNet-50 training step: bf16 autocast, channels_last, SGD; batch {sizes.mfu_batch} at "
          f"{sizes.mfu_image}x{sizes.mfu_image}\n")
    print(f"FLOPs per step (forward + backward, FlopCounterMode): {flops / 1e9:,.1f} GFLOP "
          f"({flops / sizes.mfu_batch / 1e9:.2f} per image); MFU = achieved / {peak or 'unknown'} TFLOP/s (dense "
          f"bf16 peak); {sizes.mfu_warmup} warm-up + {sizes.mfu_steps} timed steps per row; each row is printed as "
          "soon as it is measured.\n")
    header = ["variant", "ms/step", "images/s", "TFLOP/s", "MFU", "compile s"]
    print("| " + " | ".join(header) + " |\n|" + "|".join("---" for _ in header) + "|", flush=True)

    def show(row: list[str]) -> None:
        print("| " + " | ".join(row) + " |", flush=True)

    show(mfu_row("eager", time_steps(lambda: step(model), device, sizes.mfu_warmup, sizes.mfu_steps), flops,
                 sizes, peak, None))
    last_name, last_model = "eager", model
    if not args.no_compile:
        compiled = torch.compile(model, backend=args.compile_backend)
        sync(device)
        t0 = time.perf_counter()
        step(compiled)  # compilation of forward + backward
        sync(device)
        compile_s = time.perf_counter() - t0
        show(mfu_row("torch.compile", time_steps(lambda: step(compiled), device, sizes.mfu_warmup, sizes.mfu_steps),
                     flops, sizes, peak, compile_s))
        last_name, last_model = "torch.compile", compiled
    per_epoch = time_steps(lambda: trainer_epoch(last_model), device, 1, 1)
    show(mfu_row(f"trickbag.Trainer ({last_name})", per_epoch / sizes.mfu_steps, flops, sizes, peak, None))


def mfu_row(name: str, per_step: float, flops: int, sizes: Sizes, peak: float | None,
            compile_s: float | None) -> list[str]:
    tflops = flops / per_step / 1e12
    return [name, f"{1000 * per_step:.1f}", f"{sizes.mfu_batch / per_step:,.0f}", f"{tflops:.1f}",
            f"{100 * tflops / peak:.1f} %" if peak else "n/a", f"{compile_s:.1f}" if compile_s is not None else ""]


# --------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("benchmarks/gpu.py: no CUDA device on this machine; nothing measured (run it where CUDA is available)")
        return 0
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _common as C

    C.setup(args, "GPU: Trainer vs hand loop, trick cost, ResNet-50 MFU" + (" (--quick)" if args.quick else ""))
    device = torch.device(args.device)
    peak = peak_tflops(device, args.peak_tflops)
    device_report(device, peak)
    sizes = Sizes(args.quick, args.tiny)
    tables = {"trainer": lambda: trainer_table(C, device, sizes, args),
              "tricks": lambda: tricks_table(C, device, sizes, args),
              "mfu": lambda: mfu_table(C, device, sizes, args, peak)}
    failed = []
    for name in (s for s in SECTIONS if s in args.sections):
        t0 = time.perf_counter()
        try:
            tables[name]()
        except Exception as exc:  # one section's failure must not hide the others' tables
            import traceback

            traceback.print_exc(file=sys.stdout)
            print(f"\nsection {name} FAILED: {type(exc).__name__}: {exc}")
            failed.append(name)
        print(f"({name}: {time.perf_counter() - t0:.0f} s)\n", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
