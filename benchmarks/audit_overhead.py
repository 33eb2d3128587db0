"""Runtime-audit overhead: a SmallCNN training step with and without ``trickbag.audit.audit``, side by side.

Two variants run the same hand-written loop (``zero_grad``, forward, cross-entropy, ``backward``,
``clip_grad_norm_``, ``step``, per-step LR scheduler) on ``SmallCNN`` with digits-sized inputs
(``1x8x8``, batch 32, 10 classes), from the same initial weights on the same batches:

* ``plain``: the loop as written;
* ``audited``: the same loop inside ``with audit(model, optimizer, report=False):`` (optimizer,
  scheduler and clipping wrapped, forward pre-hook and gradient hook installed, parameter coverage
  checked every step; entering and leaving the audit is inside the timed region).

The same pair also runs on a 4x4 linear layer (``tiny plain`` / ``tiny audited``, 20x more steps),
whose step is so cheap that the audit's absolute cost per step (microseconds) shows through the noise
of a shared machine; it is printed next to the SmallCNN step time.

The variants alternate inside one process (order rotated every round, warm-up rounds discarded); the
table gives the median time per step, the median over rounds of the per-round ratio to ``plain`` and
its range, for wall and CPU time.  Target: ratio < 1.05.  The audit never changes the numbers, so both
variants must end with bit-identical weights; the script checks it.

Run: ``.venv/bin/python benchmarks/audit_overhead.py [--steps 40] [--rounds 21] [--threads 1]``
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from trickbag.audit import audit  # noqa: E402
from trickbag.models import SmallCNN  # noqa: E402

TARGET = 1.05


class Setup:
    """Initial weights and the batches every variant trains on (``tiny``: a 4x4 linear layer, whose step
    is so cheap that the audit's absolute cost per step shows)."""

    def __init__(self, steps: int, tiny: bool = False, seed: int = 0) -> None:
        self.tiny = tiny
        torch.manual_seed(seed)
        self.init = self.new_model().state_dict()
        g = torch.Generator().manual_seed(seed + 1)
        shape, classes = ((32, 4), 4) if tiny else ((32, 1, 8, 8), 10)
        self.batches = [(torch.randn(*shape, generator=g), torch.randint(0, classes, (32,), generator=g))
                        for _ in range(steps)]
        self.last: dict[str, dict[str, torch.Tensor]] = {}

    def new_model(self) -> torch.nn.Module:
        return torch.nn.Linear(4, 4) if self.tiny else SmallCNN(1, 10)

    def fresh(self) -> tuple[torch.nn.Module, torch.optim.Optimizer, Any]:
        torch.manual_seed(2)  # dropout draws from the global generator: same stream for every run
        model = self.new_model()
        model.load_state_dict(self.init)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4)
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=len(self.batches) + 1)
        return model, opt, sched


def train(model: torch.nn.Module, opt: torch.optim.Optimizer, sched: Any, batches: list) -> None:
    model.train()
    for x, y in batches:
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 2.0)
        opt.step()
        sched.step()


def variant(setup: Setup, name: str) -> dict[str, float]:
    model, opt, sched = setup.fresh()
    t0, c0 = time.perf_counter(), time.process_time()
    if name.endswith("audited"):
        with audit(model, opt, report=False) as report:
            train(model, opt, sched, setup.batches)
        if report.findings:
            raise SystemExit(f"the benchmark loop is correct, yet the audit reported: {report.findings}")
    else:
        train(model, opt, sched, setup.batches)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    setup.last[name] = {k: v.clone() for k, v in model.state_dict().items()}
    return {"seconds": wall, "cpu": cpu}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    C.add_common_args(parser, rounds=21, warmup=2)
    parser.add_argument("--steps", type=int, default=40, help="training steps per run (default 40)")
    args = parser.parse_args(argv)
    C.setup(args, "Runtime audit overhead: SmallCNN step (1x8x8, batch 32) with vs without trickbag.audit")
    setup, tiny = Setup(args.steps), Setup(20 * args.steps, tiny=True)
    names = ["plain", "audited"]
    runs = {n: (lambda n=n: variant(setup, n)) for n in names}
    runs.update({f"tiny {n}": (lambda n=n: variant(tiny, f"tiny {n}")) for n in names})
    res = C.alternate(runs, args.rounds, args.warmup)
    same = all(torch.equal(setup.last["plain"][k], v) for k, v in setup.last["audited"].items()) and \
        all(torch.equal(tiny.last["tiny plain"][k], v) for k, v in tiny.last["tiny audited"].items())
    rows = []
    for n in names:
        wall = [r["seconds"] for r in res[n]]
        cpu = [r["cpu"] for r in res[n]]
        rw = C.ratios(wall, [r["seconds"] for r in res["plain"]])
        rc = C.ratios(cpu, [r["cpu"] for r in res["plain"]])
        met = "" if n == "plain" else \
            f"{'yes' if C.median(rw) < TARGET else 'NO'} / {'yes' if C.median(rc) < TARGET else 'NO'}"
        rows.append([n, f"{1e3 * C.median(wall) / args.steps:.2f}", f"{C.median(rw):.3f}", C.spread(rw),
                     f"{1e3 * C.median(cpu) / args.steps:.2f}", f"{C.median(rc):.3f}", C.spread(rc),
                     "" if n == "plain" else f"< {TARGET}", met])
    print(C.markdown_table(["variant", "wall ms/step", "wall ratio", "wall ratio range", "CPU ms/step",
                            "CPU ratio", "CPU ratio range", "target", "met (wall / CPU)"], rows))
    extra = [C.median([(a["cpu"] - p["cpu"]) / (20 * args.steps) for a, p in zip(res["tiny audited"],
                                                                                   res["tiny plain"])])]
    small = C.median([r["cpu"] for r in res["plain"]]) / args.steps
    print(f"\naudit cost per step (CPU, median over rounds, measured on a 4x4 linear model whose step is "
          f"{1e6 * C.median([r['cpu'] for r in res['tiny plain']]) / (20 * args.steps):.0f} us): "
          f"{1e6 * extra[0]:.1f} us = {100 * extra[0] / small:.2f} % of the SmallCNN step")
    print(f"same final weights (bit for bit): {'yes' if same else 'NO'}")
    print(f"load average at the end (1/5/15 min): {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
