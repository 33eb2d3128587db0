"""Bad input: every row exits with status 2, one line ``trickbag: error: ...`` on stderr naming the
problem, no traceback, and nothing written (no run directory, no file changed).

Most rows run ``trickbag.cli.main`` in-process (fast); a few run ``python -m trickbag`` for real.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from PIL import Image

from ._helpers import run_inprocess, run_subprocess

TRAIN = ["train", "--quiet", "run.progress=false", "run.plots=false", "log.tensorboard=false"]
FAKE = ["data.name=fake", "data.num_samples=60", "model.name=mlp", "train.epochs=1"]
ROWS_10 = "".join(f"{i % 3},{i * 0.5},{i % 7}\n" for i in range(30))


def _csv(folder: Path, name: str, text: str) -> str:
    (folder / name).write_text(text)
    return str(folder / name)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    """Bad recipes, data sets and checkpoints, plus one small real run to point checkpoints at."""
    from trickbag.cli import main

    f = tmp_path_factory.mktemp("bad")
    (f / "not_yaml.yaml").write_text("data: {name: digits\n  batch_size: [1,\n")
    (f / "empty.yaml").write_text("# nothing here\n")
    (f / "list.yaml").write_text("- data\n- model\n")
    (f / "binary.yaml").write_bytes(bytes(range(256)))
    (f / "recipe_dir.yaml").mkdir()
    header = "label,a,b\n"
    _csv(f, "neg.csv", header + ROWS_10 + "-1,0.1,0.2\n")
    _csv(f, "inf.csv", header + ROWS_10 + "1,inf,0.2\n")
    _csv(f, "nolabel.csv", "x,a,b\n" + ROWS_10)
    _csv(f, "big.csv", header + ROWS_10 + "9,0.1,0.2\n")
    _csv(f, "text.csv", header + ROWS_10 + "1,abc,0.2\n")
    _csv(f, "ragged.csv", header + ROWS_10 + "1,0.2\n")
    _csv(f, "one.csv", header + "".join(f"1,{i},{i}\n" for i in range(20)))
    _csv(f, "header.csv", header)
    _csv(f, "cont.csv", "x,y\n" + "".join(f"{i},{i * 0.37 + 0.1:.3f}\n" for i in range(40)))
    (f / "if_empty").mkdir()
    (f / "if_noimg" / "cat").mkdir(parents=True)
    (f / "if_noimg" / "dog").mkdir()
    (f / "if_noimg" / "cat" / "notes.txt").write_text("no images here")
    for c in ("a", "b"):  # class a: CIELAB TIFFs (PIL converts them to RGB but not to grayscale)
        (f / "if_lab" / c).mkdir(parents=True)
        (f / "if_corrupt" / c).mkdir(parents=True)
        for i in range(6):
            if c == "a":
                Image.new("LAB", (12, 9)).save(f / "if_lab" / c / f"{i}.tiff")
                (f / "if_corrupt" / c / f"{i}.png").write_bytes(b"\x89PNG\r\n\x1a\n not really")
            else:
                Image.new("RGB", (10 + i, 8 + i), (30 * i, 0, 0)).save(f / "if_lab" / c / f"{i}.png")
                Image.new("RGB", (10, 10)).save(f / "if_corrupt" / c / f"{i}.png")
    torch.save({"w": torch.ones(2)}, f / "plain_state.pt")
    torch.save(torch.ones(3), f / "tensor.pt")
    (f / "text.pt").write_text("hello")
    (f / "empty.pt").write_bytes(b"")
    (f / "teachmod.py").write_text(
        "import torch\n\ndef teacher():\n    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 7))\n"
    )
    rc = main(TRAIN + FAKE + ["model.kwargs={hidden: [16]}", f"run.dir={f}", "run.name=small"])
    assert rc == 0
    best = (f / "small" / "checkpoints" / "best.pt").read_bytes()
    (f / "trunc.pt").write_bytes(best[: len(best) // 2])
    (f / "noresume").mkdir()
    shutil.copy(f / "small" / "recipe.yaml", f / "noresume" / "recipe.yaml")
    (f / "norecipe").mkdir()
    (f / "damaged").mkdir()
    (f / "damaged" / "recipe.yaml").write_text("data: {name: fake\n")
    _more_files(f)
    return f


def _png_header(width: int, height: int) -> bytes:
    """A PNG whose header claims ``width x height`` pixels (no pixel data): what a decompression bomb looks like."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit grayscale
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IEND", b"")


