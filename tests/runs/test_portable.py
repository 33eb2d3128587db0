"""A run is a portable artifact: its checkpoints hold the fitted preprocessing, so predict and eval work from
a copied run folder with the training data gone, and new rows in the training file change nothing."""

from __future__ import annotations

import csv
import shutil

import numpy as np
import pytest
import torch
from PIL import Image

from trickbag.cli import main
from trickbag.recipe import load_recipe
from trickbag.runs.run import run_recipe

QUIET = ["run.progress=false", "run.plots=false", "log.tensorboard=false"]


def _table(path, n=120, seed=0, shift=0.0):
    """A CSV with a numeric column with gaps, a numeric column, a category column and a class label."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        a, b = rng.normal(shift, 1), rng.normal(5 + shift, 3)
        colour = ["red", "green", "blue"][int(rng.integers(3))]
        label = "yes" if a + (b - 5) / 3 + (colour == "red") > 0.5 else "no"
        rows.append(["" if rng.random() < 0.1 else f"{a:.4f}", f"{b:.4f}", colour, label])
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["a", "b", "colour", "label"])
        w.writerows(rows)
    return path


def _append(path, extra):
    with open(extra) as src, open(path, "a") as dst:
        dst.write("".join(src.readlines()[1:]))


def _train(tmp_path, *overrides, name="r"):
    return run_recipe(load_recipe("digits", [*QUIET, f"run.dir={tmp_path / 'runs'}", f"run.name={name}", *overrides]),
                      quiet=True)


def _predict(run, inputs, out, *extra):
    assert main(["predict", str(run), *[str(i) for i in inputs], "--out", str(out), *extra]) == 0
    return out.read_text()


@pytest.fixture(scope="module")
def csv_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("portable-csv")
    data = _table(tmp / "train.csv")
    result = _train(tmp, "data.name=csv", f"data.root={data}", "data.label_column=label", "train.epochs=2",
                    "data.bins={b: {n_bins: 4}}")
    queries = _table(tmp / "queries.csv", n=40, seed=1)
    return tmp, data, result.run_dir, queries


def test_checkpoints_store_the_fitted_table_encoding_as_plain_data(csv_run):
    tmp, _, run, _ = csv_run
    for name in ("best.pt", "last.pt"):
        ck = torch.load(run / "checkpoints" / name, weights_only=True)
        state = ck["preprocess"]
        assert state["source"] == "csv" and state["classes"] == ["no", "yes"]
        cols = {c["name"]: c for c in state["table"]["columns"]}
        assert cols["colour"]["categories"] == ["blue", "green", "red"]
        assert cols["a"]["missing_flag"] is True and cols["b"]["bins"] is not None
        assert len(cols["b"]["bins"]) == 5  # 4 bins: 5 edges


def test_a_copied_csv_run_predicts_the_same_with_the_training_data_gone(csv_run, tmp_path):
    tmp, data, run, queries = csv_run
    before = _predict(run, [queries], tmp_path / "before.csv")
    moved = tmp_path / "elsewhere" / "run"
    shutil.copytree(run, moved)
    hidden = tmp_path / "hidden.csv"
    shutil.move(data, hidden)
    try:
        after = _predict(moved, [queries], tmp_path / "after.csv")
        assert main(["eval", str(moved), "--data", str(queries), "--device", "cpu"]) == 0
    finally:
        shutil.move(hidden, data)
    assert after == before and len(before.splitlines()) == 41


def test_appending_rows_to_the_training_csv_changes_no_prediction(csv_run, tmp_path):
    tmp, data, run, queries = csv_run
    before = _predict(run, [queries], tmp_path / "before.csv")
    saved = data.read_text()
    try:
        _append(data, _table(tmp_path / "more.csv", n=60, seed=7, shift=3.0))  # shifts every column's mean
        after = _predict(run, [queries], tmp_path / "after.csv")
    finally:
        data.write_text(saved)
    assert after == before


def test_predict_applies_the_stored_encoding_as_written_out_here(csv_run, tmp_path):
    """Reference: fill, indicator, bins, one-hot and standardisation computed by hand from the training file."""
    from trickbag.train.parts import model_from_checkpoint

    tmp, data, run, queries = csv_run
    recipe, model, ck, _ = model_from_checkpoint(run / "checkpoints" / "best.pt")
    state = ck["preprocess"]["table"]
    cols = {c["name"]: c for c in state["columns"]}

    def rows(path):
        with open(path, newline="") as fh:
            return list(csv.DictReader(fh))

    a_known = [float(r["a"]) for r in rows(data) if r["a"] != ""]
    assert min(a_known) <= cols["a"]["fill"] <= max(a_known)  # the mean of the training split's known values
    edges = cols["b"]["bins"]
    feats = []
    for r in rows(queries):
        a = float(r["a"]) if r["a"] != "" else cols["a"]["fill"]
        b_code = int(np.digitize(float(r["b"]), edges[1:-1]))
        colour = ["blue", "green", "red"].index(r["colour"])
        feats.append([a, float(r["a"] == "")] + [float(b_code == k) for k in range(5)]
                     + [float(colour == k) for k in range(4)])
    x = torch.tensor(feats)
    x = (x - torch.tensor(state["mean"])) / torch.tensor(state["std"])
    with torch.no_grad():
        want = torch.softmax(model(x.unsqueeze(1)), 1)
    out = _predict(run, [queries], tmp_path / "p.csv", "--top-k", "2")
    got = list(csv.DictReader(out.splitlines()))
    for row, p in zip(got, want):
        probs = dict(part.rsplit(" ", 1) for part in row["top2"].split("; "))
        assert float(probs["yes"]) == pytest.approx(float(p[1]), abs=1e-4)


def test_a_resumed_run_keeps_the_stored_encoding(tmp_path):
    data = _table(tmp_path / "train.csv")
    first = _train(tmp_path, "data.name=csv", f"data.root={data}", "data.label_column=label", "train.epochs=1",
                   "data.val_fraction=0.2")
    stored = torch.load(first.run_dir / "checkpoints" / "last.pt", weights_only=True)["preprocess"]
    saved = data.read_text()
    _append(data, _table(tmp_path / "more.csv", n=60, seed=7, shift=3.0))
    assert main(["train", "--resume", str(first.run_dir), "train.epochs=2", *QUIET]) == 2
    untouched = torch.load(first.run_dir / "checkpoints" / "last.pt", weights_only=True)
    assert untouched["counters"]["epoch"] == 1  # refused before anything was written: still resumable
    data.write_text(saved)  # the rows the run's split was drawn from
    assert main(["train", "--resume", str(first.run_dir), "train.epochs=2", *QUIET]) == 0
    after = torch.load(first.run_dir / "checkpoints" / "last.pt", weights_only=True)
    assert after["counters"]["epoch"] == 2 and after["preprocess"] == stored


def test_a_changed_training_file_is_refused_in_one_line_naming_the_change(tmp_path, capsys):
    """Resume or eval reads the training file for its split: 60 appended rows would move rows between train, val
    and test (the stored encoding alone cannot prevent that)."""
    data = _table(tmp_path / "train.csv")
    first = _train(tmp_path, "data.name=csv", f"data.root={data}", "data.label_column=label", "train.epochs=1")
    stored = torch.load(first.run_dir / "checkpoints" / "best.pt", weights_only=True)["preprocess"]["table"]
    assert stored["rows"] == 120
    _append(data, _table(tmp_path / "more.csv", n=60, seed=7, shift=3.0))
    capsys.readouterr()
    assert main(["eval", str(first.run_dir)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "120 rows when the run read it, 180 now" in err[0] and "--data" in err[0]


def _png_folder(root, n=8):
    rng = np.random.default_rng(0)
    for cls, base in (("dark", 40), ("light", 210)):
        (root / cls).mkdir(parents=True)
        for i in range(n):
            img = np.clip(base + rng.normal(0, 40, (16, 20)), 0, 255).astype(np.uint8)
            Image.fromarray(img, mode="L").convert("RGB").save(root / cls / f"{i}.png")


def test_a_copied_image_run_predicts_the_same_with_the_images_gone(tmp_path):
    _png_folder(tmp_path / "imgs")
    _png_folder(tmp_path / "queries")
    result = _train(tmp_path, "data.name=imagefolder", f"data.root={tmp_path / 'imgs'}", "data.image_size=12",
                    "train.epochs=1", "data.batch_size=4", "data.test_fraction=0.25", "data.val_fraction=0.2")
    state = torch.load(result.run_dir / "checkpoints" / "best.pt", weights_only=True)["preprocess"]
    assert state["classes"] == ["dark", "light"]
    assert state["image"] == {"mode": "RGB", "size": 12, "resize": 13, "crop": 12, "interpolation": "bilinear",
                              "antialias": True, "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}
    before = _predict(result.run_dir, [tmp_path / "queries"], tmp_path / "before.csv")
    moved = tmp_path / "copy"
    shutil.copytree(result.run_dir, moved)
    shutil.rmtree(tmp_path / "imgs")
    shutil.rmtree(result.run_dir)
    assert _predict(moved, [tmp_path / "queries"], tmp_path / "after.csv") == before
    assert main(["eval", str(moved), "--data", str(tmp_path / "queries"), "--device", "cpu"]) == 0


def test_an_old_checkpoint_without_the_state_needs_its_data(csv_run, tmp_path, capsys):
    from trickbag.train.checkpoint_files import save_checkpoint

    tmp, data, run, queries = csv_run
    old = tmp_path / "old"
    shutil.copytree(run, old)
    for name in ("best.pt", "last.pt"):
        ck = torch.load(old / "checkpoints" / name, weights_only=True)
        del ck["preprocess"]
        save_checkpoint(old / "checkpoints" / name, ck)
    assert _predict(old, [queries], tmp_path / "old.csv") == _predict(run, [queries], tmp_path / "new.csv")
    hidden = tmp_path / "hidden.csv"
    shutil.move(data, hidden)
    try:
        capsys.readouterr()
        assert main(["predict", str(old), str(queries)]) == 2
    finally:
        shutil.move(hidden, data)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "predates" in err[0] and str(data) in err[0]


@pytest.mark.parametrize("task", ["classification", "regression"])
def test_the_stored_state_rebuilds_exactly_the_splits_it_was_fitted_on(tmp_path, task):
    """build_data with the stored state (a resume, eval on a split) gives the same tensors as the fit itself."""
    from trickbag.data.sources import build_data

    data = _table(tmp_path / "t.csv")
    if task == "regression":  # the label: a number
        text = data.read_text().splitlines()
        data.write_text("\n".join([text[0]] + [",".join(r.split(",")[:3] + [str(1.5 * i)])
                                               for i, r in enumerate(text[1:])]) + "\n")
    recipe = load_recipe("digits", ["data.name=csv", f"data.root={data}", "data.label_column=label",
                                    f"task.type={task}"])
    fitted = build_data(recipe.data, recipe.task)
    again = build_data(recipe.data, recipe.task, fitted=fitted.fitted)
    assert again.fitted == fitted.fitted and again.target_mean == fitted.target_mean
    for part in ("train", "val", "test"):
        a, b = getattr(fitted, part), getattr(again, part)
        assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y)
