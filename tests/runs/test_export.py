"""``trickbag export``: every format loads in a process where trickbag cannot be imported and gives what
``trickbag predict`` gives (probabilities within 1e-4), on inputs prepared here from preprocess.json alone."""

from __future__ import annotations

import csv
import datetime
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from PIL import Image

from trickbag.cli import main
from trickbag.recipe import load_recipe
from trickbag.runs.run import run_recipe

QUIET = ["run.progress=false", "run.plots=false", "log.tensorboard=false"]
FORMATS = ["torchscript", "exported", "onnx", "safetensors"]

# loads an export with trickbag blocked: sys.modules['trickbag'] = None and the source tree off sys.path
_NO_TRICKBAG = r"""
import sys
sys.modules["trickbag"] = None
sys.path = [p for p in sys.path if not p.rstrip("/").endswith("src")]
try:
    import trickbag  # noqa: F401
    raise SystemExit("trickbag is importable")
except ImportError:
    pass
import torch
fmt, folder, x_path, out_path = sys.argv[1:5]
x = torch.load(x_path)
if fmt == "torchscript":
    out = torch.jit.load(f"{folder}/model.pt")(x)
elif fmt == "exported":
    out = torch.export.load(f"{folder}/model.pt2").module()(x)
elif fmt == "onnx":
    import onnxruntime
    s = onnxruntime.InferenceSession(f"{folder}/model.onnx", providers=["CPUExecutionProvider"])
    out = torch.from_numpy(s.run(None, {"input": x.numpy()})[0])
else:
    import safetensors.torch
    out = safetensors.torch.load_file(f"{folder}/model.safetensors")
torch.save(out, out_path)
"""


def _without_trickbag(fmt, folder, x, tmp_path):
    torch.save(x, tmp_path / "x.pt")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, "-c", _NO_TRICKBAG, fmt, str(folder), str(tmp_path / "x.pt"),
                        str(tmp_path / "out.pt")], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    return torch.load(tmp_path / "out.pt")


def _table(path, n=150, seed=0):
    rng = np.random.default_rng(seed)
    start = datetime.date(2021, 1, 1)
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "a", "colour", "when", "b", "label"])
        for i in range(n):
            a, b = rng.normal(0, 1), rng.normal(5, 3)
            colour = ["red", "green", "blue"][int(rng.integers(3))]
            when = start + datetime.timedelta(days=int(rng.integers(0, 700)))
            label = ["low", "mid", "high"][int(a > 0.3) + int(colour == "red")]
            w.writerow([f"c{seed}-{i}", "" if rng.random() < 0.1 else f"{a:.4f}", colour, when.isoformat(), f"{b:.3f}",
                        label])
    return path


@pytest.fixture(scope="module")
def table_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("export-csv")
    data = _table(tmp / "train.csv")
    recipe = load_recipe("digits", [*QUIET, f"run.dir={tmp / 'runs'}", "run.name=t", "data.name=csv",
                                    f"data.root={data}", "data.label_column=label",
                                    "data.feature_columns=[a, colour, when, b]", "data.bins={b: {n_bins: 3}}",
                                    "train.epochs=2"])
    return run_recipe(recipe, quiet=True).run_dir, _table(tmp / "queries.csv", n=25, seed=3)


@pytest.fixture(scope="module")
def table_export(table_run, tmp_path_factory):
    """fmt -> the run's export folder, written once per module through the command line."""
    made = {}

    def get(fmt):
        if fmt not in made:
            made[fmt] = tmp_path_factory.mktemp(f"exp-{fmt}") / "exp"
            assert main(["export", str(table_run[0]), "--format", fmt, "--out", str(made[fmt])]) == 0
        return made[fmt]

    return get


def _naive_raw(columns, path):
    """The raw input preprocess.json describes, built here from the CSV with the standard library."""
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    out = []
    for r in rows:
        values = []
        for c in columns:
            cell = r[c["column"]].strip()
            if c["type"] == "category":
                values.append(float(c["categories"].index(cell)) if cell in c["categories"] else math.nan)
            elif cell == "":
                values.append(math.nan)
            elif c.get("part"):
                d = datetime.datetime.fromisoformat(cell).replace(tzinfo=datetime.timezone.utc)
                values.append({"days": (d - epoch).total_seconds() / 86400, "month": d.month, "weekday": d.weekday(),
                               "yearday": d.timetuple().tm_yday}[c["part"]])
            else:
                values.append(float(cell))
        out.append(values)
    return torch.tensor(out, dtype=torch.float32)


