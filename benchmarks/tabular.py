"""Tables: the built-in ``tabular`` recipe on scikit-learn's bundled tables, against a linear model fit on the
same split.

For each table (written to CSV in a temporary folder, as a user's file would be) and each ``data.split_seed``
in ``--splits`` (each a different 80/20 test split), the recipe trains ``--seeds`` times (``train.seed``) through
``trickbag.runs.run.run_recipe``; its test metrics (of ``best.pt``) are averaged over the seeds. The reference is
scikit-learn's ``LogisticRegression`` (classification) or ``LinearRegression`` (regression) fit on the *same*
standardised training rows (the recipe's own split, read back from its data source) and scored on the same test
rows with the same torchmetrics definitions (accuracy, macro F1, AUROC; R^2, MAE in the target's units).
``--ema`` adds the recipe with EMA weights (``tricks.ema``, decay 0.995), to show what that trick pays.

Target (issue: your own data): diabetes as regression R^2 >= 0.35 (mean over the splits).

Run: ``.venv/bin/python benchmarks/tabular.py [--splits 5] [--seeds 3] [--ema]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

TABLES = {"wine": "classification", "breast_cancer": "classification", "diabetes": "regression"}
#: generated tables of the kinds a user's CSV often is (``--tables``): categorical columns with missing cells,
#: 20 000 rows, 40 classes; each drawn from a fixed NumPy seed, so every run sees the same file
GENERATED = {"mixed": "classification", "large": "regression", "manyclass": "classification"}
QUIET = ["run.progress=false", "run.plots=false", "log.tensorboard=false"]


def _write_csv(folder: Path, name: str) -> Path:
    from sklearn import datasets

    path = folder / f"{name}.csv"
    if name in GENERATED:
        _generated(name).to_csv(path, index=False)
    else:
        getattr(datasets, f"load_{name}")(as_frame=True).frame.to_csv(path, index=False)
    return path


def _generated(name: str):
    """``mixed``: 3 000 rows, 6 numbers and 2 categorical columns (one tied to the class, one noise with 20
    levels), 10 % of the number cells and 5 % of the category cells empty, string class names;
    ``large``: 20 000 rows of Friedman's regression #1 (non-linear, noise sd 1); ``manyclass``: 6 000 rows,
    20 features, 40 classes."""
    import numpy as np
    import pandas as pd
    from sklearn import datasets

    rng = np.random.default_rng(0)
    if name == "large":
        x, y = datasets.make_friedman1(n_samples=20_000, n_features=10, noise=1.0, random_state=0)
        return pd.DataFrame(x, columns=[f"x{i}" for i in range(10)]).assign(target=y)
    if name == "manyclass":
        x, y = datasets.make_classification(n_samples=6000, n_features=20, n_informative=12, n_classes=40,
                                            n_clusters_per_class=1, class_sep=1.5, random_state=0)
        return pd.DataFrame(x, columns=[f"x{i}" for i in range(20)]).assign(target=y)
    x, y = datasets.make_classification(n_samples=3000, n_features=6, n_informative=4, n_classes=3,
                                        random_state=0)
    df = pd.DataFrame(x, columns=[f"x{i}" for i in range(6)])
    colours = np.array(["red", "green", "blue", "grey"])
    df["colour"] = np.where(rng.random(len(y)) < 0.6, colours[y], colours[rng.integers(0, 4, len(y))])
    df["city"] = np.array([f"city{i}" for i in range(20)])[rng.integers(0, 20, len(y))]
    for c in df.columns:
        df.loc[rng.random(len(df)) < (0.10 if pd.api.types.is_numeric_dtype(df[c]) else 0.05), c] = np.nan
    return df.assign(target=np.array(["low", "mid", "high"])[y])


def _overrides(path: Path, task: str, split: int) -> list[str]:
    return [f"data.root={path}", f"task.type={task}", f"data.split_seed={split}", *QUIET]


def _rows(ds) -> tuple[torch.Tensor, torch.Tensor]:
    xs, ys = zip(*(ds[i] for i in range(len(ds))))
    return torch.stack(xs).flatten(1), torch.stack([torch.as_tensor(y) for y in ys])


def _metrics(task: str, pred: torch.Tensor, target: torch.Tensor, num_classes: int) -> dict[str, float]:
    import torchmetrics.functional as M

    if task == "regression":
        return {"r2": float(M.r2_score(pred, target)), "mae": float(M.mean_absolute_error(pred, target))}
    probs = pred
    return {"acc": float(M.accuracy(probs, target, task="multiclass", num_classes=num_classes)),
            "f1": float(M.f1_score(probs, target, task="multiclass", num_classes=num_classes, average="macro")),
            "auroc": float(M.auroc(probs, target, task="multiclass", num_classes=num_classes))}


def linear_reference(path: Path, task: str, split: int) -> dict[str, float]:
    """A linear model on the recipe's own split (same rows, same standardisation, same metric code)."""
    from sklearn.linear_model import LinearRegression, LogisticRegression

    from trickbag.data.sources import build_data
    from trickbag.recipe import load_recipe

    recipe = load_recipe("tabular", _overrides(path, task, split))
    splits = build_data(recipe.data, recipe.task)
    (x, y), (xt, yt) = _rows(splits.train), _rows(splits.test)
    if task == "regression":  # the source standardised the targets (training mean and std): back to units
        mean, std = torch.tensor(splits.target_mean), torch.tensor(splits.target_std)
        model = LinearRegression().fit(x.numpy(), y.view(len(y), -1).numpy())
        pred = torch.as_tensor(model.predict(xt.numpy()), dtype=torch.float32).view(len(yt), -1) * std + mean
        return _metrics(task, pred.view(-1), (yt.view(len(yt), -1) * std + mean).view(-1), 0)
    model = LogisticRegression(max_iter=5000).fit(x.numpy(), y.numpy())
    probs = torch.as_tensor(model.predict_proba(xt.numpy()), dtype=torch.float32)
    return _metrics(task, probs, yt.long(), len(splits.classes))


