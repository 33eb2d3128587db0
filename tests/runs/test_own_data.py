"""A user's own data with the default recipe: scikit-learn tables written to CSV, a folder of PNGs,
a package.module:function data set; the task decides the loss and the metrics."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
import torch
from PIL import Image

from trickbag.cli import main
from trickbag.errors import DataError
from trickbag.recipe import load_recipe
from trickbag.runs.run import run_recipe

QUIET = ["run.progress=false", "run.plots=false", "log.tensorboard=false"]


def _csv(path, name: str) -> str:
    from sklearn import datasets

    frame = getattr(datasets, f"load_{name}")(as_frame=True).frame
    frame.to_csv(path, index=False)
    return str(path)


def _train(tmp_path, *overrides: str, name: str = "r"):
    return run_recipe(
        load_recipe("digits", [*QUIET, f"run.dir={tmp_path}", f"run.name={name}", *overrides]), quiet=True
    )


def test_a_csv_trains_with_the_default_recipe_and_model(tmp_path):
    root = _csv(tmp_path / "wine.csv", "wine")
    result = _train(tmp_path, "data.name=csv", f"data.root={root}", "data.label_column=target", "train.epochs=15")
    assert result.test["test/acc"] > 0.85  # 3 classes; chance is 0.4
    from trickbag.train.checkpoint_files import load_checkpoint

    assert any(
        k.startswith("net.") for k in load_checkpoint(result.run_dir / "checkpoints" / "best.pt")["model"]
    )  # MLP
    assert {"test/f1", "test/auroc"} <= set(result.test)
    assert (result.run_dir / "confusion.csv").is_file()


def test_breast_cancer_reports_f1_and_auroc(tmp_path):
    root = _csv(tmp_path / "bc.csv", "breast_cancer")
    result = _train(tmp_path, "data.name=csv", f"data.root={root}", "data.label_column=target", "train.epochs=5")
    assert result.test["test/f1"] > 0.8 and result.test["test/auroc"] > 0.9
    assert "f1" in (result.run_dir / "summary.txt").read_text()


def test_a_continuous_label_without_a_task_is_refused_in_one_line(tmp_path):
    root = _csv(tmp_path / "bc.csv", "breast_cancer")
    with pytest.raises(DataError, match=r"holds \d+ distinct numbers.*set task.type=regression"):
        _train(tmp_path, "data.name=csv", f"data.root={root}", "data.label_column=mean area")
    assert not (tmp_path / "r").exists()


def test_the_tabular_recipe_refuses_a_continuous_label_too(tmp_path, capsys):
    """The built-in recipe for tables leaves task.type unset, so the check is not bypassed by it."""
    root = _csv(tmp_path / "diabetes.csv", "diabetes")
    code = main(["train", "tabular", f"data.root={root}", "data.label_column=target", f"run.dir={tmp_path / 'r'}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "set task.type=regression" in err[0], err
    assert not (tmp_path / "r").exists()


def test_diabetes_as_regression_reports_r2_mae_rmse_in_the_targets_units(tmp_path):
    root = _csv(tmp_path / "diabetes.csv", "diabetes")
    result = _train(tmp_path, "data.name=csv", f"data.root={root}", "data.label_column=target", "task.type=regression",
                    "train.epochs=5")
    assert {"test/r2", "test/mae", "test/rmse"} <= set(result.test)
    assert 20 < result.test["test/mae"] < 150  # in the target's own units (25 .. 346), not standardised ones
    assert result.monitor == "val/loss"


def test_a_model_that_does_not_fit_the_data_is_one_line_exit_2_and_no_folder(tmp_path, capsys):
    code = main(["train", *QUIET, "model.name=resnet18", f"run.dir={tmp_path}", "run.name=x"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "model 'resnet18'" in err[0] and "[1, 8, 8]" in err[0] and "small_cnn" in err[0]
    assert not (tmp_path / "x").exists()


def test_multilabel_csv_reports_f1_and_map(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(240, 4))
    labels = np.stack([x[:, 0] > 0, x[:, 1] + x[:, 2] > 0, x[:, 3] > 0.5], axis=1).astype(int)
    path = tmp_path / "ml.csv"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["f0", "f1", "f2", "f3", "a", "b", "c"])
        w.writerows([[*map(float, xi), *li] for xi, li in zip(x, labels)])
    result = _train(tmp_path, "data.name=csv", f"data.root={path}", "data.label_column=[a, b, c]",
                    "task.type=multilabel", "train.epochs=10")
    assert result.test["test/map"] > 0.8 and 0 <= result.test["test/f1"] <= 1


def test_a_data_set_from_package_module_function(tmp_path, monkeypatch):
    (tmp_path / "my_data.py").write_text(
        "import torch\n"
        "from torch.utils.data import TensorDataset\n"
        "def make(cfg):\n"
        "    g = torch.Generator().manual_seed(0)\n"
        "    x = torch.randn(200, 6, generator=g); y = (x[:, 0] > 0).long()\n"
        "    return {'train': TensorDataset(x[:150], y[:150]), 'val': TensorDataset(x[150:175], y[150:175]),\n"
        "            'test': TensorDataset(x[175:], y[175:]), 'classes': ['neg', 'pos']}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    result = _train(tmp_path, "data.name=my_data:make", "train.epochs=5")
    assert result.test["test/n"] == 25 and result.test["test/acc"] > 0.7


def _png_folder(root, n=8):
    rng = np.random.default_rng(0)
    for cls, base in (("dark", 40), ("light", 210)):
        (root / cls).mkdir(parents=True)
        for i in range(n):
            img = np.clip(base + rng.normal(0, 20, (12, 12)), 0, 255).astype(np.uint8)
            Image.fromarray(img, mode="L").convert("RGB").save(root / cls / f"{i}.png")


def test_predict_a_folder_of_images_writes_one_row_per_image(tmp_path, capsys):
    _png_folder(tmp_path / "imgs")
    result = _train(tmp_path, "data.name=imagefolder", f"data.root={tmp_path / 'imgs'}", "data.image_size=12",
                    "train.epochs=2", "data.batch_size=4", "data.test_fraction=0.25", "data.val_fraction=0.2")
    out = tmp_path / "p.csv"
    assert main(["predict", str(result.run_dir), str(tmp_path / "imgs"), "--out", str(out), "--top-k", "2"]) == 0
    with open(out, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 16 and rows[0].keys() == {"input", "prediction", "probability", "top2"}
    assert {r["prediction"] for r in rows} <= {"dark", "light"}
    assert all(0 <= float(r["probability"]) <= 1 for r in rows)


def test_a_csv_saved_by_excel_with_bom_and_crlf_reads_as_the_plain_file(tmp_path):
    """Excel's "CSV UTF-8" starts with a byte-order mark and ends lines with CRLF: same table, same splits."""
    from trickbag.data.sources.table import csv_table

    plain = _csv(tmp_path / "plain.csv", "wine")
    text = open(plain, encoding="utf-8").read()
    excel = tmp_path / "excel.csv"
    excel.write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode("utf-8"))
    assert excel.read_bytes()[:3] == b"\xef\xbb\xbf" and open(excel, encoding="utf-8").read(1) == "\ufeff"
    splits = [csv_table(load_recipe("digits", ["data.name=csv", f"data.root={root}", "data.label_column=target"]).data)
              for root in (plain, excel)]
    assert splits[0].classes == splits[1].classes and splits[0].input_shape == splits[1].input_shape
    for part in ("train", "val", "test"):
        a, b = getattr(splits[0], part), getattr(splits[1], part)
        assert len(a) == len(b) > 0
        for i in range(len(a)):
            assert all(torch.equal(u, v) for u, v in zip(a[i], b[i]))
    # a BOM before the label column's name: the column is still found by its name
    first = tmp_path / "first.csv"
    rows = text.splitlines()
    header = rows[0].split(",")
    first.write_bytes(
        b"\xef\xbb\xbf"
        + "\r\n".join(
            [",".join([header[-1], *header[:-1]])]
            + [",".join([r.split(",")[-1], *r.split(",")[:-1]]) for r in rows[1:]]
        ).encode("utf-8")
    )
    moved = csv_table(load_recipe("digits", ["data.name=csv", f"data.root={first}", "data.label_column=target"]).data)
    assert moved.classes == splits[0].classes and len(moved.train) == len(splits[0].train)


