"""Loss spikes: what ``train.spike`` costs, what it saves, and that it stays silent on clean runs.

Three parts (each also alone with ``--only``):

* ``inject``: the ``digits`` recipe with finite loss spikes planted at fixed updates (the logits of those batches
  multiplied by ``--factor``, default -30: the confident become confidently wrong, losses 10-1000x the usual), run
  clean, unguarded, ``spike=skip`` and ``spike=rollback`` over ``--seeds``; test accuracy of the last weights per
  arm, mean and worst over seeds. Expected: rollback within 1 point of clean; unguarded not.
* ``overhead``: per-update time of the clean ``digits`` recipe with the guard off / skip / rollback, in one process,
  alternating (order rotated each round), fixed threads; the median over rounds of each arm's time over off's.
  Expected <= 1.03.
* ``clean``: every built-in recipe, seeds ``--clean-seeds`` (default 0-4), with ``train.spike=skip``: the guard must
  never fire (then the weights equal the unguarded run's: the trainer takes the same path,
  ``tests/reliability/test_spike.py::test_a_clean_run_is_untouched``). Prints each run's spikes and the largest
  loss-over-threshold ratio it saw (how far from firing). Slow: about one run of each recipe per seed.

Run: ``.venv/bin/python benchmarks/spike_guard.py [--only inject,overhead,clean] [--seeds 3] [--rounds 5]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

from trickbag.plugin.interface import Plugin  # noqa: E402
from trickbag.recipe import load_recipe  # noqa: E402
from trickbag.train.build import build  # noqa: E402

QUIET = ["run.progress=false", "log.tensorboard=false", "run.plots=false"]
RECIPES = ["digits", "digits-tricks", "mnist1d", "tabular", "distill", "imagefolder-finetune"]


class PlantSpikes(Plugin):
    """Multiply the logits of the loader batches at the given global batch numbers by ``factor`` in the loss."""

    def __init__(self, at: set[int], factor: float) -> None:
        self.at, self.factor, self.seen = at, factor, 0
        self.ratios: list[float] = []  # each planted loss over the batch's own loss

    def on_batch_start(self, state: Any) -> None:
        self.seen += 1

    def on_loss(self, state: Any) -> None:
        if self.seen - 1 in self.at:
            own = float(state.loss.detach())
            state.loss = state.loss_fn(state.output * self.factor, state.batch[1])
            self.ratios.append(float(state.loss.detach()) / max(own, 1e-12))


class Threshold(Plugin):
    """The largest ratio of a micro-batch's loss to the spike level (1.0 = it would fire) seen in a run."""

    def __init__(self, guard: Any) -> None:
        self.guard, self.worst = guard, 0.0

    def on_after_backward(self, state: Any) -> None:
        level = self.guard.level()
        if level is not None and state.loss is not None:
            self.worst = max(self.worst, float(state.loss.detach()) / level)


def _test_acc(trainer: Any, ctx: Any) -> float:
    return float(trainer.evaluate(ctx.test_loader)["acc"])


def _run(recipe: str, overrides: list[str], plugins: list[Plugin] = ()) -> tuple[Any, Any]:
    trainer, ctx = build(load_recipe(recipe, [*QUIET, *overrides]))
    for p in plugins:
        trainer.add_plugin(p)
    trainer.fit()
    return trainer, ctx


def inject(args: argparse.Namespace) -> None:
    epochs, per_epoch = 30, 41  # digits: 1293 training images in batches of 32
    at = {per_epoch * e + b for e in (12, 20) for b in range(0, 8)}  # two bursts of 8 updates, mid-run
    rows, acc, ratios = [], {}, []
    arms = {"clean": [], "unguarded": [], "skip": ["train.spike=skip"], "rollback": ["train.spike=rollback"]}
    for seed in range(args.seeds):
        for arm, extra in arms.items():
            plant = [] if arm == "clean" else [PlantSpikes(at, args.factor)]
            t0 = time.perf_counter()
            trainer, ctx = _run("digits", [f"train.seed={seed}", f"train.epochs={epochs}", *extra], plant)
            ratios += plant[0].ratios if plant else []
            acc.setdefault(arm, []).append(_test_acc(trainer, ctx))
            g = trainer.spike
            print(f"  seed {seed} {arm:9s} test acc {acc[arm][-1]:.4f}  spikes {g.spikes if g else '-'}  rollbacks "
                  f"{g.rollbacks if g else '-'}  {time.perf_counter() - t0:.0f} s", flush=True)
    for arm, values in acc.items():
        gap = 100 * (statistics.mean(acc["clean"]) - statistics.mean(values))
        rows.append([arm, f"{statistics.mean(values):.4f}", f"{min(values):.4f}", f"{gap:+.2f}"])
    print(f"\nspikes planted at {len(at)} updates (logits x{args.factor:g}: each planted loss {min(ratios):.0f}x to "
          f"{max(ratios):.0f}x its batch's own, median {statistics.median(ratios):.0f}x); digits, {epochs} epochs, "
          f"seeds 0-{args.seeds - 1}\n")
    print(C.markdown_table(["arm", "mean test acc", "worst", "points below clean"], rows))


