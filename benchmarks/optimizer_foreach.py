"""torch's optimizers on the CPU: single-tensor loop (the default there) vs ``foreach=True``.

For the built-in recipes' models (digits CNN on 8x8 images, the MNIST-1D CNN, a ResNet-18 on 32x32)
with the recipes' optimizers (SGD with Nesterov momentum and weight decay; AdamW), one training step
(forward, backward, ``optimizer.step()``) on a fixed batch is timed, and ``optimizer.step()`` alone.
Both variants run in this process, alternating each round (``_common.alternate``); the table gives the
median per-round ratio foreach / single-tensor (below 1: foreach is faster), and whether the two give
bit-identical weights after 20 updates from the same start.

Run: ``.venv/bin/python benchmarks/optimizer_foreach.py [--rounds 15] [--threads 1]``
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from trickbag.models import build_model  # noqa: E402

MODELS = {  # name: (model name, input shape, classes, batch)
    "digits CNN": ("digits_cnn", (1, 8, 8), 10, 32),
    "MNIST-1D CNN": ("fast_signal_cnn", (1, 40), 10, 64),
    "ResNet-18 32x32": ("resnet18", (3, 32, 32), 10, 32),
}
OPTIMIZERS = {
    "SGD nesterov": lambda p, fe: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4,
                                                  foreach=fe),
    "AdamW": lambda p, fe: torch.optim.AdamW(p, lr=0.02, betas=(0.9, 0.99), weight_decay=0.2, foreach=fe),
}


def _setup(model_name: str, shape: tuple, classes: int, batch: int, make_opt, foreach: bool):
    torch.manual_seed(0)
    model = build_model(model_name, shape, classes)
    opt = make_opt(model.parameters(), foreach)
    x, y = torch.randn(batch, *shape), torch.randint(0, classes, (batch,))
    return model, opt, x, y


def _step(model, opt, x, y) -> None:
    opt.zero_grad(set_to_none=True)
    F.cross_entropy(model(x), y).backward()
    opt.step()


def _identical(spec, make_opt) -> bool:
    a = _setup(*spec, make_opt, False)
    b = _setup(*spec, make_opt, True)
    b[0].load_state_dict(copy.deepcopy(a[0].state_dict()))
    for _ in range(20):
        _step(*a)
        _step(*b)
    return all(torch.equal(u, v) for u, v in zip(a[0].state_dict().values(), b[0].state_dict().values()))


def _variant(spec, make_opt, foreach: bool, steps: int):
    model, opt, x, y = _setup(*spec, make_opt, foreach)
    _step(model, opt, x, y)  # optimizer state exists

    def run() -> dict:
        t_step = 0.0
        t0 = time.perf_counter()
        for _ in range(steps):
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(x), y).backward()
            t1 = time.perf_counter()
            opt.step()
            t_step += time.perf_counter() - t1
        return {"seconds": time.perf_counter() - t0, "opt": t_step}

    return run


def main() -> None:
    ap = C.add_common_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]), rounds=15, warmup=2)
    ap.add_argument("--steps", type=int, default=20, help="training steps per variant per round")
    args = ap.parse_args()
    C.setup(args, "optimizer.step on the CPU: single-tensor vs foreach")
    rows = []
    for mname, spec in MODELS.items():
        for oname, make_opt in OPTIMIZERS.items():
            res = C.alternate({"single": _variant(spec, make_opt, False, args.steps),
                               "foreach": _variant(spec, make_opt, True, args.steps)},
                              args.rounds, args.warmup, progress=False)
            single, fe = res["single"], res["foreach"]
            step_ratio = C.ratios([r["seconds"] for r in fe], [r["seconds"] for r in single])
            opt_ratio = C.ratios([r["opt"] for r in fe], [r["opt"] for r in single])
            ms = lambda rs, k: 1000 * C.median(r[k] for r in rs) / args.steps  # noqa: E731
            rows.append([mname, oname, f"{ms(single, 'seconds'):.2f}", f"{ms(fe, 'seconds'):.2f}",
                         f"{C.median(step_ratio):.3f} ({C.spread(step_ratio)})",
                         f"{ms(single, 'opt'):.3f}", f"{ms(fe, 'opt'):.3f}", f"{C.median(opt_ratio):.3f}",
                         "yes" if _identical(spec, make_opt) else "no"])
            print(f"  {mname} / {oname} done", file=sys.stderr, flush=True)
    print(C.markdown_table(["model", "optimizer", "train step ms, single", "foreach", "foreach / single",
                            "opt.step ms, single", "foreach", "foreach / single", "same weights"], rows))
    print(f"\nload average at the end: {', '.join(f'{x:.1f}' for x in __import__('os').getloadavg())}")


if __name__ == "__main__":
    main()
