"""imagefolder: an unreadable file is one ``trickbag: error:`` line naming it (before training, or met mid-run when
it breaks after the data were built); mixed modes/sizes load."""

from __future__ import annotations

import io
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from trickbag.cli import main
from trickbag.data.sources import build_data
from trickbag.errors import DataError
from trickbag.recipe import load_recipe

QUIET = ["run.progress=false", "run.plots=false", "log.tensorboard=false"]
GREY16 = 128 * 257  # a 16-bit grey level whose 8-bit value is 128


def _images(cls: str) -> list[tuple[str, Image.Image]]:
    """Eight images per class in different modes and sizes (class b brighter than class a)."""
    k = 40 if cls == "a" else 200
    pal = Image.new("P", (11, 9), 1)
    pal.putpalette([0, 0, 0, k, k // 2, 10] + [0] * 762)
    pal.info["transparency"] = bytes([0, 128])  # per-entry alpha (tRNS): PIL warns unless converted via RGBA
    return [
        ("0_rgb.png", Image.new("RGB", (12, 10), (k, 0, 0))),
        ("1_l.png", Image.new("L", (9, 14), k)),
        ("2_rgba.png", Image.new("RGBA", (16, 16), (0, k, 0, 128))),
        ("3_la.png", Image.new("LA", (10, 10), (k, 200))),
        ("4_p.png", pal),
        ("5_grey16.png", Image.fromarray(np.full((13, 10), GREY16, np.uint16))),
        ("6_bw.png", Image.new("1", (8, 20), 1)),
        ("7_rgb_large.png", Image.new("RGB", (40, 30), (k, k, k))),
    ]


def _folder(root: Path, bad: bytes | None = None) -> Path:
    for cls in ("a", "b"):
        (root / cls).mkdir(parents=True)
        for name, img in _images(cls):
            img.save(root / cls / name)
    if bad is not None:  # sorts last: never the first sample of a split, so only a running epoch meets it
        (root / "b" / "zz_bad.png").write_bytes(bad)
    return root


def _truncated_png() -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(buf, "PNG")
    data = buf.getvalue()
    return data[: len(data) // 2]


def _samples(splits):
    """(path, dataset, index) of every sample of the train / val / test splits."""
    for split in (splits.train, splits.val, splits.test):
        for i in range(len(split)):
            yield split.dataset.samples[split.indices[i]][0], split, i


def _recipe(root: Path, *extra: str):
    return load_recipe(
        "digits",
        ["data.name=imagefolder", f"data.root={root}", "data.image_size=8", "data.val_fraction=0.25",
         "data.augment=false", *extra],
    )


@pytest.mark.parametrize(
    "bad, workers", [(_truncated_png(), 0), (b"\x89PNG\r\n\x1a\n" + bytes(range(200)), 1)], ids=["truncated", "garbage"]
)
def test_unreadable_image_is_one_line_naming_the_file_before_training(tmp_path, capsys, bad, workers):
    root = _folder(tmp_path / "imgs", bad)
    rc = main(
        ["train", "--quiet", "data.name=imagefolder", f"data.root={root}", "data.image_size=8", "data.batch_size=4",
         "data.val_fraction=0.25", f"data.num_workers={workers}", "model.name=small_cnn", "train.epochs=1",
         f"run.dir={tmp_path / 'runs'}", "run.name=r", *QUIET]
    )
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("trickbag: error: ") and err.count("\n") == 1, err
    # every file is decoded when the data are built, so it is found before the run folder exists (1 of 17 files
    # is above data.max_corrupt's default share, 1 %)
    assert "'b/zz_bad.png'" in err and "1 of 17 images cannot be read" in err and "data.max_corrupt=" in err
    assert not (tmp_path / "runs").exists()
    assert "Traceback" not in err and "DataLoader worker" not in err


def test_dataset_and_worker_errors_name_the_file(tmp_path):
    root = _folder(tmp_path / "imgs")
    Image.new("RGB", (9, 9)).save(root / "b" / "zz_bad.png")
    splits = build_data(_recipe(root).data)
    (root / "b" / "zz_bad.png").write_bytes(b"not an image at all")  # it breaks after the data were built
    (path, ds, i), = [s for s in _samples(splits) if s[0].endswith("zz_bad.png")]
    with pytest.raises(DataError) as err:
        ds[i]
    assert str(err.value) == (
        f"data: {ds.split} sample {i} (file {path!r}) cannot be loaded: UnidentifiedImageError: "
        f"cannot identify image file {path!r}"
    )
    # through a DataLoader worker the same one-line message comes back (no worker traceback)
    loader = torch.utils.data.DataLoader(ds, batch_size=len(ds), num_workers=1)
    with pytest.raises(DataError) as werr:
        next(iter(loader))
    assert str(werr.value) == str(err.value)


@pytest.mark.parametrize("grey", [False, True], ids=["rgb", "grey"])
def test_mixed_modes_and_sizes_load(tmp_path, grey):
    root = _folder(tmp_path / "imgs")
    extra = ["data.mean=[0]", "data.std=[1]"] if grey else ["data.mean=[0,0,0]", "data.std=[1,1,1]"]
    splits = build_data(_recipe(root, *extra).data)
    channels = 1 if grey else 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. PIL's warning on palette images with transparency
        loaded = {Path(path).parent.name + "/" + Path(path).name: ds[i][0] for path, ds, i in _samples(splits)}
    assert len(loaded) == 16
    assert all(x.shape == (channels, 8, 8) and x.dtype == torch.float32 for x in loaded.values())
    # 16-bit grey: round(v / 257) / 255, not PIL's clipping of every value above 255 to white
    expected = round(GREY16 / 257) / 255
    assert torch.allclose(loaded["a/5_grey16.png"], torch.full((channels, 8, 8), expected), atol=1e-6)
    # palette with transparency: the palette colour (RGBA first keeps it; only alpha is dropped)
    r, g, b = 200 / 255, 100 / 255, 10 / 255  # palette entry 1 of class b
    want = torch.tensor([0.299 * r + 0.587 * g + 0.114 * b] if grey else [r, g, b])  # ITU-R 601 luma for L
    assert torch.allclose(loaded["b/4_p.png"], want.view(-1, 1, 1).expand(channels, 8, 8), atol=1 / 255)


def _size_notes(tmp_path, *overrides):
    from trickbag.recipe import load_recipe
    from trickbag.runs.preflight import preflight
    from trickbag.train.build import build

    rng = np.random.default_rng(0)
    for cls, base in (("a", 40), ("b", 210)):
        (tmp_path / "imgs" / cls).mkdir(parents=True, exist_ok=True)
        for i in range(6):
            img = np.clip(base + rng.normal(0, 30, (20, 20, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(img, mode="RGB").save(tmp_path / "imgs" / cls / f"{i}.png")
    recipe = load_recipe("imagefolder-finetune", [f"data.root={tmp_path / 'imgs'}", "model.name=small_cnn",
                                                  "tricks.freeze.enabled=false", "tricks.param_groups.enabled=false",
                                                  "data.batch_size=4", "train.epochs=3", *overrides])
    trainer, ctx = build(recipe, device="cpu")
    preflight(trainer, ctx)
    return [n for n in ctx.notes if n.startswith("warning:")]


def test_training_above_the_evaluation_size_is_a_one_line_warning(tmp_path):
    """A multiscale train size of 176 px on 64-px images upsamples training images above the evaluation size
    (FixRes trains below it); said in one line with the sizes. The built-in recipe's size is a fraction of the
    test size (0.785), so imagefolder-finetune at 64 px trains at 50 px without a warning."""
    notes = _size_notes(tmp_path, "data.image_size=64", "data.eval_image_size=64",
                        "tricks.multiscale.train_sizes=[176]")
    assert len(notes) == 1 and "176x176" in notes[0] and "64x64" in notes[0]
    assert _size_notes(tmp_path, "data.image_size=64", "data.eval_image_size=64",
                       "tricks.multiscale.train_sizes=[48]") == []  # FixRes: train below the test size
    assert _size_notes(tmp_path, "data.image_size=64", "data.eval_image_size=64") == []  # the recipe as shipped


def test_an_evaluation_size_other_than_the_training_size_is_a_one_line_warning(tmp_path):
    notes = _size_notes(tmp_path, "data.image_size=64", "tricks.multiscale.enabled=false")  # eval stays 224
    assert len(notes) == 1 and "data.eval_image_size=224" in notes[0] and "data.image_size=64" in notes[0]
