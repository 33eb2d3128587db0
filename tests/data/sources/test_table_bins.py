"""data.bins on the csv source: edges from the training rows only, one-hot codes, checked against numpy/sklearn.

The CSV's first feature is a row id (not binned); every other feature is binned, so the inputs the model
receives are ``(features - m) / s`` with ``features`` = [id, one-hot indicators].  The indicators take only
the values 0 and 1, which gives back ``m`` and ``s`` and so the raw id of every input row: the training
rows are the ids the model saw in training mode.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.tree import DecisionTreeClassifier

from trickbag.data.sources import build_data
from trickbag.errors import DataError, RecipeError
from trickbag.models import MLP
from trickbag.recipe import load_recipe
from trickbag.runs.run import run_recipe

N = 100
BINS = {"a": ("width", 4), "b": ("quantile", 4), "c": ("tree", 3)}
BINS_YAML = "{a: {method: width, n_bins: 4}, b: {method: quantile, n_bins: 4}, c: {method: tree, n_bins: 3}}"
QUIET = ["run.progress=false", "run.plots=false", "log.tensorboard=false", "log.every_steps=1000"]


def _columns() -> dict[str, np.ndarray]:
    """Values exact in float32 (the source reads features as float32); b has missing cells; 3 classes."""
    rng = np.random.default_rng(0)
    label = np.arange(N) % 3
    b = rng.integers(0, 40, N).astype(np.float64)
    b[::9] = np.nan
    return {
        "id": np.arange(N, dtype=np.float64),
        "a": rng.integers(0, 50, N) * 0.5,
        "b": b,
        "c": (label * 10 + rng.integers(0, 12, N)).astype(np.float64),
        "label": label,
    }


def _write(path: Path, cols: dict[str, np.ndarray]) -> Path:
    lines = ["id,a,b,c,label"]
    for i in range(N):
        cells = ["" if np.isnan(cols[k][i]) else repr(float(cols[k][i])) for k in ("id", "a", "b", "c")]
        lines.append(",".join(cells + [str(int(cols["label"][i]))]))
    path.write_text("\n".join(lines) + "\n")
    return path


def _naive_quantile(sorted_v: np.ndarray, p: float) -> float:
    """Linear interpolation between order statistics (numpy's default 'linear' method)."""
    pos = (len(sorted_v) - 1) * p
    lo = int(np.floor(pos))
    hi = min(lo + 1, len(sorted_v) - 1)
    return float(sorted_v[lo] + (sorted_v[hi] - sorted_v[lo]) * (pos - lo))


def _naive_features(cols: dict[str, np.ndarray], train_ids: np.ndarray) -> tuple[np.ndarray, dict[str, slice]]:
    """[N, F'] = [id, one-hot(a), one-hot(b), one-hot(c)], each with a last 'missing' indicator; column slices."""
    out = [cols["id"][:, None]]
    layout, start = {}, 1
    for name, (method, n) in BINS.items():
        v = cols[name].astype(np.float32).astype(np.float64)
        tv = v[train_ids]
        tv_known = tv[~np.isnan(tv)]
        if method == "width":
            inner = [tv_known.min() + (tv_known.max() - tv_known.min()) * k / n for k in range(1, n)]
            codes = np.array([sum(x >= e for e in inner) for x in v])
        elif method == "quantile":
            s = np.sort(tv_known)
            edges = sorted(set(_naive_quantile(s, k / n) for k in range(n + 1)))
            inner = edges[1:-1]
            codes = np.array([sum(x >= e for e in inner) for x in v])
        else:  # the tree's own rule: x <= threshold goes left
            tree = DecisionTreeClassifier(max_leaf_nodes=n, random_state=0)
            tree.fit(tv[:, None], cols["label"][train_ids])
            inner = np.sort(tree.tree_.threshold[tree.tree_.children_left != -1])
            codes = np.array([sum(x > t for t in inner) for x in v])
        n_bins = len(inner) + 1
        codes = np.where(np.isnan(v), n_bins, codes)
        out.append(np.eye(n_bins + 1)[codes])
        layout[name], start = slice(start, start + n_bins + 1), start + n_bins + 1
    return np.concatenate(out, axis=1), layout


def _raw(x: torch.Tensor, splits) -> tuple[np.ndarray]:
    """Undo the source's per-column affine standardisation, read off by probing it with 0 and 1.

    (The standardisation itself is checked against training-row statistics in the test above; here
    only the binning matters.)
    """
    shape = x.shape[1:]
    zero = splits.normalise(torch.zeros(1, *shape)).reshape(-1).double()
    one = splits.normalise(torch.ones(1, *shape)).reshape(-1).double()
    std = 1.0 / (one - zero)
    mean = -zero * std
    raw = (x.reshape(len(x), -1).double() * std + mean).numpy()
    np.testing.assert_allclose(raw[:, 1:], np.round(raw[:, 1:]), atol=1e-4)  # indicators: 0 or 1 only
    return (raw,)


def _recipe(csv: Path, tmp_path: Path, *extra: str):
    return load_recipe(
        "digits",
        ["data.name=csv", f"data.root={csv}", f"data.bins={BINS_YAML}", "data.batch_size=16", "model.name=mlp",
         "train.epochs=1", f"run.dir={tmp_path}", "run.name=bins", *QUIET, *extra],
    )


def test_model_inputs_are_naive_bins_of_training_rows(tmp_path):
    cols = _columns()
    recipe = _recipe(_write(tmp_path / "d.csv", cols), tmp_path / "runs")
    seen: list[tuple[bool, torch.Tensor]] = []

    def record(module, args):
        if isinstance(module, MLP) and args[0].any():  # all zeros: the run summary's shape probe
            seen.append((module.training, args[0].detach().clone()))

    handle = torch.nn.modules.module.register_module_forward_pre_hook(record)
    try:
        result = run_recipe(recipe, quiet=True)
    finally:
        handle.remove()
    assert (result.run_dir / "checkpoints" / "best.pt").is_file()

    x = torch.cat([x for _, x in seen]).reshape(-1, seen[0][1][0].numel()).double().numpy()
    # the id column is standardised too, but stays monotonic: its rank among the N rows is the id
    uniq = np.unique(np.round(x[:, 0], 6))
    assert len(uniq) == N  # every row was fed to the model (train, val and test)
    ids = np.searchsorted(uniq, np.round(x[:, 0], 6))
    is_train = np.concatenate([np.full(len(t), tr) for tr, t in seen])
    train_ids = np.unique(ids[is_train])
    # 100 rows - 20 test - 8 val, each trained on once, plus the pre-flight batch (8 training rows) first
    assert len(train_ids) == 72 and is_train.sum() == 72 + 8

    expected, layout = _naive_features(cols, train_ids)
    assert x.shape[1] == expected.shape[1]  # id + (4+1) + (<=4 + 1) + (<=3 + 1) inputs
    # each column standardised with the mean and std of the training rows only
    train_rows = torch.tensor(expected[train_ids])
    mean = train_rows.mean(0).numpy()
    std = train_rows.std(0).clamp_min(1e-8).numpy()
    np.testing.assert_allclose(x, ((expected - mean) / std)[ids], atol=1e-4)
    # every method made several bins; a missing b has its own indicator
    assert [layout[k].stop - layout[k].start for k in "abc"] == [5, 5, 4]
    np.testing.assert_array_equal(expected[:, layout["b"]][:, -1], np.isnan(cols["b"]))


def test_edges_do_not_depend_on_validation_or_test_rows(tmp_path):
    cols = _columns()
    recipe = _recipe(_write(tmp_path / "d.csv", cols), tmp_path / "runs")
    before = build_data(recipe.data)
    train_ids = np.round(_raw(before.train.x, before)[0][:, 0]).astype(int)
    test_id = int(np.round(_raw(before.test.x, before)[0][0, 0]))
    val_id = int(np.round(_raw(before.val.x, before)[0][-1, 0]))

    changed = {k: v.copy() for k, v in cols.items()}
    for i, (a, b, c) in ((test_id, (1e6, -1e6, 1e6)), (val_id, (-1e6, 1e6, -1e6))):
        changed["a"][i], changed["b"][i], changed["c"][i] = a, b, c
    after = build_data(_recipe(_write(tmp_path / "d.csv", changed), tmp_path / "runs").data)

    assert torch.equal(before.train.x, after.train.x)  # same edges, same training inputs
    expected, layout = _naive_features(changed, train_ids)
    for split in ("train", "val", "test"):
        raw = _raw(getattr(after, split).x, after)[0]
        np.testing.assert_allclose(raw, expected[np.round(raw[:, 0]).astype(int)], atol=1e-4)
    # the extreme values fall into the first / last training bin, not into bins of their own
    for name, codes in (("a", [3, 0]), ("b", [0, 3]), ("c", [2, 0])):
        assert expected[[test_id, val_id], layout[name]].argmax(1).tolist() == codes, name


def test_bad_column_name_is_one_line_data_error(tmp_path):
    csv = _write(tmp_path / "d.csv", _columns())
    recipe = load_recipe(
        "digits",
        ["data.name=csv", f"data.root={csv}", "data.bins={cc: {method: tree}}", "model.name=mlp",
         f"run.dir={tmp_path / 'runs'}", *QUIET],
    )
    with pytest.raises(DataError) as err:
        run_recipe(recipe, quiet=True)
    msg = str(err.value)
    assert "\n" not in msg and "'cc'" in msg and "did you mean 'c'?" in msg and "id, a, b, c" in msg
    assert not (tmp_path / "runs").exists()  # nothing written

    label = recipe.model_copy(deep=True)
    label.data.bins = {"label": label.data.bins["cc"]}
    with pytest.raises(DataError, match="'label', which is the label column"):
        build_data(label.data)


def test_missing_values_in_binned_and_unbinned_columns(tmp_path):
    cols = _columns()
    cols["a"][5] = np.nan  # 'a' is binned here: its bins' own missing indicator
    csv = _write(tmp_path / "d.csv", cols)
    ok = build_data(_recipe(csv, tmp_path).data)
    assert ok.input_shape[-1] == _naive_features(cols, np.arange(N))[0].shape[1]
    # 'a' not binned: filled with its training mean, plus one 0/1 missing indicator column
    unbinned = build_data(_recipe(csv, tmp_path, "data.bins={b: {}, c: {}}").data)
    clean = build_data(_recipe(_write(tmp_path / "c.csv", _columns()), tmp_path, "data.bins={b: {}, c: {}}").data)
    assert unbinned.input_shape[-1] == clean.input_shape[-1] + 1


def test_recipe_keys_are_validated():
    with pytest.raises(RecipeError, match="data.name=csv only"):
        load_recipe("digits", ["data.bins.x.n_bins=4"])
    with pytest.raises(RecipeError, match=r"'data.bins.x.nbins' \(did you mean 'data.bins.x.n_bins'\?\)"):
        load_recipe("digits", ["data.name=csv", "data.bins.x.nbins=4"])
    with pytest.raises(RecipeError, match="'data.bins.x.method': 'tre' is not allowed"):
        load_recipe("digits", ["data.name=csv", "data.bins.x.method=tre"])
    with pytest.raises(RecipeError, match="'data.bins.x.n_bins': 0 is not allowed"):
        load_recipe("digits", ["data.name=csv", "data.bins.x.n_bins=0"])
    r = load_recipe("digits", ["data.name=csv", "data.bins.x.method=width"])
    assert (r.data.bins["x"].method, r.data.bins["x"].n_bins) == ("width", 10)
