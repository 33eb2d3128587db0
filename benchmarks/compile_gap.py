"""The compile gap: trickbag's Trainer with ``tricks.compile`` against a bare compiled train step, side by side.

Issue 29 measured on an H100 32.2 ms per step for the Trainer with ``torch.compile`` against 26.8 ms for a
bare compiled step (20 %), never profiled. This script measures the same gap on the CPU (inductor runs
here) or on CUDA (``--device cuda``; ``benchmarks/gpu_compile_gap.py`` is that), with:

* ``trainer``: ``trickbag train --quiet``'s own path, :func:`trickbag.runs.run.run_recipe` with
  ``quiet=True`` -- the recipe's plug-ins as ``trickbag train`` makes them (non-finite guard on, CSV and
  TensorBoard logging on, checkpoints, no progress bar) and ``tricks.compile.enabled=true``;
* ``bare``: the loop a user writes around a ``torch.compile``'d copy of the same model (same initial
  weights, same optimizer class and settings, same DataLoader object, cross-entropy): forward, loss,
  backward, ``optimizer.step()``, ``zero_grad(set_to_none=True)``, no host sync.

The data are ``data.name=fake`` vectors (``--features``), the model the recipe's MLP (``--hidden``), big
enough that a step takes ~10-50 ms on one CPU thread. Rounds interleave inside one run: each epoch of
the Trainer is one round; a plug-in (:class:`Interleave`) runs one bare epoch on the same loader before
(even rounds) or after (odd rounds) the Trainer's training batches, so both see the same machine load.
The Trainer's time is from its EPOCH_START to its last STEP (validation and the epoch's checkpoint are
outside); the bare epoch is timed whole. The first ``--warmup`` rounds (compilation) are discarded. The
table gives the median ms/step of each and the median per-round ratio trainer / bare.

``--profile`` runs one more Trainer epoch and one more bare epoch under cProfile and prints, per step,
the functions that the Trainer's epoch spends time in (µs/step), and ``torch._dynamo`` counters (graph
breaks, recompiles) after the run.

Findings (2026-11-28, 2-core AMD EPYC VM shared with other jobs, load average 6-9, 1 thread, torch 2.14.1;
MLP 512-1024-1024-10, batch 128, 30 steps per round):

==========================================  ===============  =================  ====================
variant                                     bare ms/step     Trainer ms/step    ratio (median)
==========================================  ===============  =================  ====================
main (4cf4ff0), 15 rounds                   54.55            66.19              1.258 (1.00-2.08)
fused check patched in, 11 rounds            39.03            37.53              1.061 (0.64-1.19)
main again, 11 rounds, just before:          51.20            63.27              1.253 (0.85-1.42)
fused check patched in, 11 rounds, after     78.65            72.11              0.969 (0.67-1.20)
with the fused check in the guard, 11 r.     19.18            19.78              0.985 (0.65-1.13)
the same, 21 rounds (load average ~1.1)      20.96            21.92              1.046 (0.67-1.17)
==========================================  ===============  =================  ====================

The last two rows are the guard as it is now (``nonfinite._any_nonfinite`` uses GradScaler's fused kernel);
the rows above were measured before, the patched ones with the check swapped in at run time.

What the Trainer adds per step (cProfile of one epoch, cumulative µs per step; the machine was loaded,
so read the sizes relative to each other; no graph break, no recompile, 3 graphs):

* the non-finite guard's gradient check, ``NonFiniteGuard.vetoes`` -> ``_flags`` -> ``_any_nonfinite``:
  **12 787 µs** -- ``torch._foreach_norm(grads, inf)`` takes a scalar path on the CPU (9.2 ms for 1.6 M
  floats alone, against 0.37 ms for ``torch._amp_foreach_non_finite_check_and_unscale_``, the fused
  kernel GradScaler uses, same answer); with the fused check (now the guard's): 1 315 µs. Plus one
  host sync (``flags.tolist()``) per update, free on the CPU, a pipeline stall on a GPU;
* the guard's loss check ``watch_loss`` (isfinite, all, or: 3 small eager ops): 587 µs; ``before_batch``: 145;
  ``sharded.to_local`` / ``is_dtensor`` on every gradient each step: 67;
* the events' Python work, ``_emit`` (~5 events per step): 824 µs, of which TensorBoard's ``on_step``
  609 (``float(loss)`` + ``add_scalar`` every 10th step) and the CSV logger's 167; ``_checkpoint``: 143;
  ``agree_stop`` -> ``is_distributed``: 154;
* the epoch meter: the task's train statistic (argmax, ==, sum; eager, outside the compiled graph) 244 µs,
  ``EpochMeter.add`` 48;
* ``_update``'s own Python (normalise, veto bookkeeping, the LR schedule's step, which the bare loop
  does not have): 450 µs.

Run: ``.venv/bin/python benchmarks/compile_gap.py [--rounds 15] [--threads 1] [--profile] [--device cpu|cuda]``
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from trickbag.nn import unwrap  # noqa: E402
from trickbag.plugin.interface import Plugin  # noqa: E402
from trickbag.recipe import load_recipe  # noqa: E402


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Interleave(Plugin):
    """Times the Trainer's training batches of each epoch and runs one bare compiled epoch beside them."""

    name = "compile_gap"

    def __init__(self, profile: bool) -> None:
        self.profile = profile
        self.trainer_s: list[float] = []
        self.bare_s: list[float] = []
        self.steps: list[int] = []
        self.t0 = 0.0
        self.bare: Any = None
        self.profiles: dict[str, pstats.Stats] = {}
        self._prof: cProfile.Profile | None = None

    def on_fit_start(self, state: Any) -> None:
        model = copy.deepcopy(unwrap(state.model))
        self.device = state.device
        self.bare_model = torch.compile(model)
        opt = state.optimizer
        self.bare_opt = type(opt)(model.parameters(), **opt.defaults)

    def _bare_epoch(self, state: Any, profiled: bool) -> None:
        model, opt = self.bare_model, self.bare_opt
        model.train()
        prof = cProfile.Profile() if profiled else None
        _sync(self.device)
        t0 = time.perf_counter()
        if prof is not None:
            prof.enable()
        for x, y in state.train_loader:
            x, y = x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        _sync(self.device)
        if prof is not None:
            prof.disable()
            self.profiles["bare"] = pstats.Stats(prof)
        self.bare_s.append(time.perf_counter() - t0)

    def _profiling(self, state: Any) -> bool:
        return self.profile and state.epoch == state.max_epochs - 1

    def on_epoch_start(self, state: Any) -> None:
        if state.epoch % 2 == 0:
            self._bare_epoch(state, self._profiling(state))
        _sync(self.device)
        if self._profiling(state):
            self._prof = cProfile.Profile()
            self._prof.enable()
        self.t0 = time.perf_counter()

    def on_step(self, state: Any) -> None:
        if state.batch_idx + 1 == state.batches_per_epoch:
            _sync(self.device)
            self.trainer_s.append(time.perf_counter() - self.t0)
            self.steps.append(state.batches_per_epoch)
            if self._prof is not None:
                self._prof.disable()
                self.profiles["trainer"] = pstats.Stats(self._prof)
                self._prof = None

    def on_epoch_end(self, state: Any) -> None:
        if state.epoch % 2 == 1:
            self._bare_epoch(state, self._profiling(state))


