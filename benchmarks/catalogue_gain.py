"""Catalogue gain: which of the 2026-catalogue tricks help on the built-in recipes, seed by seed, side by side.

For every built-in recipe that trains on embedded data (``digits``, ``digits-tricks``, ``mnist1d``, and ``tabular``
on scikit-learn's bundled diabetes table, written to a CSV as a user's file would be) and every *change* from the
2026 catalogue — ``tricks.drop_path``, ``tricks.random_erasing``, ``tricks.augment``, ``tricks.mix.mode=pair|elem``,
``tricks.mix.off_epoch``, ``schedule.name=wsd``, ``optim.name=muon|schedulefree_adamw|lion|lamb`` and
``optim.lookahead_k`` — the recipe as shipped (the *baseline*) and the recipe with that one change train with the
same seeds ``train.seed=0..N-1``. The comparison is the ablation's (``trickbag ablate``): the rows come from
:func:`trickbag.experiments.ablate.ablation_rows` (mean over seeds, per-seed paired difference with its Student-t
95 % interval, training wall-time ratio); the verdict is *helps* / *hurts* when that interval excludes 0, else
*no evidence*.

Before anything trains, every (recipe, change) is built (data, model, optimizer, plug-ins: no update): a change
the recipe refuses (drop_path on a network without residual blocks, Muon on a network without a hidden weight
matrix, augment on data that is not an image folder, ...) is skipped with the refusal's first line, and so is a
change that means nothing there (the mix mode of a recipe that does not mix). ``distill`` (needs a trained
teacher) and ``imagefolder-finetune`` (needs your image folder and pretrained weights) are listed as not run.

Optimizer changes replace the optimizer, so they need a learning rate and a weight decay: with an AdamW recipe
(``mnist1d``, ``tabular``) Muon, schedule-free AdamW and LAMB keep the recipe's ``optim.lr`` and
``optim.weight_decay`` (Muon's update is scaled to AdamW's RMS, so one LR serves both) and Lion takes lr / 3 and
weight decay x 3 with betas (0.9, 0.99) (Chen et al. 2023: a 3-10x smaller LR, a larger decay); with an SGD recipe
(``digits``, ``digits-tricks``) the AdamW-family values are ``ADAM_LR`` / ``ADAM_WD`` below. These are rules of
thumb, not tuned: an optimizer that "hurts" here is not a drop-in replacement at that LR, which is what a user
switching ``optim.name`` gets. Schedule-free AdamW runs with ``schedule.name=none`` (the recipe's warm-up becomes
the optimizer's own). ``mix.off_epoch`` stops mixing for the last 20 % of the epochs.

Cells run in this process (``run_recipe``; no per-cell interpreter start), seed by seed, the order of a recipe's
variants rotated every seed, so a background load drift does not always hit the same variant. ``--out DIR`` keeps
each finished cell in ``DIR/cells``; rerunning with the same ``--out`` resumes.

Run: ``.venv/bin/python benchmarks/catalogue_gain.py [--seeds 3] [--epochs digits=15,digits-tricks=15]
[--recipes digits,mnist1d] [--only wsd,lion] [--threads 1] [--out DIR] [--quick]``
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402
import torch  # noqa: E402

from trickbag.errors import TrickbagError  # noqa: E402
from trickbag.experiments.ablate import Variant, ablation_rows, cell_name  # noqa: E402
from trickbag.experiments.ablate.cells import metric_value  # noqa: E402
from trickbag.recipe import Recipe, load_recipe  # noqa: E402

QUIET = ["run.progress=false", "run.plots=false", "log.tensorboard=false"]
#: AdamW-family LR / weight decay used when the recipe's own optimizer is SGD (no Adam-scale LR to keep)
ADAM_LR, ADAM_WD = 2e-3, 0.05
#: Lion: LR divided and weight decay multiplied by this against the AdamW-family values
LION_FACTOR = 3.0
LOOKAHEAD_K = 5


@dataclasses.dataclass(frozen=True)
class RecipeSpec:
    """A built-in recipe as this benchmark runs it."""

    name: str
    metric: str = "test/acc"
    higher_is_better: bool = True
    base: tuple[str, ...] = ()  #: overrides the recipe needs to run here ({diabetes}: the CSV this script writes)
    data_note: str = "embedded data"
    not_run: str = ""  #: why the recipe is not run (empty: it is)


RECIPES: dict[str, RecipeSpec] = {s.name: s for s in (
    RecipeSpec("digits", data_note="scikit-learn digits, 8x8"),
    RecipeSpec("digits-tricks", data_note="scikit-learn digits, 8x8"),
    RecipeSpec("mnist1d", data_note="MNIST-1D, generated"),
    RecipeSpec("tabular", metric="test/r2", base=("data.root={diabetes}", "task.type=regression"),
               data_note="scikit-learn diabetes table (regression), as a CSV"),
    RecipeSpec("distill", not_run="needs a trained teacher checkpoint (tricks.distillation.teacher)"),
    RecipeSpec("imagefolder-finetune", not_run="needs your image folder (data.root) and pretrained weights; "
                                               "no embedded data"),
)}


def _adam_like(r: Recipe) -> tuple[float, float]:
    """(lr, weight decay) for an AdamW-family optimizer replacing the recipe's."""
    if r.optim.name in ("adamw", "adam", "lamb", "muon", "schedulefree_adamw"):
        return r.optim.lr, r.optim.weight_decay
    return ADAM_LR, ADAM_WD