def recipe_scores(path: Path, task: str, split: int, seeds: int, runs: Path, extra: list[str]) -> tuple[dict, float]:
    from trickbag.recipe import load_recipe
    from trickbag.runs.run import run_recipe

    keys = ("test/r2", "test/mae") if task == "regression" else ("test/acc", "test/f1", "test/auroc")
    got: dict[str, list[float]] = {k.split("/")[1]: [] for k in keys}
    start = time.perf_counter()
    for seed in range(seeds):
        name = f"{path.stem}-{split}-{seed}-{len(extra)}"
        result = run_recipe(load_recipe("tabular", [*_overrides(path, task, split), f"train.seed={seed}",
                                                    f"run.dir={runs}", f"run.name={name}", *extra]), quiet=True)
        for k in keys:
            got[k.split("/")[1]].append(result.test[k])
    return {k: statistics.mean(v) for k, v in got.items()}, (time.perf_counter() - start) / seeds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=5, help="data.split_seed 0..N-1 (default 5)")
    parser.add_argument("--seeds", type=int, default=3, help="train.seed 0..N-1 per split (default 3)")
    parser.add_argument("--tables", default=",".join(TABLES),
                        help=f"comma-separated: {', '.join(TABLES)} (bundled), {', '.join(GENERATED)} (generated)")
    parser.add_argument("--ema", action="store_true", help="also the recipe with EMA weights (tricks.ema, decay 0.995)")
    C.add_common_args(parser, rounds=1)
    args = parser.parse_args()
    C.setup(args, "tabular recipe vs a linear model on the same splits")
    variants = {"tabular": []} | ({"tabular + EMA": ["tricks.ema.enabled=true", "tricks.ema.decay=0.995"]}
                                  if args.ema else {})
    rows, r2 = [], {name: [] for name in variants}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        kinds = TABLES | GENERATED
        if bad := [t for t in args.tables.split(",") if t not in kinds]:
            raise SystemExit(f"--tables: unknown {', '.join(bad)}; allowed: {', '.join(kinds)}")
        for table in args.tables.split(","):
            task = kinds[table]
            path = _write_csv(folder, table)
            for split in range(args.splits):
                ref = linear_reference(path, task, split)
                for name, extra in variants.items():
                    got, secs = recipe_scores(path, task, split, args.seeds, folder / "runs", extra)
                    if table == "diabetes":
                        r2[name].append(got["r2"])
                    cells = " ".join(f"{k} {v:.3f} ({ref[k]:.3f})" for k, v in got.items())
                    rows.append([table, split, name, cells, f"{secs:.1f}"])
                    print(" | ".join(map(str, rows[-1])), flush=True)
    print()
    print(C.markdown_table(["table", "split", "variant", f"test metrics, mean of {args.seeds} seeds (linear model)",
                            "s per run"], rows))
    print()
    for name, values in r2.items():
        if not values:
            continue
        mean = statistics.mean(values)
        print(f"diabetes R^2, {name}: {mean:.3f} mean over {len(values)} splits (target >= 0.35: "
              f"{'met' if mean >= 0.35 else 'MISSED'})")
    print(f"load average at the end: {', '.join(f'{x:.1f}' for x in __import__('os').getloadavg())}")


if __name__ == "__main__":
    main()
