"""Built-in recipes: each loads, validates and documents its tricks, and each trains one tiny epoch.

The tiny runs shrink the data or the epochs with overrides; what they check is what the recipe
promises (frozen backbone, 10x head LR, FixRes sizes, a teacher in the loss, the tricks it switches
on), against values computed here from the recipe or the input files.
"""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
import torch
import yaml
from PIL import Image

from trickbag.config import builtin_recipes
from trickbag.errors import RecipeError
from trickbag.recipe import load_recipe, recipe_from_dict, recipe_to_yaml
from trickbag.runs.run import run_recipe
from trickbag.train.build import build
from trickbag.train.checkpoint_files import load_checkpoint
from trickbag.tricks import check_interactions

SHIPPED = {"digits", "digits-tricks", "mnist1d", "imagefolder-finetune", "distill", "tabular"}
#: recipes made hard on purpose (docs/evidence.md): plain baselines, no trick on
HARD = {"digits-noisy", "digits-longtail", "mnist1d-small"}
QUIET = ["run.progress=false", "run.plots=false", "log.tensorboard=false"]


def run(name: str, tmp_path, *overrides: str, run_name: str = "r"):
    recipe = load_recipe(name, [*QUIET, f"run.dir={tmp_path}", f"run.name={run_name}", *overrides])
    out = io.StringIO()
    return recipe, run_recipe(recipe, out=out), out.getvalue()


# --------------------------------------------------------------------------- every recipe: load, validate, document
def test_the_recipes_of_the_issue_are_shipped():
    assert set(builtin_recipes()) >= SHIPPED