OWN_MODELS = '''
import torch
from torch import nn
SEEN = {}
def takes_shape(num_classes, input_shape):
    SEEN["shape"] = input_shape
    return nn.Sequential(nn.Flatten(), nn.Linear(int(torch.tensor(input_shape).prod()), num_classes))
def plain(num_classes):
    return nn.Sequential(nn.Flatten(), nn.LazyLinear(num_classes))
def with_dropout(num_classes, dropout=0.5):
    SEEN["dropout"] = dropout
    return nn.Sequential(nn.Flatten(), nn.Dropout(dropout), nn.LazyLinear(num_classes))
def takes_all(num_classes, **kwargs):
    SEEN["kwargs"] = kwargs
    return nn.Sequential(nn.Flatten(), nn.LazyLinear(num_classes))
def lazy_that_fails(num_classes):
    return nn.Sequential(nn.LazyLinear(num_classes), nn.Linear(3, num_classes))
'''


@pytest.fixture
def own_models(tmp_path, monkeypatch):
    import importlib
    import sys

    name = f"own_models_{abs(hash(str(tmp_path))) % 10**8}"
    (tmp_path / f"{name}.py").write_text(OWN_MODELS)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name, importlib.import_module(name)
    sys.modules.pop(name, None)


def test_an_own_model_gets_the_input_shape_when_it_asks_and_only_the_kwargs_it_declares(tmp_path, own_models):
    name, mod = own_models
    wine = _csv(tmp_path / "wine.csv", "wine")
    csv_data = ["data.name=csv", f"data.root={wine}", "data.label_column=target", "train.epochs=1"]
    result = _train(tmp_path, *csv_data, f"model.name={name}:takes_shape", name="shape")
    assert mod.SEEN["shape"] == (1, 13) and result.test  # wine: 13 feature columns; CSV samples are [1, F]
    # the tabular recipe's model.kwargs {hidden, dropout} reach only a function that declares them
    recipe = load_recipe("tabular", [*QUIET, *csv_data, f"run.dir={tmp_path}", "run.name=kw",
                                     f"model.name={name}:with_dropout"])
    run_recipe(recipe, quiet=True)
    assert mod.SEEN["dropout"] == 0.5 and recipe.model.kwargs["dropout"] == 0.5
    run_recipe(load_recipe("tabular", [*QUIET, *csv_data, f"run.dir={tmp_path}", "run.name=all",
                                       f"model.name={name}:takes_all"]), quiet=True)
    assert mod.SEEN["kwargs"] == {"hidden": [64], "dropout": 0.5}
    said = io.StringIO()
    out = run_recipe(load_recipe("tabular", [*QUIET, *csv_data, f"run.dir={tmp_path}", "run.name=plain",
                                             "model.kwargs={hidden: [8], dropout: 0.3}",
                                             f"model.name={name}:plain"]), out=said)
    assert out.test  # LazyLinear: initialised by one dry forward before the optimizer is built
    assert f"model.kwargs hidden, dropout are not passed to {name}:plain" in said.getvalue()


def test_an_own_lazy_model_that_cannot_be_initialised_is_one_line(tmp_path, own_models, capsys):
    name, _ = own_models
    code = main(["train", *QUIET, "data.name=fake", "data.num_samples=60", f"model.name={name}:lazy_that_fails",
                 f"run.dir={tmp_path}", "run.name=lazy"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "lazy" in err.lower(), err
    assert not (tmp_path / "lazy").exists()


def test_the_console_script_imports_an_own_model_from_the_current_folder(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "cwd_model.py").write_text(OWN_MODELS)
    script = Path(sys.executable).with_name("trickbag")
    env = {"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    train = subprocess.run([str(script), "train", *QUIET, "data.name=fake", "data.num_samples=60", "train.epochs=1",
                            "model.name=cwd_model:plain", "run.dir=runs", "run.name=own"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert train.returncode == 0, train.stderr[-2000:]
    ev = subprocess.run([str(script), "eval", "runs/own", "--trust-model-code"], cwd=tmp_path,
                        capture_output=True, text=True, timeout=300, env=env)
    assert ev.returncode == 0, ev.stderr[-2000:]
    assert os.path.isdir(tmp_path / "runs" / "own" / "checkpoints")