def _g(x: float) -> str:
    return f"{x:.3g}"


def _mix_mode(mode: str) -> Callable[[Recipe, int], list[str] | str]:
    def change(r: Recipe, epochs: int) -> list[str] | str:
        if not r.tricks.mix.enabled:
            return "the recipe does not mix (tricks.mix off): a mix mode has nothing to act on"
        if r.tricks.mix.mode == mode:
            return f"the recipe already uses tricks.mix.mode={mode}"
        return [f"tricks.mix.mode={mode}"]
    return change


def _off_epoch(r: Recipe, epochs: int) -> list[str] | str:
    if not r.tricks.mix.enabled:
        return "the recipe does not mix (tricks.mix off): off_epoch has nothing to stop"
    off = max(1, round(0.8 * epochs))
    if off >= epochs:
        return f"{epochs} epoch(s): no room to stop mixing before the end"
    return [f"tricks.mix.off_epoch={off}"]


def _wsd(r: Recipe, epochs: int) -> list[str] | str:
    return "the recipe already uses wsd" if r.schedule.name == "wsd" else ["schedule.name=wsd"]


def _optim(name: str) -> Callable[[Recipe, int], list[str] | str]:
    def change(r: Recipe, epochs: int) -> list[str] | str:
        if r.optim.name == name:
            return f"the recipe already uses optim.name={name}"
        lr, wd = _adam_like(r)
        if name == "lion":
            return ["optim.name=lion", f"optim.lr={_g(lr / LION_FACTOR)}", f"optim.weight_decay={_g(wd * LION_FACTOR)}",
                    "optim.betas=[0.9,0.99]"]
        ov = [f"optim.name={name}", f"optim.lr={_g(lr)}", f"optim.weight_decay={_g(wd)}"]
        return [*ov, "schedule.name=none"] if name.startswith("schedulefree_") else ov
    return change


def _lookahead(r: Recipe, epochs: int) -> list[str] | str:
    return [f"optim.lookahead_k={LOOKAHEAD_K}"]


#: change label -> overrides against the recipe as shipped, or the reason it means nothing there
CHANGES: dict[str, Callable[[Recipe, int], list[str] | str]] = {
    "drop_path": lambda r, e: ["tricks.drop_path.enabled=true"],
    "random_erasing": lambda r, e: ["tricks.random_erasing.enabled=true"],
    "augment": lambda r, e: ["tricks.augment.enabled=true"],
    "mix.mode=pair": _mix_mode("pair"),
    "mix.mode=elem": _mix_mode("elem"),
    "mix.off_epoch": _off_epoch,
    "wsd": _wsd,
    "muon": _optim("muon"),
    "schedulefree_adamw": _optim("schedulefree_adamw"),
    "lion": _optim("lion"),
    "lamb": _optim("lamb"),
    "lookahead": _lookahead,
}


def _slug(label: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in label)


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:220] + ("..." if len(text) > 220 else "")


def _parse_epochs(text: str | None, names: list[str]) -> dict[str, int | None]:
    """``--epochs``: ``N`` (every recipe) or ``recipe=N,...`` (the others keep their own)."""
    default: int | None = None
    specific: dict[str, int] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        key, sep, value = item.strip().rpartition("=")
        try:
            n = int(value)
        except ValueError:
            raise SystemExit(f"--epochs: {item!r} is not N or RECIPE=N") from None
        if n < 1:
            raise SystemExit(f"--epochs: {item!r}: epochs must be >= 1")
        if not sep:
            default = n
        elif key in names:
            specific[key] = n
        else:
            raise SystemExit(f"--epochs: {key!r} is not one of the recipes run: {', '.join(names)}")
    return {k: specific.get(k, default) for k in names}


def _write_diabetes(folder: Path) -> Path:
    from sklearn import datasets

    path = folder / "diabetes.csv"
    if not path.exists():
        datasets.load_diabetes(as_frame=True).frame.to_csv(path, index=False)
    return path