def recipe_overrides(args: argparse.Namespace, run_dir: str) -> list[str]:
    epochs = args.warmup + args.rounds + (1 if args.profile else 0)
    hidden = ",".join(str(h) for h in args.hidden)
    return ["data.name=fake", f"data.shape=[{args.features}]", "data.num_classes=10",
            f"data.num_samples={args.samples}", "data.val_fraction=0.02", "data.test_fraction=0.02",
            "data.augment=false", f"data.batch_size={args.batch}", "data.drop_last=true", "model.name=mlp",
            f"model.kwargs={{hidden: [{hidden}], dropout: 0.0}}", "schedule.warmup_epochs=0",
            f"train.epochs={epochs}", f"train.threads={args.threads}", f"train.device={args.device}",
            "train.monitor=train/loss", "train.mode=min", "tricks.compile.enabled=true",
            f"run.dir={run_dir}", "run.name=compile-gap"]


def per_step_profile(stats: pstats.Stats, steps: int, top: int, only: str = "") -> list[tuple[str, float, float, int]]:
    """(function, cumulative µs/step, own µs/step, calls/step) of the ``top`` functions by cumulative time
    (``only``: those whose file path holds it)."""
    rows = []
    for (file, line, fn), (_cc, nc, tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        if only and only not in file:
            continue
        where = file.split("site-packages/")[-1].split("src/")[-1]
        rows.append((f"{where}:{line}({fn})", 1e6 * ct / steps, 1e6 * tt / steps, round(nc / steps, 2)))
    rows.sort(key=lambda r: -r[1])
    return rows[:top]


def print_profile(name: str, stats: pstats.Stats, steps: int, top: int, only: str = "") -> None:
    what = f"functions of {only}" if only else "functions"
    print(f"\n## cProfile of one {name} epoch ({steps} steps): top {top} {what} by cumulative time, per step")
    print(C.markdown_table(["function", "cum µs/step", "own µs/step", "calls/step"],
                           [[f, f"{c:.0f}", f"{o:.0f}", k] for f, c, o, k in
                            per_step_profile(stats, steps, top, only)]))


def dynamo_counters() -> str:
    from torch._dynamo.utils import counters

    breaks = dict(counters["graph_break"])
    stats = dict(counters["stats"])
    return (f"graph breaks: {sum(breaks.values())} {breaks or ''}; unique graphs: {stats.get('unique_graphs', 0)}; "
            f"frames compiled: {stats.get('calls_captured', 'n/a')}; recompiles: {dict(counters['recompiles']) or 0}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    C.add_common_args(parser, rounds=15, warmup=2)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--features", type=int, default=512, help="input features of the fake data (default 512)")
    parser.add_argument("--hidden", type=int, nargs="+", default=[1024, 1024], help="MLP widths (default 1024 1024)")
    parser.add_argument("--batch", type=int, default=128, help="batch size (default 128)")
    parser.add_argument("--samples", type=int, default=4096, help="fake samples (default 4096: ~30 steps/epoch)")
    parser.add_argument("--profile", action="store_true", help="one more epoch of each under cProfile")
    parser.add_argument("--top", type=int, default=30, help="profile rows printed (default 30)")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("compile_gap: no CUDA device here; nothing measured (run it where a GPU is lent)")
        return 0
    C.setup(args, f"compile gap: Trainer (trickbag train --quiet, tricks.compile) vs bare compiled step, {args.device}")
    if args.device == "cuda":
        print(f"device: {torch.cuda.get_device_name()}\n", flush=True)
    from trickbag.runs.run import run_recipe

    plug = Interleave(args.profile)
    with tempfile.TemporaryDirectory() as tmp:
        recipe = load_recipe("digits", recipe_overrides(args, tmp))
        print("recipe overrides: " + " ".join(recipe_overrides(args, "TMP")), flush=True)
        run_recipe(recipe, quiet=True, plugins=[plug])
    n = args.warmup
    measured = slice(n, n + args.rounds)
    steps = plug.steps[measured]
    trainer_ms = [1e3 * t / s for t, s in zip(plug.trainer_s[measured], steps)]
    bare_ms = [1e3 * t / s for t, s in zip(plug.bare_s[measured], steps)]
    ratio = C.ratios(trainer_ms, bare_ms)
    print(f"\n{args.rounds} rounds of {steps[0] if steps else 0} steps (batch {args.batch}), "
          f"{args.warmup} warm-up rounds discarded; load average now: {Path('/proc/loadavg').read_text().strip()}")
    print(C.markdown_table(
        ["variant", "ms/step (median)", "spread", "ratio to bare (median of rounds)", "ratio spread"],
        [["bare compiled step", f"{C.median(bare_ms):.2f}", C.spread(bare_ms), "1", ""],
         ["Trainer, trickbag train --quiet", f"{C.median(trainer_ms):.2f}", C.spread(trainer_ms),
          f"{C.median(ratio):.3f}", C.spread(ratio)]]))
    print(f"gap: {C.median(trainer_ms) - C.median(bare_ms):+.2f} ms/step (target: ratio <= 1.05)")
    print(dynamo_counters())
    if args.profile and "trainer" in plug.profiles:
        per = plug.steps[-1]
        print_profile("trainer", plug.profiles["trainer"], per, args.top)
        print_profile("trainer", plug.profiles["trainer"], per, args.top, only="trickbag/")
        print_profile("bare", plug.profiles["bare"], per, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