def _more_files(f: Path) -> None:
    """The inputs of the second round of bad-input reports (nesting, aliases, sizes, tiny data sets)."""
    from trickbag.cli import main

    (f / "deep.yaml").write_text("model:\n  kwargs:\n    x: " + "[" * 5000 + "]" * 5000 + "\n")
    bomb = ["a: &a [x, x, x, x, x, x, x, x, x, x]"] + [
        f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 10) + "]" for i in range(8)]
    (f / "bomb.yaml").write_text("model:\n  kwargs:\n" + "".join(f"    {line}\n" for line in bomb))
    (f / "dup.yaml").write_text("optim: {lr: 0.05, lr: 50.0}\n")
    _csv(f, "two_rows.csv", "label,a\n0,0.5\n1,0.7\n")
    _csv(f, "only_label.csv", "label\n" + "".join(f"{i % 2}\n" for i in range(20)))
    (f / "bomb.png").write_bytes(_png_header(20000, 20000))
    for c in ("cat", "dog"):  # one image per class: nothing left to train on after the splits
        (f / "if_tiny" / c).mkdir(parents=True)
        Image.new("RGB", (16, 16)).save(f / "if_tiny" / c / "0.png")
    (f / "if_one" / "cat").mkdir(parents=True)
    for i in range(12):
        Image.new("RGB", (16, 16), (i * 20, 0, 0)).save(f / "if_one" / "cat" / f"{i}.png")
    (f / "a_file").write_text("not a folder")
    rc = main(["train", "--quiet", "run.plots=false", "log.tensorboard=false", "train.epochs=1",
               "model.kwargs={width: 4}", f"run.dir={f}", "run.name=digits_run"])
    assert rc == 0