def _check(recipe: Recipe) -> str | None:
    """Build the run (data, model, optimizer, plug-ins; no update): None, or the refusal's first line."""
    from trickbag.train.build import build

    try:
        with tempfile.TemporaryDirectory(prefix="trickbag-gain-") as tmp, \
                contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            build(recipe, run_dir=Path(tmp))
    except (TrickbagError, ValueError) as exc:
        return _first_line(exc)
    return None


@dataclasses.dataclass
class Plan:
    recipe: RecipeSpec
    overrides: list[str]  #: applied to every variant of the recipe (base, epochs, quiet, threads)
    epochs: int
    variants: list[Variant]  #: [baseline, change, ...]
    skipped: list[tuple[str, str]]  #: (change, reason)
    summary: str  #: the recipe's optimizer / schedule, for the header


def plan_recipe(spec: RecipeSpec, epochs: int | None, only: list[str] | None, threads: int,
                data_dir: Path) -> Plan | str:
    """The valid variants of one recipe (each built once), or why the recipe is not run."""
    if spec.not_run:
        return spec.not_run
    base = [o.format(diabetes=data_dir / "diabetes.csv") for o in spec.base]
    ov = [*base, *([f"train.epochs={epochs}"] if epochs else []), f"train.threads={threads}", *QUIET]
    shipped = load_recipe(spec.name, ov)
    n_epochs = shipped.train.epochs
    reason = _check(shipped)
    if reason:
        return f"the recipe itself does not build here: {reason}"
    variants = [Variant("baseline", "baseline", (), ())]
    skipped: list[tuple[str, str]] = []
    for label, change in CHANGES.items():
        if only and label not in only:
            continue
        got = change(shipped, n_epochs)
        if isinstance(got, str):
            skipped.append((label, got))
            continue
        try:
            reason = _check(load_recipe(spec.name, [*ov, *got]))
        except (TrickbagError, ValueError) as exc:
            reason = _first_line(exc)
        if reason:
            skipped.append((label, f"refused: {reason}"))
        else:
            variants.append(Variant(label, _slug(label), (label,), tuple(got)))
    o, s = shipped.optim, shipped.schedule
    summary = (f"{n_epochs} epochs, {o.name} lr {_g(o.lr)} wd {_g(o.weight_decay)}, {s.name} schedule, "
               f"metric {spec.metric} ({spec.data_note})")
    return Plan(spec, ov, n_epochs, variants, skipped, summary)


def run_cell(plan: Plan, variant: Variant, seed: int, out_dir: Path) -> dict[str, Any]:
    """Train one (variant, seed) of a recipe in this process, or read it back from an earlier attempt."""
    from trickbag.runs.run import run_recipe

    name = f"{plan.recipe.name}__{cell_name(variant, seed)}"
    overrides = [*plan.overrides, *variant.overrides, f"train.seed={seed}"]
    cell_file = out_dir / "cells" / f"{name}.json"
    if cell_file.exists():
        saved = json.loads(cell_file.read_text())
        if saved.get("overrides") == overrides and saved.get("status") == "done":
            return saved
    recipe = load_recipe(plan.recipe.name, [*overrides, f"run.dir={out_dir / 'runs'}", f"run.name={name}"])
    try:
        result = run_recipe(recipe, quiet=True)
        rec = {"status": "done", "metric": metric_value(result, plan.recipe.metric),
               "wall_time_s": result.wall_time_s, "peak_rss_mb": math.nan}
    except TrickbagError as exc:
        rec = {"status": "failed", "message": _first_line(exc)}
    rec["overrides"] = overrides
    cell_file.parent.mkdir(parents=True, exist_ok=True)
    cell_file.write_text(json.dumps(rec, indent=1))
    return rec


def verdict(row: dict[str, Any], higher_is_better: bool) -> str:
    if row["delta"] is None or row["ci_low"] is None or math.isnan(row["ci_low"]):
        return "n/a"
    if not row["distinguishable"]:
        return "no evidence"
    return "helps" if (row["delta"] > 0) == higher_is_better else "hurts"


