"""train_transforms / eval_transforms on PIL images and uint8 tensors made in the test, vs numpy/PIL references."""

import numpy as np
import pytest
import torch
from PIL import Image

from trickbag.data import eval_transforms, train_transforms

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def random_rgb(h, w, seed=0):
    return np.random.default_rng(seed).integers(0, 256, size=(h, w, 3), dtype=np.uint8)


def normalise(arr_hwc):
    """uint8 HWC -> float CHW, (x/255 - mean) / std, in float64 numpy."""
    x = arr_hwc.astype(np.float64) / 255.0
    x = (x - np.array(MEAN)) / np.array(STD)
    return torch.from_numpy(x.transpose(2, 0, 1).copy())


def close(out, ref, atol=1e-5):
    assert out.dtype == torch.float32 and type(out) is torch.Tensor
    torch.testing.assert_close(out.double(), ref, rtol=0, atol=atol)


@pytest.mark.parametrize(
    "h, w, rows, cols", [(64, 64, (4, 60), (4, 60)), (64, 128, (4, 60), (36, 92)), (96, 64, (20, 76), (4, 60))]
)
def test_eval_centre_crop_when_no_resize_is_needed(h, w, rows, cols):
    # size 56 / 0.875 = 64 = the short side, so Resize keeps the image and CenterCrop takes the middle.
    arr = random_rgb(h, w)
    t = eval_transforms(56, mean=MEAN, std=STD)
    ref = normalise(arr[rows[0] : rows[1], cols[0] : cols[1]])
    close(t(Image.fromarray(arr)), ref)
    close(t(torch.from_numpy(arr).permute(2, 0, 1).contiguous()), ref)


def test_eval_resize_matches_pil_bilinear():
    arr = random_rgb(128, 192, seed=1)
    out = eval_transforms(56, mean=MEAN, std=STD)(Image.fromarray(arr))
    resized = np.asarray(Image.fromarray(arr).resize((96, 64), Image.BILINEAR))  # short side 128 -> 64
    ref = normalise(resized[4:60, 20:76])
    # torchvision's antialiased bilinear resize matches PIL's to within one uint8 level
    close(out, ref, atol=1.01 / 255 / min(STD))
    assert out.shape == (3, 56, 56)


def test_train_full_crop_without_and_with_flip():
    arr = random_rgb(48, 48, seed=2)
    img = Image.fromarray(arr)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        plain = train_transforms(48, mean=MEAN, std=STD, scale=(1.0, 1.0), hflip=0.0)
        flipped = train_transforms(48, mean=MEAN, std=STD, scale=(1.0, 1.0), hflip=1.0)
        for _ in range(5):
            close(plain(img), normalise(arr))
            close(flipped(img), normalise(arr[:, ::-1]))
            close(flipped(torch.from_numpy(arr).permute(2, 0, 1)), normalise(arr[:, ::-1]))


def test_train_flip_probability_and_seeding():
    arr = random_rgb(16, 16, seed=3)
    img = Image.fromarray(arr)
    t = train_transforms(16, mean=MEAN, std=STD, scale=(1.0, 1.0), hflip=0.5)
    ref_flip = normalise(arr[:, ::-1]).float()
    with torch.random.fork_rng():
        torch.manual_seed(1)
        flips = [torch.allclose(t(img), ref_flip, atol=1e-5) for _ in range(400)]
        torch.manual_seed(7)
        a = train_transforms(24, mean=MEAN, std=STD)(img)
        torch.manual_seed(7)
        b = train_transforms(24, mean=MEAN, std=STD)(img)
    assert abs(sum(flips) / 400 - 0.5) < 5 * (0.25 / 400) ** 0.5
    assert torch.equal(a, b)


def test_train_random_crop_of_constant_image_is_constant():
    colour = (200, 17, 90)
    img = Image.new("RGB", (37, 53), colour)
    t = train_transforms(20, mean=MEAN, std=STD)
    expected = ((torch.tensor(colour, dtype=torch.float64) / 255 - torch.tensor(MEAN)) / torch.tensor(STD)).reshape(
        3, 1, 1
    )
    with torch.random.fork_rng():
        torch.manual_seed(0)
        for _ in range(10):
            out = t(img)
            assert out.shape == (3, 20, 20)
            close(out, expected.expand(3, 20, 20))


@pytest.mark.parametrize(
    "fn, kwargs, exc, match",
    [
        (train_transforms, {"size": 0}, ValueError, "size"),
        (train_transforms, {"size": 3.5}, TypeError, "size"),
        (train_transforms, {"mean": [0.5, 0.5]}, ValueError, "one value per channel"),
        (train_transforms, {"std": [0.2, 0.0, 0.2]}, ValueError, "std"),
        (train_transforms, {"mean": "0.5"}, TypeError, "mean"),
        (train_transforms, {"scale": (0.5, 0.2)}, ValueError, "scale"),
        (train_transforms, {"scale": (0.0, 1.0)}, ValueError, "scale"),
        (train_transforms, {"hflip": 1.5}, ValueError, "hflip"),
        (eval_transforms, {"crop_ratio": 0.0}, ValueError, "crop_ratio"),
        (eval_transforms, {"crop_ratio": 1.2}, ValueError, "crop_ratio"),
    ],
)
def test_rejects_bad_arguments(fn, kwargs, exc, match):
    args = {"size": 32, "mean": MEAN, "std": STD}
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        fn(**args)
