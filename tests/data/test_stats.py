"""mean_std against torch.cat of every pixel followed by .mean / .std(unbiased=False)."""

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, TensorDataset

from trickbag.data import mean_std


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def uneven_images(seed=0):
    g = gen(seed)
    sizes = [(2, 3), (17, 11), (5, 40), (1, 1), (9, 9)]
    offsets = torch.tensor([0.0, 3.0, -2.0]).reshape(3, 1, 1)
    # Different brightness per image, so per-image means differ and pixel counts matter.
    return [torch.rand(3, h, w, generator=g) * (i + 1) + offsets + 5 * i * (i % 2) for i, (h, w) in enumerate(sizes)]


def reference(images, channels_dim=0):
    pixels = torch.cat([x.double().movedim(channels_dim, 0).reshape(x.shape[channels_dim], -1) for x in images], 1)
    return pixels.mean(1), pixels.std(1, unbiased=False)


class PairDataset(Dataset):
    def __init__(self, images):
        self.images = images

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.images[i], i % 2


class Stream(IterableDataset):
    def __init__(self, images):
        self.images = images

    def __iter__(self):
        return iter(self.images)


def test_uneven_image_sizes_weight_every_pixel_equally():
    images = uneven_images()
    ref_mean, ref_std = reference(images)
    for data in (images, PairDataset(images), Stream(images)):
        mean, std = mean_std(data)
        assert mean.dtype == std.dtype == torch.float64 and mean.shape == (3,)
        torch.testing.assert_close(mean, ref_mean, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(std, ref_std, rtol=1e-12, atol=1e-12)
    # The naive average of per-image statistics is visibly different on this data.
    naive_mean = torch.stack([x.double().mean((1, 2)) for x in images]).mean(0)
    assert (naive_mean - ref_mean).abs().min() > 0.1


def test_dataloader_batches_with_a_short_last_batch():
    g = gen(1)
    images = torch.rand(10, 3, 4, 5, generator=g) * torch.arange(1, 11).reshape(10, 1, 1, 1)
    loader = DataLoader(TensorDataset(images, torch.zeros(10)), batch_size=4)  # batches of 4, 4, 2
    mean, std = mean_std(loader)
    ref_mean, ref_std = reference(list(images))
    torch.testing.assert_close(mean, ref_mean)
    torch.testing.assert_close(std, ref_std)
    batch_means = torch.stack([b.double().mean((0, 2, 3)) for b, _ in loader]).mean(0)
    assert (batch_means - ref_mean).abs().min() > 0.1  # averaging batch means would be biased
    # Uneven image sizes through a loader with batch_size=1.
    uneven = uneven_images(2)
    mean, std = mean_std(DataLoader(PairDataset(uneven), batch_size=1))
    torch.testing.assert_close((mean, std), reference(uneven))


def test_numpy_channels_last_and_uint8():
    g = np.random.default_rng(0)
    arrays = [g.integers(0, 256, size=(h, w, 3), dtype=np.uint8) for h, w in [(4, 6), (10, 3), (1, 7)]]
    mean, std = mean_std(arrays, channels_dim=-1)
    torch.testing.assert_close((mean, std), reference([torch.from_numpy(a) for a in arrays], channels_dim=-1))
    assert mean.min() > 0 and mean.max() < 255  # raw uint8 values, not rescaled


def test_large_offset_is_numerically_stable():
    # mean 1e4, std 1e-3: E[x^2] - E[x]^2 in float64 loses about half the digits here.
    g = gen(3)
    images = [1e4 + 1e-3 * torch.randn(2, h, 8, generator=g, dtype=torch.float64) for h in (3, 50, 7, 20)]
    mean, std = mean_std(images)
    ref_mean, ref_std = reference(images)
    torch.testing.assert_close(mean, ref_mean, rtol=1e-14, atol=0)
    torch.testing.assert_close(std, ref_std, rtol=1e-8, atol=0)


def test_single_channel_and_single_pixel():
    mean, std = mean_std([torch.tensor([[[2.0]]]), torch.tensor([[[4.0, 4.0, 4.0]]])])
    torch.testing.assert_close(mean, torch.tensor([3.5], dtype=torch.float64))
    torch.testing.assert_close(std, torch.tensor([0.75**0.5], dtype=torch.float64))


@pytest.mark.parametrize(
    "data, kwargs, exc, match",
    [
        ([], {}, ValueError, "empty"),
        ([torch.ones(3, 2, 2), torch.ones(1, 2, 2)], {}, ValueError, "channels"),
        (["img.png"], {}, TypeError, "expected a tensor"),
        ([torch.ones(3, 2, 2)], {"channels_dim": 3}, ValueError, "out of range"),
        ([torch.ones(3, 2, 2)], {"channels_dim": "0"}, TypeError, "channels_dim"),
        (42, {}, TypeError, "Dataset"),
    ],
)
def test_rejects_bad_arguments(data, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        mean_std(data, **kwargs)
