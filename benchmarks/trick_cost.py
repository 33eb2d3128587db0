"""Trick cost: per-step time of the default recipe with each recipe trick on vs off, side by side.

For every trick registered in ``trickbag.tricks`` the ``digits`` recipe is built with
``tricks.<name>.enabled=true`` (plus the few settings a trick needs, listed in ``EXTRA``) and trained
for ``--epochs`` epochs by ``trickbag.train.build.build`` + ``Trainer.fit`` (no loggers, no checkpoints).
A pair of timing plug-ins measures the batch loop of every epoch after the first (the first one
pays one-time costs such as ``torch.compile``): from the end of EPOCH_START to the start of
EVAL_START, wall and CPU time, divided by the number of batches.  The whole ``fit`` (evaluation and fit-end work
included, e.g. TTA, EMA raw-weight evaluation, SWA's BatchNorm pass) is reported as well.

Runs alternate in one process as ``off, t1, off, t2, off, ...`` (trick order rotated each round); a
trick's ratio in a round is its time over the mean of the two ``off`` runs around it; the table shows
the median over rounds.  Expected: SAM ~2x (two forward/backward passes per update); every other
trick <= 1.05x.  Tricks in the recipe schema without a registered plug-in, or whose build fails,
are listed as not measured, with the reason.

Run: ``.venv/bin/python benchmarks/trick_cost.py [--rounds 5] [--epochs 2] [--only sam,ema] [--threads 1]``
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402
import torch  # noqa: E402

from trickbag.errors import TrickbagError  # noqa: E402
from trickbag.models import SmallCNN  # noqa: E402
from trickbag.plugin.interface import Plugin  # noqa: E402
from trickbag.recipe import TricksConfig, load_recipe  # noqa: E402
from trickbag.train.build import build  # noqa: E402

#: what a trick needs besides enabled=true to run on the digits recipe (8x8 images, SmallCNN)
EXTRA: dict[str, list[str]] = {
    "distillation": ["tricks.distillation.teacher=trick_cost:teacher"],
    "freeze": ["tricks.freeze.patterns=[features.0.*]"],
    "multiscale": ["tricks.multiscale.train_sizes=[6,8,10]", "tricks.multiscale.finetune_epochs=0"],
}
#: tricks the digits SmallCNN cannot run, measured on/off against their own base recipe ({images}: a folder of
#: random 16x16 PNGs this script writes)
BASES: dict[str, list[str]] = {
    "drop_path": ["data.name=fake", "data.num_samples=512", "data.shape=[3,16,16]", "model.name=resnet18",
                  "model.kwargs={{}}"],  # {{}}: {} after .format
    "augment": ["data.name=imagefolder", "data.root={images}", "data.image_size=16", "data.augment=true"],
}
NOTES: dict[str, str] = {
    "drop_path": "on resnet18, fake 3x16x16 data (its own off runs)",
    "augment": "RandAugment on a folder of 16x16 PNGs (its own off runs)",
    "distillation": "teacher: a second SmallCNN (one extra forward per batch, no backward)",
    "freeze": "first conv block frozen (fewer gradients: may be faster)",
    "multiscale": "batches resized to 6/8/10 px (mean pixel count ~ 8x8)",
    "sam": "two forward/backward passes per update",
    "profile": "profiles 5 updates of epoch 0 only; see the fit column",
    "tta": "evaluation-time only; see the fit column",
    "compile": "first epoch (compilation) not in the step column",
    "swa": "averaging starts in the last epoch",
}
#: expected range; every other trick: <= 1.05. augment: image operations in the loader, here in the main process
#: (data.num_workers=0), on 16x16 images where the network is cheap: the whole policy shows in the step time
TARGETS = {"sam": (1.5, 2.5), "augment": (1.0, 1.6)}
DEFAULT_TARGET = 1.05


def teacher() -> torch.nn.Module:
    """Distillation teacher: an untrained SmallCNN of the student's size (digits: 1x8x8, 10 classes)."""
    return SmallCNN(1, 10)


