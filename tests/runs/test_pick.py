"""The recipe ``trickbag train`` picks when none is named, and the image size of ``imagefolder-scratch``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image

from trickbag.recipe import load_recipe
from trickbag.runs.pick import fit_recipe, folder_image_size, image_size_rule

QUIET = ["run.progress=false", "run.plots=false", "log.tensorboard=false", "train.threads=1"]


def _images(root: Path, sizes: dict[str, list[tuple[int, int]]]) -> Path:
    """``root/<class>/<i>.png`` of the given (width, height)s."""
    rng = np.random.default_rng(0)
    for cls, whs in sizes.items():
        (root / cls).mkdir(parents=True, exist_ok=True)
        for i, (w, h) in enumerate(whs):
            Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(root / cls / f"{i}.png")
    return root


def test_a_csv_with_no_recipe_named_trains_with_the_tabular_recipe():
    name, extra, line = fit_recipe(None, ["data.name=csv", "data.root=wine.csv", "data.label_column=target"])
    assert (name, extra) == ("tabular", [])
    assert line == "no recipe named: data.name=csv trains with the tabular recipe; name one to choose"


def test_the_users_overrides_win_over_the_picked_recipe():
    overrides = ["data.name=csv", "data.root=wine.csv", "optim.lr=0.01", "train.epochs=7"]
    name, extra, _ = fit_recipe(None, overrides)
    r = load_recipe(name, [*extra, *overrides])
    assert (r.name, r.optim.lr, r.train.epochs, r.optim.weight_decay) == ("tabular", 0.01, 7, 0.3)


def test_an_image_folder_with_no_recipe_named_trains_from_scratch_sized_from_its_images(tmp_path):
    # short sides 20, 30, 30, 30, 44: median 30 -> 32 (a multiple of 8)
    root = _images(tmp_path / "pets", {"cat": [(20, 50), (40, 30), (30, 30)], "dog": [(30, 60), (44, 44)]})
    name, extra, line = fit_recipe(None, ["data.name=imagefolder", f"data.root={root}"])
    assert (name, extra) == ("imagefolder-scratch", ["data.image_size=32"])
    assert line.startswith("no recipe named: data.name=imagefolder trains with the imagefolder-scratch recipe at "
                           "32x32 pixels (the median short side of 5 images is 30")
    assert line.endswith("; name one to choose")
    r = load_recipe(name, [*extra, "data.name=imagefolder", f"data.root={root}"])
    assert (r.model.name, r.data.image_size, r.data.eval_image_size) == ("small_cnn", 32, None)


def test_a_given_image_size_is_kept(tmp_path):
    root = _images(tmp_path / "pets", {"cat": [(40, 40)] * 2, "dog": [(40, 40)] * 2})
    overrides = ["data.name=imagefolder", f"data.root={root}", "data.image_size=24"]
    name, extra, line = fit_recipe(None, overrides)
    assert (name, extra) == ("imagefolder-scratch", [])
    assert line == ("no recipe named: data.name=imagefolder trains with the imagefolder-scratch recipe; "
                    "name one to choose")
    assert load_recipe(name, [*extra, *overrides]).data.image_size == 24


@pytest.mark.parametrize(("sides", "size"), [([10, 12, 14], 16), ([28, 28, 29], 32), ([27], 24), ([36], 40),
                                              ([42, 43, 44], 40), ([43, 44, 45], 48), ([500, 375, 333], 64)])
def test_the_size_rule_is_the_median_short_side_clamped_and_rounded_to_8(tmp_path, sides, size):
    assert image_size_rule(sides) == size
    # the same from files of those sizes (landscape and portrait), read header-only
    whs = [(s, s + 7) if i % 2 else (s + 3, s) for i, s in enumerate(sides)]
    root = _images(tmp_path / "f", {"a": whs})
    assert folder_image_size(root) == (size, len(sides), float(np.median(sides)))


def test_the_size_looks_at_a_few_hundred_images_spread_over_the_classes(tmp_path):
    root = _images(tmp_path / "f", {"a": [(16, 16)] * 30, "b": [(64, 64)] * 40})
    assert folder_image_size(root, limit=20) == (64, 20, 64.0)  # every 3.5th file: 9 of a, 11 of b
    assert folder_image_size(root, limit=70) == (64, 70, 64.0)  # all of them


def test_a_named_recipe_is_used_as_named(tmp_path):
    assert fit_recipe("digits", ["data.name=csv", "data.root=x.csv"]) == ("digits", [], None)
    assert fit_recipe("tabular", ["data.root=x.csv"]) == ("tabular", [], None)
    root = _images(tmp_path / "pets", {"cat": [(100, 100)] * 2, "dog": [(100, 100)] * 2})
    assert fit_recipe("imagefolder-finetune", [f"data.root={root}"]) == ("imagefolder-finetune", [], None)
    # the from-scratch recipe named is still sized from its images, and says so
    name, extra, line = fit_recipe("imagefolder-scratch", [f"data.root={root}"])
    assert (name, extra) == ("imagefolder-scratch", ["data.image_size=64"])
    assert line.startswith("imagefolder-scratch: images at 64x64 pixels") and "no recipe named" not in line


def test_other_data_keeps_the_default_recipe():
    assert fit_recipe(None, []) == (None, [], None)
    assert fit_recipe(None, ["data.name=fake"]) == (None, [], None)
    assert fit_recipe(None, ["optim.lrr=0.1"]) == (None, [], None)  # refused by the loader, in one line


def test_the_command_says_its_choice_and_the_run_is_named_after_the_data(tmp_path, capsys):
    from trickbag.cli import main

    root = _images(tmp_path / "pets", {"cat": [(20, 20)] * 8, "dog": [(20, 20)] * 8})
    (tmp_path / "my wine.csv").write_text("a,b,label\n" + "".join(f"{i % 7},{i % 3},{i % 2}\n" for i in range(40)))
    runs = tmp_path / "runs"
    assert main(["train", "data.name=csv", f"data.root={tmp_path / 'my wine.csv'}", "data.label_column=label",
                 "train.epochs=1", f"run.dir={runs}", *QUIET]) == 0
    err = capsys.readouterr().err
    assert "trickbag: no recipe named: data.name=csv trains with the tabular recipe; name one to choose\n" in err
    assert main(["train", "data.name=imagefolder", f"data.root={root}", "train.epochs=1", f"run.dir={runs}",
                 *QUIET]) == 0
    err = capsys.readouterr().err
    assert "trickbag: no recipe named: data.name=imagefolder trains with the imagefolder-scratch recipe at " \
           "24x24 pixels" in err
    stored = {p.name.rsplit("-", 2)[0]: yaml.safe_load((p / "recipe.yaml").read_text()) for p in runs.iterdir()}
    assert sorted(stored) == ["my_wine", "pets"]
    assert stored["my_wine"]["name"] == "tabular" and stored["my_wine"]["model"]["kwargs"]["hidden"] == [64]
    assert stored["pets"]["name"] == "imagefolder-scratch" and stored["pets"]["data"]["image_size"] == 24
    assert stored["pets"]["model"]["name"] == "small_cnn"
