"""data.train_samples / data.imbalance / data.label_noise: the harder data sets the hard recipes train on.

Each is checked against what it promises, computed here from the untouched splits: the same splits built
without the key are the reference."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest
import torch

from trickbag.config.schema import DataConfig
from trickbag.data.sources import build_data
from trickbag.errors import DataError


def _cfg(**kw):
    base = {"name": "fake", "num_samples": 2000, "num_classes": 5, "shape": [3], "augment": False}
    return DataConfig(**{**base, **kw})


def _xy(ds):
    return ds.x, ds.y


def _rows(splits, part):
    """The raw (unstandardised) samples of a split, rounded: comparable across differently fitted statistics."""
    n = splits.fitted["normalise"]
    raw = getattr(splits, part).x * torch.tensor(n["std"]) + torch.tensor(n["mean"])
    return {tuple(round(v, 3) for v in r.tolist()) for r in raw}


def test_unset_keys_leave_the_splits_bit_for_bit_as_before():
    a, b = build_data(_cfg()), build_data(_cfg(label_noise=0.0))
    for s in ("train", "val", "test"):
        assert all(torch.equal(u, v) for u, v in zip(_xy(getattr(a, s)), _xy(getattr(b, s))))
    assert "hard" not in a.fitted and not a.notes


def test_label_noise_replaces_that_share_with_another_class_and_leaves_the_test_split():
    clean, noisy = build_data(_cfg()), build_data(_cfg(label_noise=0.3))
    for split in ("train", "val"):
        (xc, yc), (xn, yn) = _xy(getattr(clean, split)), _xy(getattr(noisy, split))
        assert torch.equal(xc, xn)  # the same samples, only labels change
        changed = int((yc != yn).sum())
        assert changed == round(0.3 * len(yc)), split  # exactly round(p * n), every one to a different class
    assert torch.equal(clean.test.y, noisy.test.y) and torch.equal(clean.test.x, noisy.test.x)
    rec = noisy.fitted["hard"]
    assert rec["train_flipped"] == int((clean.train.y != noisy.train.y).sum())
    assert noisy.class_counts == torch.bincount(noisy.train.y, minlength=5).tolist()
    assert any("label noise 30%" in n for n in noisy.notes)


def test_label_noise_is_symmetric_over_the_other_classes():
    clean, noisy = build_data(_cfg(num_samples=20000)), build_data(_cfg(num_samples=20000, label_noise=0.5))
    yc, yn = clean.train.y, noisy.train.y
    moved = Counter(((int(a) - int(b)) % 5) for a, b in zip(yn[yc != yn], yc[yc != yn]))
    assert set(moved) == {1, 2, 3, 4}
    share = torch.tensor([moved[k] for k in (1, 2, 3, 4)], dtype=torch.float64) / sum(moved.values())
    assert (share - 0.25).abs().max() < 0.03  # uniform over the 4 other classes (n ~ 7000: sd ~ 0.005)


def test_label_noise_is_seeded_by_the_split_seed():
    a, b = build_data(_cfg(label_noise=0.2)), build_data(_cfg(label_noise=0.2))
    c = build_data(_cfg(label_noise=0.2, split_seed=1))
    assert torch.equal(a.train.y, b.train.y)
    clean1 = build_data(_cfg(split_seed=1))
    assert not torch.equal(c.train.y != clean1.train.y, a.train.y != build_data(_cfg()).train.y)


def test_imbalance_follows_the_exponential_profile_on_train_and_val_not_test():
    clean, lt = build_data(_cfg()), build_data(_cfg(imbalance=10.0))
    for split in ("train", "val"):
        before = torch.bincount(getattr(clean, split).y, minlength=5).tolist()
        after = torch.bincount(getattr(lt, split).y, minlength=5).tolist()
        want = [max(1, round(n * 10.0 ** (-c / 4))) for c, n in enumerate(before)]
        assert after == want, split
        assert _rows(lt, split) <= _rows(clean, split)  # a subset of the same samples
    assert torch.equal(clean.test.y, lt.test.y)
    assert lt.class_counts == torch.bincount(lt.train.y, minlength=5).tolist()


def test_train_samples_keeps_a_stratified_subset_of_the_training_split_only():
    clean, sub = build_data(_cfg()), build_data(_cfg(train_samples=200))
    assert len(sub.train) == 200
    before = torch.bincount(clean.train.y, minlength=5).double()
    after = torch.bincount(sub.train.y, minlength=5).double()
    assert ((before * 200 / before.sum()) - after).abs().max() < 1.0  # largest-remainder proportional
    assert _rows(sub, "train") <= _rows(clean, "train")
    assert torch.equal(clean.val.y, sub.val.y) and torch.equal(clean.test.y, sub.test.y)
    assert len(sub.eval_train) == 200  # the unaugmented training view is the same subset


def test_keys_combine_in_order_subset_then_tail_then_noise():
    d = build_data(_cfg(train_samples=1000, imbalance=5.0, label_noise=0.2))
    rec = d.fitted["hard"]
    assert rec["train_before"] > 1000 and rec["train_after"] == len(d.train) < 1000
    assert rec["train_flipped"] == round(0.2 * len(d.train))


@pytest.mark.parametrize(("kw", "msg"), [
    ({"train_samples": 10**6}, "more than the training split"),
    ({"train_samples": 3}, "fewer than the training split's 5 classes"),
])
def test_bad_values_are_one_clear_error(kw, msg):
    with pytest.raises(DataError, match=msg):
        build_data(_cfg(**kw))


def test_out_of_range_values_are_refused_by_the_schema():
    for kw in ({"label_noise": 1.0}, {"label_noise": -0.1}, {"imbalance": 0.5}, {"train_samples": 1}):
        with pytest.raises(ValueError):
            _cfg(**kw)


def test_an_image_folder_refuses_them_in_one_line(tmp_path):
    from PIL import Image

    for c in ("a", "b"):
        (tmp_path / c).mkdir()
        for i in range(4):
            Image.new("RGB", (12, 12), (i * 40, 0, 0)).save(tmp_path / c / f"{i}.png")
    cfg = DataConfig(name="imagefolder", root=str(tmp_path), label_noise=0.2, image_size=8, val_fraction=0.0)
    with pytest.raises(DataError, match="does not support them"):
        build_data(cfg)


def test_regression_targets_are_refused(tmp_path):
    from trickbag.config.schema import TaskConfig

    rows = "\n".join(f"{i},{i * 0.5}" for i in range(40))
    (tmp_path / "t.csv").write_text("x,label\n" + rows + "\n")
    cfg = DataConfig(name="csv", root=str(tmp_path / "t.csv"), label_noise=0.1)
    with pytest.raises(DataError, match="apply to class labels"):
        build_data(cfg, TaskConfig(type="regression"))


def test_a_run_records_and_prints_it(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "trickbag", "train", "train.epochs=1", "data.label_noise=0.3", "run.progress=false",
         "run.plots=false", "log.tensorboard=false", f"run.dir={tmp_path}", "run.name=r"],
        capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "label noise 30%" in out.stdout + out.stderr
    ck = torch.load(tmp_path / "r" / "checkpoints" / "last.pt", weights_only=False)
    text = repr(ck)
    assert "'label_noise': 0.3" in text and "train_flipped" in text