def _trick_blocks(text: str) -> dict[str, str]:
    """``{trick name: its lines}`` of the ``tricks:`` section of a recipe file (2-space indented keys)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("tricks:"))
    blocks: dict[str, list[str]] = {}
    current = None
    for line in lines[start + 1:]:
        if line and not line.startswith(" "):
            break  # next top-level section
        m = re.match(r"^  ([a-z_]+):", line)
        if m:
            current = m.group(1)
            blocks[current] = []
        if current is not None:
            blocks[current].append(line)
    return {k: "\n".join(v) for k, v in blocks.items()}


@pytest.mark.parametrize("name", sorted(builtin_recipes()))
def test_recipe_loads_validates_and_round_trips(name):
    path = builtin_recipes()[name]
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert next(iter(raw)) == "description" and raw["description"].strip(), "description: must be the first key"
    recipe = load_recipe(name)
    assert recipe.name == name and recipe.description == raw["description"]
    assert recipe_from_dict(yaml.safe_load(recipe_to_yaml(recipe))) == recipe
    for trick, cfg in (raw.get("tricks") or {}).items():  # what the file switches on is on
        assert getattr(recipe.tricks, trick).enabled == bool(cfg.get("enabled", False)), trick
    teacher = ["tricks.distillation.teacher=teacher.pt"] if recipe.tricks.distillation.enabled else []
    check_interactions(load_recipe(name, teacher))  # no refused combination of tricks (given the required teacher)


@pytest.mark.parametrize("name", sorted(SHIPPED - {"digits", "tabular"} - HARD))
def test_every_trick_in_the_recipe_file_says_what_it_is_for(name):
    text = builtin_recipes()[name].read_text(encoding="utf-8")
    blocks = _trick_blocks(text)
    assert blocks, "the recipe switches on no trick"
    for trick, block in blocks.items():
        assert "#" in block, f"tricks.{trick} in {name}.yaml has no comment saying what it is for"


# --------------------------------------------------------------------------- digits, digits-tricks
def test_digits_trains_one_epoch(tmp_path):
    recipe, result, _ = run("digits", tmp_path, "train.epochs=1")
    assert len(result.history) == 1 and result.test["test/n"] == 360  # 20 % of the 1797 digits
    assert result.test["test/acc"] > 0.3  # 3x chance after one epoch: it learns


def test_digits_tricks_trains_one_epoch_with_its_tricks_on(tmp_path):
    recipe, result, printed = run("digits-tricks", tmp_path, "train.epochs=1")
    h = result.history[-1]
    # EMA evaluated (and the raw weights too), gradient norm logged, mixup + smoothing folded once
    assert {"val/acc", "val/acc_raw", "train/grad_norm"} <= set(h)
    assert "folded into the mixed targets" in printed
    ckpt = load_checkpoint(result.run_dir / "checkpoints" / "last.pt")
    assert {"ema", "mix"} <= set(ckpt["plugins"]) and "eval_model" in ckpt
    groups = ckpt["optimizer"]["param_groups"]  # no weight decay on biases / BatchNorm
    assert sorted(g["weight_decay"] for g in groups) == [0.0, recipe.optim.weight_decay]
    assert result.test["test/acc"] > 0.3


# --------------------------------------------------------------------------- tabular
def _table_csv(tmp_path, name: str):
    from sklearn import datasets

    path = tmp_path / f"{name}.csv"
    getattr(datasets, f"load_{name}")(as_frame=True).frame.to_csv(path, index=False)
    return path


def test_tabular_trains_a_csv_classification(tmp_path):
    recipe, result, _ = run("tabular", tmp_path, f"data.root={_table_csv(tmp_path, 'wine')}", "train.epochs=30")
    assert recipe.model.name == "auto" and recipe.model.kwargs == {"hidden": [64], "dropout": 0.5}
    model = load_checkpoint(result.run_dir / "checkpoints" / "best.pt")["model"]
    assert model["net.1.weight"].shape == (64, 13)  # the recipe's MLP: 13 features -> 64 hidden units
    assert {"val/acc", "val/f1"} <= set(result.history[-1]) and "test/auroc" in result.test
    assert result.test["test/acc"] > 0.85  # 3 classes


def test_tabular_regression_reports_r2_in_units(tmp_path):
    from sklearn.linear_model import LinearRegression

    path = _table_csv(tmp_path, "diabetes")
    recipe, result, _ = run("tabular", tmp_path, f"data.root={path}", "task.type=regression", "train.epochs=40")
    assert result.monitor == "val/loss"
    # reference: least squares on the same training rows (the recipe's split), scored on its test rows
    from trickbag.data.sources import build_data

    splits = build_data(recipe.data, recipe.task)
    rows = lambda ds: [torch.stack(v) for v in zip(*(ds[i] for i in range(len(ds))))]  # noqa: E731
    (x, y), (xt, yt) = rows(splits.train), rows(splits.test)
    fit = LinearRegression().fit(x.flatten(1).numpy(), y.view(len(y)).numpy())
    pred = torch.as_tensor(fit.predict(xt.flatten(1).numpy()), dtype=torch.float32)
    yt = yt.view(len(yt))
    ols_r2 = float(1 - ((pred - yt) ** 2).sum() / ((yt - yt.mean()) ** 2).sum())
    assert ols_r2 > 0.3
    assert result.test["test/r2"] > ols_r2 - 0.05  # within 0.05 of least squares after 40 epochs


# --------------------------------------------------------------------------- mnist1d
@pytest.fixture()
def small_mnist1d(tmp_path, monkeypatch):
    """MNIST-1D generated with 300 signals into a cache inside tmp_path (nothing written elsewhere)."""
    monkeypatch.setenv("TRICKBAG_CACHE", str(tmp_path / "cache"))
    return ["data.num_samples=300"]


def test_mnist1d_trains_one_epoch(tmp_path, small_mnist1d):
    recipe, result, _ = run("mnist1d", tmp_path, *small_mnist1d, "train.epochs=1")
    assert recipe.model.name == "fast_signal_cnn" and len(result.history) == 1
    assert result.test["test/n"] == 60  # the generator's own 20 % test split of 300 signals
    assert 0.0 <= result.test["test/acc"] <= 1.0 and np.isfinite(result.history[-1]["train/loss"])
    # no validation split: every training signal trains, best.pt follows the training loss
    assert "val/acc" not in result.history[-1] and recipe.train.monitor == "train/loss"
    assert (result.run_dir / "checkpoints" / "best.pt").is_file()


# --------------------------------------------------------------------------- the hard recipes
def test_the_hard_recipes_are_shipped_without_tricks():
    assert set(builtin_recipes()) >= HARD
    for name in HARD:
        r = load_recipe(name)
        assert not any(getattr(r.tricks, t).enabled for t in type(r.tricks).model_fields), name


def test_digits_noisy_and_longtail_hold_the_data_they_describe():
    from trickbag.data.sources import build_data

    clean = build_data(load_recipe("digits").data)
    noisy = build_data(load_recipe("digits-noisy").data)
    flipped = (noisy.train.y != clean.train.y).float().mean().item()
    assert abs(flipped - 0.4) < 1 / len(clean.train.y) and torch.equal(noisy.test.y, clean.test.y)
    tail = build_data(load_recipe("digits-longtail").data)
    counts = torch.bincount(tail.train.y, minlength=10)
    assert round(counts.max().item() / counts.min().item()) in range(35, 66)  # ~50x (each count rounded)
    assert torch.equal(tail.test.y, clean.test.y)


def test_mnist1d_small_trains_on_its_subset(tmp_path, small_mnist1d):
    recipe, result, text = run("mnist1d-small", tmp_path, *small_mnist1d, "train.epochs=1", "data.train_samples=100")
    assert result.test["test/n"] == 60 and recipe.data.train_samples == 100
    assert "100 of 240 training samples kept" in text


# --------------------------------------------------------------------------- imagefolder-finetune
@pytest.fixture()
def image_folder(tmp_path):
    """Two classes of 12 random 40x40 PNGs each: reddish and bluish."""
    rng = np.random.default_rng(0)
    root = tmp_path / "images"
    for _c, (name, channel) in enumerate((("red", 0), ("blue", 2))):
        (root / name).mkdir(parents=True)
        for i in range(12):
            img = rng.integers(0, 90, size=(40, 40, 3), dtype=np.uint8)
            img[..., channel] += 160
            Image.fromarray(img).save(root / name / f"{i}.png")
    return root


@pytest.fixture()
def pretrained(tmp_path):
    """A ResNet-18 state dict with ImageNet's 1000-class head, as a user's local weights file."""
    import torchvision

    torch.manual_seed(1)
    sd = torchvision.models.resnet18(num_classes=1000).state_dict()
    path = tmp_path / "resnet18.pth"
    torch.save(sd, path)
    return path, sd


def test_imagefolder_finetune_needs_a_data_root(tmp_path):
    from trickbag.errors import DataError

    with pytest.raises(DataError, match="data.root"):
        build(load_recipe("imagefolder-finetune", [*QUIET, "train.device=cpu"]))


FT_TINY = ["data.image_size=32", "data.eval_image_size=32", "data.batch_size=8", "tricks.multiscale.train_sizes=[24]",
           "train.device=cpu"]


def test_imagefolder_finetune_first_epoch_trains_the_head_only(tmp_path, image_folder, pretrained):
    path, sd = pretrained
    recipe, result, printed = run(
        "imagefolder-finetune",
        tmp_path,
        f"data.root={image_folder}",
        f"model.weights={path}",
        *FT_TINY,
        "train.epochs=1",
        "tricks.freeze.unfreeze_epoch=null",
    )
    ckpt = load_checkpoint(result.run_dir / "checkpoints" / "last.pt")
    model = ckpt["model"]
    # backbone: exactly the user's weights, BatchNorm statistics included (frozen with bn_stats)
    for key in ("conv1.weight", "layer4.1.conv2.weight", "bn1.running_mean", "layer2.0.bn1.running_var"):
        assert torch.equal(model[key], sd[key]), key
    # head: 2 classes (the 1000-class head was skipped), trained at 10x the recipe's LR
    assert model["fc.weight"].shape == (2, 512)
    base = recipe.optim.lr
    lrs = sorted({round(g["initial_lr"], 12) for g in ckpt["optimizer"]["param_groups"]})
    assert lrs == [round(10 * base, 12)]  # only head groups in the optimizer while the backbone is frozen
    assert "train at [24], evaluate at 32x32" in printed  # FixRes: train smaller, evaluate at the test size
    assert result.test["test/n"] == 5  # 20 % of the 24 images


def test_imagefolder_finetune_unfreezes_the_backbone_at_a_lower_lr(tmp_path, image_folder, pretrained):
    path, sd = pretrained
    recipe, result, _ = run("imagefolder-finetune", tmp_path, f"data.root={image_folder}", f"model.weights={path}",
                            *FT_TINY, "train.epochs=2", "tricks.freeze.unfreeze_epoch=1")
    ckpt = load_checkpoint(result.run_dir / "checkpoints" / "last.pt")
    assert not torch.equal(ckpt["model"]["conv1.weight"], sd["conv1.weight"])  # trained in epoch 2
    base = recipe.optim.lr
    lrs = sorted({round(g["initial_lr"], 12) for g in ckpt["optimizer"]["param_groups"]})
    assert lrs == [round(base, 12), round(10 * base, 12)]  # backbone back at the base LR, head at 10x


# --------------------------------------------------------------------------- distill
def test_distill_without_a_teacher_is_one_clear_error():
    with pytest.raises(RecipeError, match="tricks.distillation.teacher is not set"):
        build(load_recipe("distill", [*QUIET, "train.device=cpu"]))


def test_distill_two_steps_teacher_then_student(tmp_path):
    _, teacher, _ = run("digits", tmp_path, "train.epochs=1", run_name="teacher")
    teacher_ckpt = teacher.run_dir / "checkpoints" / "best.pt"
    recipe, student, printed = run("distill", tmp_path, "train.epochs=1", f"tricks.distillation.teacher={teacher_ckpt}",
                                   run_name="student")
    assert f"distillation from {teacher_ckpt}" in printed
    t_params = sum(v.numel() for k, v in load_checkpoint(teacher_ckpt)["model"].items() if "running" not in k
                   and "num_batches" not in k)
    s_sd = load_checkpoint(student.run_dir / "checkpoints" / "best.pt")["model"]
    s_params = sum(v.numel() for k, v in s_sd.items() if "running" not in k and "num_batches" not in k)
    assert s_params * 10 < t_params  # a much smaller student
    assert not any(k.startswith("teacher") for k in s_sd)  # the teacher is not saved with the student
    assert student.test["test/n"] == teacher.test["test/n"]  # same split: the teacher never saw these images
    assert student.test["test/acc"] > 0.3