class StepTimer:
    """Wall / CPU time of the batch loops of epochs >= ``skip``: from the end of EPOCH_START to the
    start of EVAL_START (or of EPOCH_END when there is no evaluation), so the work tricks do at those
    events (EMA / SWA weight swaps, SWA's BatchNorm pass, unfreezing) is not counted as step time.

    Two plug-ins share it: ``opener`` goes last in the plug-in list (it runs after every other
    plug-in at EPOCH_START and, events in reverse, before them at EPOCH_END), ``closer`` goes first
    (it runs before every other plug-in at EVAL_START).
    """

    def __init__(self, skip: int) -> None:
        self.skip = skip
        self.wall = self.cpu = 0.0
        self.batches = 0
        self._mark: tuple[float, float] | None = None
        timer = self

        class Opener(Plugin):
            def on_epoch_start(self, state: Any) -> None:
                timer._mark = (time.perf_counter(), time.process_time()) if state.epoch >= timer.skip else None

            def on_epoch_end(self, state: Any) -> None:
                timer._close(state)

        class Closer(Plugin):
            def on_eval_start(self, state: Any) -> None:
                timer._close(state)

        self.opener, self.closer = Opener(), Closer()

    def _close(self, state: Any) -> None:
        if self._mark is not None:
            self.wall += time.perf_counter() - self._mark[0]
            self.cpu += time.process_time() - self._mark[1]
            self.batches += state.batches_per_epoch
            self._mark = None


def run(overrides: list[str], epochs: int) -> dict[str, float]:
    recipe = load_recipe("digits", [f"train.epochs={epochs}", *overrides])
    with tempfile.TemporaryDirectory(prefix="trickbag-cost-") as tmp:
        trainer, _ = build(recipe, run_dir=Path(tmp))
        timer = StepTimer(skip=1)
        trainer.plugins.insert(0, timer.closer)
        trainer.add_plugin(timer.opener)  # (add_plugin also rebuilds the event dispatch for the insert)
        t0 = time.perf_counter()
        trainer.fit()
        fit = time.perf_counter() - t0
    if not timer.batches:
        raise RuntimeError("no epoch was timed")
    return {"seconds": timer.wall / timer.batches, "cpu": timer.cpu / timer.batches, "fit": fit}