def _predict_probs(run, inputs):
    from trickbag.runs.inference import predict

    task, names, out = predict(run, [str(i) for i in inputs])
    return task, torch.tensor([[p for _, p in sorted(d, key=lambda t: t[0])] for d in task.describe(out, top=99)]), out


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_table_export_loads_without_trickbag_and_matches_predict(table_run, table_export, fmt, tmp_path):
    run, queries = table_run
    folder = table_export(fmt)
    assert {p.name for p in folder.iterdir()} == {"model." + {"torchscript": "pt", "exported": "pt2", "onnx": "onnx",
                                                              "safetensors": "safetensors"}[fmt],
                                                  "preprocess.json", "README.md", "recipe.yaml"}
    info = json.loads((folder / "preprocess.json").read_text())
    assert info["classes"] == ["high", "low", "mid"] and info["task"] == "classification"
    task, want, logits = _predict_probs(run, [queries])
    ck = torch.load(run / "checkpoints" / "best.pt", weights_only=True)
    if fmt == "safetensors":  # weights only: the file holds the evaluated weights; the architecture is rebuilt
        weights = _without_trickbag(fmt, folder, torch.zeros(1), tmp_path)
        assert "architecture" in info and "rebuild" in info["architecture"]
        expected = ck.get("eval_model") or ck["model"]
        assert weights.keys() == expected.keys() and all(torch.equal(weights[k], expected[k]) for k in weights)
        enc = info["input"]["encoding"]
        assert enc["columns"] == ck["preprocess"]["table"]["columns"]
        return
    x = _naive_raw(info["input"]["columns"], queries)
    got = _without_trickbag(fmt, folder, x, tmp_path)
    order = sorted(range(3), key=lambda k: info["classes"][k])
    assert got.shape == (25, 3)
    assert (got[:, order] - want).abs().max() <= 1e-4
    loader = {"torchscript": "torch.jit.load", "exported": "torch.export.load", "onnx": "InferenceSession"}[fmt]
    assert loader in (folder / "README.md").read_text()


def _pngs(root, n=6, size=(18, 14)):
    rng = np.random.default_rng(0)
    for cls, base in (("cat", 50), ("dog", 200)):
        (root / cls).mkdir(parents=True)
        for i in range(n):
            img = np.clip(base + rng.normal(0, 40, (*size, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(img, mode="RGB").save(root / cls / f"{i}.png")


@pytest.fixture(scope="module")
def image_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("export-img")
    _pngs(tmp / "imgs")
    _pngs(tmp / "queries", n=3, size=(23, 17))
    recipe = load_recipe("digits", [*QUIET, f"run.dir={tmp / 'runs'}", "run.name=i", "data.name=imagefolder",
                                    f"data.root={tmp / 'imgs'}", "data.image_size=12", "data.batch_size=4",
                                    "train.epochs=1", "data.test_fraction=0.25", "data.val_fraction=0.2",
                                    "tricks.tta.enabled=true"])
    return run_recipe(recipe, quiet=True).run_dir, tmp / "queries"


def _naive_images(info, folder):
    """preprocess.json's steps with PIL and torchvision, in the file order predict uses (sorted)."""
    from torchvision.transforms import v2

    inp = info["input"]
    t = v2.Compose([v2.ToImage(), v2.Resize(inp["resize"], antialias=True), v2.CenterCrop(inp["crop"]),
                    v2.ToDtype(torch.float32, scale=True), v2.Normalize(inp["mean"], inp["std"])])
    files = sorted(p for p in folder.rglob("*.png"))
    return torch.stack([t(Image.open(p).convert(inp["mode"])) for p in files]), files


@pytest.mark.parametrize("fmt", ["torchscript", "exported", "onnx"])
def test_an_image_export_with_flip_tta_matches_predict_without_trickbag(image_run, fmt, tmp_path):
    run, queries = image_run
    folder = tmp_path / "exp"
    assert main(["export", str(run), "--format", fmt, "--out", str(folder)]) == 0
    info = json.loads((folder / "preprocess.json").read_text())
    assert any("flip TTA" in s for s in info["included_in_model"])
    x, files = _naive_images(info, queries)
    _, want, _ = _predict_probs(run, [queries])
    got = _without_trickbag(fmt, folder, x, tmp_path)
    assert (got - want).abs().max() <= 1e-4


def test_trickbag_load_round_trips_a_run_and_each_export(table_run, table_export, image_run, tmp_path):
    import trickbag

    run, queries = table_run
    _, want, _ = _predict_probs(run, [queries])
    model, predict = trickbag.load(run)
    assert isinstance(model, torch.nn.Module) and not model.training
    assert (predict(str(queries)) - want).abs().max() <= 1e-5
    for fmt in FORMATS:
        model, predict = trickbag.load(table_export(fmt))
        assert (predict(queries) - want).abs().max() <= 1e-4, fmt
    img_run, img_queries = image_run
    _, want, _ = _predict_probs(img_run, [img_queries])
    assert main(["export", str(img_run), "--format", "safetensors", "--out", str(tmp_path / "img")]) == 0
    for source in (img_run, tmp_path / "img"):
        _, predict = trickbag.load(source)
        assert (predict(img_queries) - want).abs().max() <= 1e-4


def test_onnx_without_its_extra_is_one_line_naming_it(table_run, tmp_path, monkeypatch, capsys):
    run, _ = table_run
    monkeypatch.setitem(sys.modules, "onnx", None)
    assert main(["export", str(run), "--format", "onnx", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "trickbag[export]" in err[0] and not (tmp_path / "o").exists()