# (id, argv with {F} for the files folder, text the one error line must contain)
ROWS = [
    # recipe keys, types, ranges
    ("unknown key", TRAIN + ["optim.lrr=0.1"], "unknown recipe key 'optim.lrr' (did you mean 'optim.lr'?)"),
    ("unknown section", TRAIN + ["optimiser.lr=0.1"], "unknown recipe key 'optimiser'"),
    ("wrong type int", TRAIN + ["train.epochs=abc"], "'train.epochs': 'abc' is not allowed"),
    ("wrong type bool", TRAIN + ["train.deterministic=maybe"], "'train.deterministic'"),
    ("negative lr", TRAIN + ["optim.lr=-0.1"], "'optim.lr': -0.1 is not allowed: input should be greater than 0"),
    ("accumulate 0", TRAIN + ["train.accumulate=0"], "'train.accumulate': 0 is not allowed"),
    ("epochs 0", TRAIN + ["train.epochs=0"], "'train.epochs': 0"),
    ("batch size 0", TRAIN + ["data.batch_size=0"], "'data.batch_size': 0"),
    ("momentum 1", TRAIN + ["optim.momentum=1.0"], "'optim.momentum': 1.0"),
    ("beta out of range", TRAIN + ["optim.betas=[0.9, 1.5]"], "each beta must be in [0, 1)"),
    ("unknown precision", TRAIN + ["train.precision=8"], "allowed: '32', 'bf16' or '16'"),
    (
        "label smoothing 1.5",
        TRAIN + ["tricks.label_smoothing.enabled=true", "tricks.label_smoothing.eps=1.5"],
        "'tricks.label_smoothing.eps': 1.5 is not allowed",
    ),
    ("unknown trick", TRAIN + ["tricks.mixup.enabled=true"], "did you mean 'tricks.mix'?"),
    ("determinism with benchmark", TRAIN + ["train.deterministic=true", "train.benchmark=true"], "cannot both be true"),
    ("run name with a slash", TRAIN + ["run.name=a/b"], "plain directory name"),
    ("mean for 2 channels", TRAIN + ["data.mean=[0.5, 0.5]"], "give 3 values (RGB images) or 1 (grayscale)"),
    # overrides
    ("override without =", ["train", "digits", "optim.lr"], "override 'optim.lr' has no '='"),
    ("override with empty key", TRAIN + ["=3"], "has an empty key"),
    ("section given a value", TRAIN + ["data=3"], "'data' must be a mapping"),
    ("value used as a section", TRAIN + ["data.name.x=1"], "'data.name' is a value, not a section"),
    ("unknown option", TRAIN + ["--fast"], "unrecognized arguments: --fast"),
    ("unknown command", ["fly"], "invalid choice: 'fly'"),
    # recipe files
    ("recipe not YAML", ["train", "{F}/not_yaml.yaml"], "is not valid YAML at line 2"),
    ("empty recipe", ["train", "{F}/empty.yaml"], "is empty"),
    ("recipe is a list", ["train", "{F}/list.yaml"], "must be a mapping of sections"),
    ("binary recipe", ["train", "{F}/binary.yaml"], "is not a text file"),
    ("recipe not found", ["train", "no_such_recipe"], "recipe 'no_such_recipe' not found"),
    ("recipe is a directory", ["train", "{F}/recipe_dir.yaml"], "is a directory"),
    # data
    ("unknown data source", TRAIN + ["data.name=mnist"], "'data.name': 'mnist' is not allowed"),
    ("root for a generated source", TRAIN + ["data.root=/tmp"], "data.root is not used by data.name='digits'"),
    ("csv without root", TRAIN + ["data.name=csv"], "data.root must name a CSV file"),
    ("csv root missing", TRAIN + ["data.name=csv", "data.root={F}/nope.csv"], "CSV file does not exist"),
    ("csv negative label", TRAIN + ["data.name=csv", "data.root={F}/neg.csv"], "label -1 is out of range"),
    (
        "csv label >= num_classes",
        TRAIN + ["data.name=csv", "data.root={F}/big.csv", "data.num_classes=3"],
        "label 9 is out of range for data.num_classes=3",
    ),
    ("csv infinite feature", TRAIN + ["data.name=csv", "data.root={F}/inf.csv"], "column 'a' holds 'inf' on line 32"),
    (
        "csv missing label column",
        TRAIN + ["data.name=csv", "data.root={F}/nolabel.csv"],
        "data.label_column='label' is not a column",
    ),
    (
        "csv text in a numeric column",
        TRAIN + ["data.name=csv", "data.root={F}/text.csv"],
        "data.root='{F}/text.csv': feature column 'a' holds text with 31 distinct values (e.g. 'abc')",
    ),
    ("csv ragged row", TRAIN + ["data.name=csv", "data.root={F}/ragged.csv"], "2 fields, expected 3"),
    ("csv one class", TRAIN + ["data.name=csv", "data.root={F}/one.csv"], "fewer than 2 classes"),
    ("csv header only", TRAIN + ["data.name=csv", "data.root={F}/header.csv"], "has no data rows"),
    ("imagefolder root missing", TRAIN + ["data.name=imagefolder", "data.root={F}/nope"], "does not exist"),
    (
        "imagefolder without classes",
        TRAIN + ["data.name=imagefolder", "data.root={F}/if_empty"],
        "holds no images in class sub-folders",
    ),
    (
        "imagefolder without images",
        TRAIN + ["data.name=imagefolder", "data.root={F}/if_noimg"],
        "holds no images in class sub-folders",
    ),
    (
        "image mode the transform cannot convert",
        TRAIN
        + [
            "data.name=imagefolder",
            "data.root={F}/if_lab",
            "data.image_size=8",
            "data.mean=[0.5]",
            "data.std=[0.25]",
            "model.name=small_cnn",
        ],
        "the first train sample (file '{F}/if_lab/a/",
    ),
    (
        "corrupt image files",
        TRAIN + ["data.name=imagefolder", "data.root={F}/if_corrupt", "data.image_size=8", "model.name=small_cnn"],
        "6 of 12 images cannot be read (50.0 %, above data.max_corrupt=0.01): 'a/0.png' (UnidentifiedImageError",
    ),
    (
        "batch larger than the data with drop_last",
        TRAIN + FAKE + ["data.batch_size=500", "data.drop_last=true"],
        "data.batch_size=500 is larger than the training set",
    ),
    ("zero-sized sample shape", TRAIN + FAKE + ["data.shape=[1,0,8]"], "every size must be >= 1"),
    (
        "validation monitor without validation data",
        TRAIN + FAKE + ["data.val_fraction=0", "train.monitor=val/acc"],
        "needs a validation split",
    ),
    # models, devices
    ("unknown model", TRAIN + ["model.name=resnet19"], "did you mean 'resnet18'?"),
    ("model module missing", TRAIN + ["model.name=nosuchpkg.mod:make"], "cannot import 'nosuchpkg.mod'"),
    ("model keyword not accepted", TRAIN + FAKE + ["model.kwargs={depth: 3}"], "do not fit model 'mlp'"),
    ("fewer model outputs than classes", TRAIN + ["model.num_classes=2"], "smaller than the 10 classes"),
    ("initial weights missing", TRAIN + ["model.weights=/nonexistent/w.pt"], "does not exist"),
    (
        "initial weights not a checkpoint",
        TRAIN + FAKE + ["model.weights={F}/text.pt"],
        "is not a checkpoint written by torch.save",
    ),
    (
        "initial weights of another model",
        TRAIN + ["model.weights={F}/small/checkpoints/best.pt"],
        "matches no parameter of 'small_cnn'",
    ),
    ("device that does not exist", TRAIN + ["train.device=cuda:3"], "'cuda:3' does not exist on this machine"),
    ("device name that is not one", TRAIN + ["train.device=banana"], "'banana' is not a device name"),
    # tricks
    (
        "conflicting tricks",
        TRAIN + FAKE + ["tricks.ema.enabled=true", "tricks.swa.enabled=true"],
        "tricks.ema and tricks.swa",
    ),
    (
        "mix with both alphas 0",
        TRAIN + FAKE + ["tricks.mix.enabled=true", "tricks.mix.mixup_alpha=0", "tricks.mix.cutmix_alpha=0"],
        "are both 0",
    ),
    ("distillation without teacher", TRAIN + FAKE + ["tricks.distillation.enabled=true"], "teacher is not set"),
    (
        "teacher with other classes",
        TRAIN + FAKE + ["tricks.distillation.enabled=true", "tricks.distillation.teacher=teachmod:teacher"],
        "predicts [7] outputs but the student has 4 classes",
    ),
    (
        "teacher checkpoint with other classes",
        TRAIN
        + FAKE
        + [
            "data.num_classes=3",
            "tricks.distillation.enabled=true",
            "tricks.distillation.teacher={F}/small/checkpoints/best.pt",
        ],
        "predicts [4] outputs but the student has 3 classes",
    ),
    # resume
    ("resume directory missing", ["train", "--resume", "{F}/nope"], "no such run directory"),
    ("resume directory without recipe", ["train", "--resume", "{F}/norecipe"], "is not a trickbag run directory"),
    ("resume directory with a damaged recipe", ["train", "--resume", "{F}/damaged"], "is not valid YAML"),
    ("resume with a recipe name", ["train", "--resume", "{F}/small", "digits"], "drop 'digits'"),
    (
        "resume into a different model",
        ["train", "--resume", "{F}/small", "model.kwargs={hidden: [8]}"],
        "--resume cannot change model.kwargs",
    ),
    # checkpoints
    ("checkpoint missing", ["eval", "{F}/nope.pt"], "does not exist"),
    ("truncated checkpoint", ["eval", "{F}/trunc.pt"], "is truncated or corrupted"),
    ("not a checkpoint", ["eval", "{F}/text.pt"], "is not a checkpoint written by torch.save"),
    ("empty checkpoint", ["eval", "{F}/empty.pt"], "is empty"),
    ("checkpoint holding a tensor", ["eval", "{F}/tensor.pt"], "holds a Tensor, not a checkpoint dict"),
    ("bare state dict", ["eval", "{F}/plain_state.pt"], "is not a trickbag run checkpoint"),
    ("run directory without best.pt", ["eval", "{F}/noresume"], "has no checkpoints/best.pt"),
    ("unknown split", ["eval", "{F}/small", "--split", "dev"], "invalid choice: 'dev'"),
    ("image missing", ["predict", "{F}/small/checkpoints/best.pt", "{F}/nope.png"], "does not exist"),
    # a run on vectors is told first that it takes no images, whatever the file holds
    ("not an image, for a non-image run", ["predict", "{F}/small/checkpoints/best.pt", "{F}/text.pt"],
     "does not take images"),
    (
        "image for a non-image recipe",
        ["predict", "{F}/small/checkpoints/best.pt", "{F}/if_lab/b/0.png"],
        "does not take images",
    ),
    # sizes, nesting, aliases, numbers (each found by trying bad inputs)
    ("YAML nested 5000 deep", ["train", "{F}/deep.yaml"], "nests deeper than 32 levels"),
    ("YAML alias bomb in model.kwargs", ["train", "{F}/bomb.yaml"], "expands to more than 100,000 values"),
    ("duplicate YAML key", ["train", "{F}/dup.yaml"], "key 'lr' is given twice in one mapping"),
    ("seed beyond 64 bits", TRAIN + ["train.seed=99999999999999999999999"], "'train.seed'"),
    ("negative split seed", TRAIN + ["data.split_seed=-1"], "'data.split_seed': -1 is not allowed"),
    (
        "validation fraction leaving no training data",
        TRAIN + FAKE + ["data.val_fraction=0.999"],
        "data.val_fraction=0.999 leaves 0 of 48 samples",
    ),
    ("batch size beyond any data set", TRAIN + FAKE + ["data.batch_size=99999999999999999999"], "'data.batch_size'"),
    ("run name of 300 characters", TRAIN + ["run.name=" + "x" * 300], "a run name may have at most 128"),
    ("run.dir that is a file", TRAIN + FAKE + ["run.dir={F}/a_file"], "is a file, not a folder"),
    ("run.dir under /proc", TRAIN + FAKE + ["run.dir=/proc/trickbag"], "cannot create the run directory"),
    ("MLP with a 10^12-unit layer", TRAIN + FAKE + ["model.kwargs={hidden: [1000000000000]}"], "parameters"),
    ("predict --top-k 0", ["predict", "{F}/digits_run", "{F}/if_lab/b/0.png", "--top-k", "0"], "must be >= 1"),
    ("predict --top -3", ["predict", "{F}/digits_run", "{F}/if_lab/b/0.png", "--top", "-3"], "must be >= 1"),
    ("20000x20000 PNG to predict", ["predict", "{F}/digits_run", "{F}/bomb.png"], "too large to decode safely"),
    (
        "CSV with two data rows",
        TRAIN + ["data.name=csv", "data.root={F}/two_rows.csv", "model.name=mlp"],
        "data.val_fraction=0.1 leaves 0 of 1 samples",
    ),
    (
        "CSV with only a label column",
        TRAIN + ["data.name=csv", "data.root={F}/only_label.csv"],
        "has no feature column",
    ),
    (
        "image folder too small to split",
        TRAIN + ["data.name=imagefolder", "data.root={F}/if_tiny", "data.image_size=16"],
        "leaves 0 of 1 samples",
    ),
    (
        "image folder with one class",
        TRAIN + ["data.name=imagefolder", "data.root={F}/if_one", "data.image_size=16"],
        "classification needs at least 2",
    ),
    ("empty --resume", ["train", "--resume", ""], "--resume needs a run directory"),
    ("true as a number of epochs", TRAIN + ["train.epochs=true"], "true/false is not a number here"),
    ("infinite learning rate", TRAIN + ["optim.lr=.inf"], "must be a finite number"),
    (
        "python tag in an override",
        TRAIN + ["run.name=!!python/object/apply:os.system [ls]"],
        "could not determine a constructor for the tag",
    ),
    (
        "resume with another optimizer",
        ["train", "--resume", "{F}/small", "optim.name=adamw"],
        "--resume cannot change optim.name ('sgd' -> 'adamw')",
    ),
    (
        "a CSV where the recipe goes",
        ["train", "{F}/neg.csv"],
        "is a data file, not a recipe (YAML); to train on it: trickbag train tabular data.root={F}/neg.csv",
    ),
    (
        "a folder of images where the recipe goes",
        ["train", "{F}/if_lab"],
        "(to train on a folder of images: trickbag train imagefolder-finetune data.root={F}/if_lab)",
    ),
    (
        "a continuous label with the tabular recipe",
        ["train", "tabular", "data.root={F}/cont.csv", "data.label_column=y"],
        "a continuous target; set task.type=regression",
    ),
]


