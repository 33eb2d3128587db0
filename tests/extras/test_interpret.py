"""saliency / integrated_gradients / save_overlay against closed forms and a naive blend."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from matplotlib import colormaps
from PIL import Image
from torch import nn

from trickbag.extras.interpret import integrated_gradients, saliency, save_overlay


@pytest.fixture
def linear_image_model():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(2 * 4 * 5, 3)).eval()
    return model, model[1].weight.detach().view(3, 2, 4, 5)


def test_saliency_of_linear_model_is_abs_weight_row(linear_image_model):
    model, w = linear_image_model
    x = torch.randn(4, 2, 4, 5)
    target = torch.tensor([0, 2, 1, 2])
    sal = saliency(model, x, target)
    assert sal.shape == x.shape
    torch.testing.assert_close(sal, w[target].abs())
    signed = saliency(model, x, 1, abs=False)
    torch.testing.assert_close(signed, w[1].expand_as(x))
    assert not x.requires_grad  # the caller's tensor is untouched


def test_saliency_matches_autograd_on_nonlinear_model():
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)).eval()
    x = torch.randn(5, 6)
    ref_x = x.clone().requires_grad_(True)
    model(ref_x)[:, 2].sum().backward()  # samples are independent, so this is per-sample d f_2 / dx
    torch.testing.assert_close(saliency(model, x, 2), ref_x.grad.abs())


def test_integrated_gradients_linear_is_exact(linear_image_model):
    model, w = linear_image_model
    x = torch.randn(3, 2, 4, 5)
    baseline = torch.full((1, 2, 4, 5), 0.3)
    target = torch.tensor([1, 0, 2])
    ig = integrated_gradients(model, x, target, baseline=baseline, steps=5)
    torch.testing.assert_close(ig, (x - baseline) * w[target])
    # default baseline: zeros
    torch.testing.assert_close(integrated_gradients(model, x, 0, steps=3), x * w[0])
    # completeness: sum of attributions = f(x) - f(x')
    with torch.no_grad():
        delta = model(x)[torch.arange(3), target] - model(baseline.expand_as(x))[torch.arange(3), target]
    torch.testing.assert_close(ig.flatten(1).sum(1), delta)


def test_integrated_gradients_completeness_nonlinear_and_naive_riemann():
    torch.manual_seed(2)
    model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 2)).double().eval()
    x = torch.randn(3, 4, dtype=torch.float64)
    ig = integrated_gradients(model, x, 1, steps=64)
    with torch.no_grad():
        delta = model(x)[:, 1] - model(torch.zeros_like(x))[:, 1]
    torch.testing.assert_close(ig.sum(1), delta, atol=1e-6, rtol=1e-6)

    # naive midpoint Riemann sum written here, against captum's riemann_middle
    m = 32
    alphas = (torch.arange(m, dtype=torch.float64) + 0.5) / m
    grads = torch.zeros_like(x)
    for a in alphas:
        p = (a * x).requires_grad_(True)
        model(p)[:, 1].sum().backward()
        grads += p.grad / m
    torch.testing.assert_close(integrated_gradients(model, x, 1, steps=m, method="riemann_middle"), x * grads)


def test_attribution_validation():
    model = nn.Linear(3, 2)
    with pytest.raises(TypeError, match="floating-point"):
        saliency(model, torch.zeros(1, 3, dtype=torch.long), 0)
    with pytest.raises(ValueError, match="batch dimension"):
        saliency(model, torch.zeros(3), 0)
    with pytest.raises(ValueError, match="steps must be an int >= 1"):
        integrated_gradients(model, torch.zeros(1, 3), 0, steps=0)
    with pytest.raises(ValueError, match="cannot be broadcast"):
        integrated_gradients(model, torch.zeros(2, 3), 0, baseline=torch.zeros(4))
    with pytest.raises(TypeError, match="baseline must be"):
        integrated_gradients(model, torch.zeros(2, 3), 0, baseline="black")


def _naive_blend(image_chw: np.ndarray, attr_chw: np.ndarray, alpha: float, cmap: str, reduce: str) -> np.ndarray:
    heat = np.abs(attr_chw).max(0) if reduce == "max" else np.abs(attr_chw).sum(0)
    heat = heat / heat.max()
    rgb = np.repeat(image_chw, 3, axis=0) if image_chw.shape[0] == 1 else image_chw
    rgb = rgb.transpose(1, 2, 0)
    return (1 - alpha) * rgb + alpha * colormaps[cmap](heat)[..., :3]


@pytest.mark.parametrize("channels, reduce", [(3, "max"), (1, "sum")])
def test_save_overlay_pixels_match_naive_blend(tmp_path, channels, reduce):
    g = torch.Generator().manual_seed(3)
    image = torch.rand(channels, 6, 7, generator=g)
    attr = torch.randn(channels, 6, 7, generator=g)
    out = save_overlay(image, attr, tmp_path / "o" / "overlay.png", alpha=0.4, cmap="jet", reduce=reduce)
    got = np.asarray(Image.open(out).convert("RGB")).astype(np.float64) / 255.0
    ref = _naive_blend(image.numpy(), attr.numpy(), 0.4, "jet", reduce)
    assert got.shape == (6, 7, 3)
    np.testing.assert_allclose(got, ref, atol=0.6 / 255)


def test_save_overlay_uint8_image_and_2d_attribution(tmp_path):
    image = torch.full((3, 4, 4), 255, dtype=torch.uint8)
    attr = torch.zeros(4, 4)
    attr[0, 0] = -2.0
    out = save_overlay(image, attr, tmp_path / "a.png", alpha=1.0, cmap="gray")
    got = np.asarray(Image.open(out).convert("RGB"))
    assert got[0, 0].tolist() == [255, 255, 255]  # |attr| max -> top of the gray map
    assert got[1, 1].tolist() == [0, 0, 0]  # zero attribution -> bottom
    out = save_overlay(image, torch.zeros(4, 4), tmp_path / "b.png", alpha=0.0)
    assert (np.asarray(Image.open(out).convert("RGB")) == 255).all()  # alpha 0: the image itself


def test_save_overlay_validation(tmp_path):
    img = torch.rand(3, 4, 4)
    with pytest.raises(ValueError, match="alpha must be"):
        save_overlay(img, img, tmp_path / "x.png", alpha=2.0)
    with pytest.raises(ValueError, match="image's H, W"):
        save_overlay(img, torch.rand(3, 5, 4), tmp_path / "x.png")
    with pytest.raises(ValueError, match="image must be"):
        save_overlay(torch.rand(2, 4, 4), img, tmp_path / "x.png")
    with pytest.raises(ValueError, match="not a matplotlib colormap"):
        save_overlay(img, img, tmp_path / "x.png", cmap="nope")


def test_missing_extra_names_it(monkeypatch):
    import sys

    from trickbag.errors import MissingExtraError

    monkeypatch.setitem(sys.modules, "captum.attr", None)
    with pytest.raises(MissingExtraError, match=r"trickbag\[interpret\]"):
        saliency(nn.Linear(2, 2), torch.zeros(1, 2), 0)
