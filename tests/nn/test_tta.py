"""flip_tta against a hand-written average over the flipped views."""

from __future__ import annotations

import pytest
import torch

from trickbag.nn import flip_tta


def naive_tta(model, x, flips, average):
    views = [x] + [torch.flip(x, dims=(d,)) for d in flips]
    outs = [model(v).double() for v in views]
    if average == "logits":
        return sum(outs) / len(outs)
    return torch.log(sum(torch.softmax(o, 1) for o in outs) / len(outs))


def image_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 4 * 5, 6))


@pytest.mark.parametrize("average", ["probs", "logits"])
@pytest.mark.parametrize("hflip, vflip", [(True, True), (True, False), (False, True), (False, False)])
def test_matches_a_naive_average(average, hflip, vflip):
    model = image_model()
    x = torch.randn(7, 3, 4, 5, generator=torch.Generator().manual_seed(1))
    flips = [d for d, on in ((-1, hflip), (-2, vflip)) if on]
    got = flip_tta(model, x, hflip=hflip, vflip=vflip, average=average)
    assert got.dtype == torch.float32 and got.shape == (7, 6)
    torch.testing.assert_close(got.double(), naive_tta(model, x, flips, average), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("average", ["probs", "logits"])
def test_both_flips_match_a_naive_average_and_vflip_needs_images(average):
    model = image_model()
    x = torch.randn(7, 3, 4, 5)
    got = flip_tta(model, x, hflip=True, vflip=True, average=average)
    torch.testing.assert_close(got.double(), naive_tta(model, x, (-1, -2), average), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=r"vflip needs image batches \[N, C, H, W\]"):
        flip_tta(model, torch.randn(2, 3, 5), vflip=True)


def test_signals_flip_the_time_axis_and_probs_are_normalised():
    torch.manual_seed(2)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(2 * 9, 4))
    x = torch.randn(5, 2, 9)
    got = flip_tta(model, x)
    torch.testing.assert_close(got.double(), naive_tta(model, x, (-1,), "probs"), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got.exp().sum(1), torch.ones(5))


def test_flip_matters():
    # a model that is not flip-invariant: the average differs from the plain prediction
    model = image_model()
    x = torch.randn(3, 3, 4, 5, generator=torch.Generator().manual_seed(3))
    assert not torch.allclose(flip_tta(model, x, average="logits"), model(x))


def test_rejects_bad_arguments():
    model = image_model()
    with pytest.raises(ValueError, match=r"vflip needs image batches \[N, C, H, W\]"):
        flip_tta(model, torch.randn(2, 3, 5), vflip=True)
    with pytest.raises(ValueError, match="average must be 'probs' or 'logits'"):
        flip_tta(model, torch.randn(2, 3, 4, 5), average="mean")  # type: ignore[arg-type]