def overhead(args: argparse.Namespace) -> None:
    arms = {"off": [], "skip": ["train.spike=skip"], "rollback": ["train.spike=rollback"]}

    def make(extra: list[str]) -> Any:
        def once() -> float:
            trainer, _ = build(load_recipe("digits", [*QUIET, "train.epochs=3", "data.augment=false", *extra]))
            t0 = time.perf_counter()
            trainer.fit()
            return (time.perf_counter() - t0) / max(trainer.state.step, 1)
        return once

    results = C.alternate({k: make(v) for k, v in arms.items()}, rounds=args.rounds, warmup=1)
    per_update = {k: [r["value"] for r in results[k]] for k in arms}  # seconds per update, each round
    rows = [[k, f"{1e3 * C.median(per_update[k]):.3f}",
             f"{C.median(C.ratios(per_update[k], per_update['off'])):.3f}" if k != "off" else "1"] for k in arms]
    print(C.markdown_table(["spike", "ms per update (median)", "ratio to off (median of rounds)"], rows))


def _data_for(recipe: str, work: Path) -> list[str]:
    """What a recipe needs besides itself: a CSV (scikit-learn's wine), a teacher, an image folder."""
    if recipe == "tabular":
        from sklearn.datasets import load_wine

        path = work / "wine.csv"
        if not path.exists():
            wine = load_wine()
            rows = [",".join([*wine.feature_names, "target"])]
            rows += [",".join([*(f"{v:g}" for v in x), str(int(y))]) for x, y in zip(wine.data, wine.target)]
            path.write_text("\n".join(rows) + "\n", encoding="utf-8")
        return [f"data.root={path}", "data.label_column=target"]
    if recipe == "distill":
        teacher = work / "teacher" / "checkpoints" / "best.pt"
        if not teacher.exists():
            from trickbag.runs.run import run_recipe

            run_recipe(load_recipe("digits", [*QUIET, f"run.dir={work}", "run.name=teacher"]), quiet=True)
        return [f"tricks.distillation.teacher={teacher}"]
    if recipe == "imagefolder-finetune":
        import numpy as np
        from PIL import Image

        root = work / "images"
        if not root.exists():  # 4 classes of 48x48 images: a coloured square on noise, its place by class
            rng = np.random.default_rng(0)
            for c in range(4):
                (root / f"class{c}").mkdir(parents=True)
                for i in range(60):
                    img = rng.integers(0, 120, (48, 48, 3), dtype=np.uint8)
                    y, x = (c // 2) * 24 + rng.integers(0, 8), (c % 2) * 24 + rng.integers(0, 8)
                    img[y:y + 16, x:x + 16, c % 3] = 250
                    Image.fromarray(img).save(root / f"class{c}" / f"{i:03d}.png")
        return [f"data.root={root}", "data.image_size=32", "data.eval_image_size=32",
                "tricks.freeze.allow_untrained=true"]
    return []


def clean(args: argparse.Namespace) -> None:
    rows = []
    seeds = [int(s) for s in args.clean_seeds.split(",")]
    with tempfile.TemporaryDirectory() as work:
        for recipe in args.recipes.split(","):
            for seed in seeds:
                trainer, ctx = build(load_recipe(recipe, [*QUIET, f"train.seed={seed}", "train.spike=skip",
                                                          *_data_for(recipe, Path(work))]))
                probe = Threshold(trainer.spike)
                trainer.add_plugin(probe)
                t0 = time.perf_counter()
                trainer.fit()
                g = trainer.spike
                rows.append([recipe, str(seed), str(g.spikes), f"{probe.worst:.3f}", f"{time.perf_counter() - t0:.0f}"])
                print("  " + " | ".join(rows[-1]), flush=True)
    print(C.markdown_table(["recipe", "seed", "spikes", "largest loss / threshold", "s"], rows))
    fired = sum(int(r[2]) for r in rows)
    print(f"\nthe guard fired {fired} times over {len(rows)} clean runs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    C.add_common_args(parser, rounds=5)
    parser.add_argument("--only", default="inject,overhead,clean")
    parser.add_argument("--seeds", type=int, default=3, help="seeds of the inject part")
    parser.add_argument("--factor", type=float, default=-30.0)
    parser.add_argument("--clean-seeds", default="0,1,2,3,4")
    parser.add_argument("--recipes", default=",".join(RECIPES))
    args = parser.parse_args()
    C.setup(args, "loss spikes: train.spike")
    for part in args.only.split(","):
        print(f"\n## {part}\n", flush=True)
        {"inject": inject, "overhead": overhead, "clean": clean}[part](args)


if __name__ == "__main__":
    main()