def _num(x: float | None, digits: int = 4) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=3, help="seeds per variant, train.seed=0..N-1 (default 3)")
    ap.add_argument("--epochs", default=None,
                    help="train.epochs: N for every recipe, or RECIPE=N,... (default: each recipe's own)")
    ap.add_argument("--recipes", default="digits,digits-tricks,mnist1d,tabular,distill,imagefolder-finetune",
                    help="comma-separated built-in recipes (default: all)")
    ap.add_argument("--only", default=None, help=f"comma-separated changes (default: all): {', '.join(CHANGES)}")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (train.threads; default 1)")
    ap.add_argument("--out", default=None, help="folder for the runs and finished cells (rerun: resume); "
                                                 "default a temporary folder")
    ap.add_argument("--quick", action="store_true", help="1 epoch, 2 seeds: checks that it runs (numbers meaningless)")
    args = ap.parse_args()
    if args.quick:
        args.seeds, args.epochs = 2, "1"
    if args.seeds < 2:
        raise SystemExit("--seeds must be >= 2 (a paired interval needs two seeds)")
    names = [n.strip() for n in args.recipes.split(",") if n.strip()]
    unknown = [n for n in names if n not in RECIPES]
    if unknown:
        raise SystemExit(f"--recipes: unknown {', '.join(unknown)}; allowed: {', '.join(RECIPES)}")
    only = [c.strip() for c in args.only.split(",")] if args.only else None
    if only and (bad := [c for c in only if c not in CHANGES]):
        raise SystemExit(f"--only: unknown {', '.join(bad)}; allowed: {', '.join(CHANGES)}")
    epochs = _parse_epochs(args.epochs, names)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    C.setup(args, "Catalogue gain: each 2026-catalogue change vs the built-in recipe as shipped (paired seeds)")

    tmp = tempfile.TemporaryDirectory(prefix="trickbag-gain-") if args.out is None else None
    out_dir = Path(tmp.name if tmp else args.out).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    _write_diabetes(out_dir)
    t_start = time.perf_counter()

    plans: list[Plan] = []
    not_run: list[tuple[str, str]] = []
    for name in names:
        got = plan_recipe(RECIPES[name], epochs[name], only, args.threads, out_dir)
        if isinstance(got, str):
            not_run.append((name, got))
            print(f"{name}: not run: {got}", flush=True)
            continue
        plans.append(got)
        print(f"{name}: {got.summary}", flush=True)
        for v in got.variants[1:]:
            print(f"  run  {v.name:<20} {' '.join(v.overrides)}", flush=True)
        for label, why in got.skipped:
            print(f"  skip {label:<20} {why}", flush=True)
    total = sum(len(p.variants) for p in plans) * args.seeds
    print(f"\n{total} runs ({args.seeds} seeds), results in {out_dir}\n", flush=True)

    cells: dict[str, dict[str, dict[str, Any]]] = {p.recipe.name: {} for p in plans}
    done = 0
    for seed in range(args.seeds):
        for p in plans:
            k = seed % len(p.variants)
            for v in p.variants[k:] + p.variants[:k]:
                rec = run_cell(p, v, seed, out_dir)
                cells[p.recipe.name][cell_name(v, seed)] = rec
                done += 1
                what = (f"{p.recipe.metric} {rec['metric']:.4f}, {rec['wall_time_s']:.1f} s" if rec["status"] == "done"
                        else f"FAILED: {rec['message']}")
                print(f"  [{done}/{total}] {p.recipe.name} {v.name} seed {seed}: {what}", file=sys.stderr, flush=True)

    seeds = list(range(args.seeds))
    rows = []
    for p in plans:
        base = p.variants[0]
        for v in p.variants[1:]:
            r0, r1 = ablation_rows([base, v], seeds, cells[p.recipe.name], "baseline")
            failed = [s for s in seeds if cells[p.recipe.name].get(cell_name(v, s), {}).get("status") != "done"]
            ci = ("n/a" if r1["ci_low"] is None or math.isnan(r1["ci_low"])
                  else f"{r1['delta']:+.4f} [{r1['ci_low']:+.4f}, {r1['ci_high']:+.4f}]")
            rows.append([p.recipe.name, v.name, f"{r1['seeds']}" + (f" ({len(failed)} failed)" if failed else ""),
                         p.recipe.metric, _num(r0["mean"]), _num(r1["mean"]), ci, _num(r1["time_ratio"], 2),
                         verdict(r1, p.recipe.higher_is_better)])
    print()
    print(C.markdown_table(["recipe", "change", "seeds", "metric", "baseline mean", "changed mean",
                            "Δ paired [95 % CI]", "time ×", "verdict"], rows))
    print("\nΔ: mean over seeds of (changed - baseline), same seed; 95 % Student-t interval of the paired "
          "differences (trickbag.experiments.ablate.ablation_rows). helps / hurts: the interval excludes 0 "
          "(higher is better for every metric here); no evidence: it does not. time ×: training wall time, "
          "mean over seeds, changed / baseline.")
    skipped = [(p.recipe.name, label, why) for p in plans for label, why in p.skipped]
    if skipped or not_run:
        print("\nNot run:")
        for name, why in not_run:
            print(f"- {name} (whole recipe): {why}")
        for name, label, why in skipped:
            print(f"- {name} / {label}: {why}")
    try:
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        load = "n/a"
    print(f"\nfinished in {(time.perf_counter() - t_start) / 60:.1f} min; load average (1/5/15 min) at the end: "
          f"{load}; torch threads {torch.get_num_threads()}")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