def _listing(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_size for p in folder.rglob("*")}


def test_at_least_60_distinct_rows():
    assert len(ROWS) >= 60 and len({r[0] for r in ROWS}) == len(ROWS)


@pytest.mark.parametrize("argv, expect", [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(files, tmp_path, monkeypatch, capsys, argv, expect):
    monkeypatch.syspath_prepend(str(files))
    monkeypatch.chdir(tmp_path)  # the default run.dir (runs/) would be created here
    runs = tmp_path / "runs"
    argv = [a.replace("{F}", str(files)) for a in argv]
    if argv[0] == "train" and "--resume" not in argv and not any(a.startswith("run.dir=") for a in argv):
        argv.append(f"run.dir={runs}")
    before = _listing(files)
    try:
        rc, out, err = run_inprocess(argv, capsys)
    except SystemExit as exc:  # argparse errors
        rc, err = exc.code, capsys.readouterr().err
    lines = err.strip().splitlines()
    assert rc == 2, err
    assert len(lines) == 1 and lines[0].startswith("trickbag: error: "), err
    assert "Traceback" not in err
    assert expect.replace("{F}", str(files)) in lines[0]
    assert not runs.exists() and list(tmp_path.iterdir()) == []
    assert _listing(files) == before  # nothing written or half-written next to the inputs either


@pytest.mark.parametrize("argv, expect", [
    (["train", "{F}/not_yaml.yaml", "data.name=csv"], "is not valid YAML"),
    (["eval", "{F}/trunc.pt"], "is truncated or corrupted"),
], ids=["not YAML", "truncated checkpoint"])
def test_bad_input_through_the_real_command(files, tmp_path, argv, expect):
    proc = run_subprocess([a.replace("{F}", str(files)) for a in argv], cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("trickbag: error: ") and expect in lines[0], proc.stderr
    assert list(tmp_path.iterdir()) == []