def image_folder(root: Path) -> Path:
    """Two classes of 64 random 16x16 RGB PNGs (for tricks.augment)."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    for cls in ("a", "b"):
        (root / cls).mkdir(parents=True, exist_ok=True)
        for i in range(64):
            Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)).save(root / cls / f"{i}.png")
    return root


def on_overrides(name: str, images: Path) -> tuple[list[str], list[str]]:
    """(the off run's overrides, the on run's) of a trick."""
    base = [o.format(images=images) for o in BASES.get(name, [])]
    return base, [*base, f"tricks.{name}.enabled=true", *EXTRA.get(name, [])]


def trick_names() -> tuple[list[str], list[str]]:
    """(registered tricks in plug-in order, schema sections without a registered plug-in)."""
    from trickbag.train import tricks as T

    registered = [n for n in T.TRICKS if n in TricksConfig.model_fields]
    missing = [n for n in TricksConfig.model_fields if n not in T.TRICKS]
    return registered, missing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2, help="epochs per run; the first is not timed (default 2)")
    parser.add_argument("--only", default="", help="comma-separated trick names (default: all registered)")
    C.add_common_args(parser, rounds=5, warmup=1)
    args = parser.parse_args(argv)
    if args.epochs < 2 or args.rounds < 1:
        parser.error("--epochs must be >= 2 (the first epoch is not timed) and --rounds >= 1")
    C.setup(args, "Trick cost: per-step time of the digits recipe with each trick on vs off")
    names, missing = trick_names()
    if args.only:
        wanted = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in wanted if n not in names]
        if unknown:
            parser.error(f"--only: {unknown} are not registered tricks; registered: {', '.join(names)}")
        names = wanted

    images = image_folder(Path(tempfile.mkdtemp(prefix="trickbag-cost-images-")))
    # validate each trick's build once (also the warm-up of its code paths)
    failed: dict[str, str] = {}
    ok: list[str] = []
    print("checking that every trick builds and runs ...", file=sys.stderr, flush=True)
    for _ in range(args.warmup):
        run([], args.epochs)
    for name in names:
        try:
            run(on_overrides(name, images)[1], args.epochs)
            ok.append(name)
        except (TrickbagError, RuntimeError, ValueError, TypeError, ImportError) as exc:
            failed[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:160]
    print(f"{len(ok)} tricks measured, {args.rounds} rounds of off/on alternation, {args.epochs} epochs per run "
          f"(epoch 1.. timed)", flush=True)

    off_runs: list[list[dict[str, float]]] = []
    on_runs: dict[str, list[dict[str, float]]] = {n: [] for n in ok}
    pair_ratios: dict[str, list[tuple[float, float, float]]] = {n: [] for n in ok}
    for r in range(args.rounds):
        order = ok[r % len(ok):] + ok[: r % len(ok)] if ok else []
        before = run([], args.epochs)
        offs = [before]
        for name in order:
            off, with_trick = on_overrides(name, images)
            own = run(off, args.epochs) if name in BASES else before  # a trick on another base: its own off runs
            on = run(with_trick, args.epochs)
            after = run(off, args.epochs)
            if name in BASES:
                own_after, after = after, before
            else:
                offs.append(after)
                own, own_after = before, after
            on_runs[name].append(on)
            pair_ratios[name].append(tuple(on[k] / ((own[k] + own_after[k]) / 2) for k in ("seconds", "cpu", "fit")))
            print(f"  round {r + 1}/{args.rounds} {name:16s} step x{pair_ratios[name][-1][0]:.3f} (wall) "
                  f"x{pair_ratios[name][-1][1]:.3f} (CPU)", file=sys.stderr, flush=True)
            before = after
        off_runs.append(offs)

    all_off = [o for offs in off_runs for o in offs]
    rows = [["off (recipe as is)", f"{1000 * C.median(o['seconds'] for o in all_off):.1f}",
             f"{1000 * C.median(o['cpu'] for o in all_off):.1f}", "1", "", "1", "1", "", "", ""]]
    for name in ok:
        pr = pair_ratios[name]
        wall, cpu, fit = ([p[i] for p in pr] for i in range(3))
        lo, hi = TARGETS.get(name, (0.0, DEFAULT_TARGET))
        target = f"{lo:g}-{hi:g}" if lo else f"<= {hi:g}"
        met = " / ".join("yes" if lo <= C.median(x) <= hi else "NO" for x in (wall, cpu))
        rows.append([
            name,
            f"{1000 * C.median(o['seconds'] for o in on_runs[name]):.1f}",
            f"{1000 * C.median(o['cpu'] for o in on_runs[name]):.1f}",
            f"{C.median(wall):.3f}",
            C.spread(wall),
            f"{C.median(cpu):.3f}",
            f"{C.median(fit):.3f}",
            target,
            met,
            NOTES.get(name, ""),
        ])
    print()
    print(C.markdown_table(["trick", "wall ms/step", "CPU ms/step", "step ratio (wall)", "range", "step ratio (CPU)",
                            "fit ratio (wall)", "expected", "met (wall / CPU)", "note"], rows))
    not_measured = [(n, f"build/run failed: {msg}") for n, msg in failed.items()]
    not_measured += [(n, "no plug-in registered yet") for n in missing]
    if not_measured:
        print("\nnot measured:")
        for n, why in not_measured:
            print(f"- {n}: {why}")
    print("\nstep: the batch loop of epochs >= 1 (EPOCH_START to EVAL_START) / batches; ratio: on / mean of the two"
          " neighbouring off runs, median over rounds. fit: the whole Trainer.fit (evaluation included).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
