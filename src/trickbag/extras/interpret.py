"""Attribution maps through captum (extra ``interpret``) and a PNG overlay of a map on its image.

* :func:`saliency` -- the gradient of the target logit with respect to the input
  (Simonyan et al. 2014, "Deep Inside Convolutional Networks"), captum's ``Saliency``.
* :func:`integrated_gradients` -- ``(x - x') * integral_0^1 df(x' + a (x - x'))/dx da``
  (Sundararajan et al. 2017, "Axiomatic Attribution for Deep Networks"), captum's
  ``IntegratedGradients``; the attributions sum to ``f(x) - f(x')`` (completeness).
* :func:`save_overlay` -- blends a colour-mapped attribution map onto the image and
  writes a PNG at the image's own resolution.

The model is called as it is: put it in ``eval()`` mode first so dropout and batch
norm do not change the attributions.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from torch import Tensor, nn

from trickbag._optional import require

__all__ = ["saliency", "integrated_gradients", "save_overlay"]

Target = int | Tensor | list[int]


def _check(model: nn.Module, x: Tensor) -> None:
    if not callable(model):
        raise TypeError(f"model must be a callable nn.Module returning logits [N, K], got {type(model).__name__}")
    if not isinstance(x, Tensor):
        raise TypeError(f"x must be a tensor [N, ...], got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"x must be a floating-point tensor (attributions are gradients), got dtype {x.dtype}")
    if x.dim() < 2:
        raise ValueError(f"x must have a batch dimension, shape [N, ...], got shape {tuple(x.shape)}")


def saliency(model: nn.Module, x: Tensor, target: Target, *, abs: bool = True) -> Tensor:
    """Return the saliency map ``|d logit_target / d x|`` (or the signed gradient with ``abs=False``).

    Source: Simonyan et al. 2014, via ``captum.attr.Saliency``.  ``x``: ``[N, ...]``;
    ``target``: an int (same class for every sample) or ``[N]`` class indices; the model
    maps ``x`` to logits ``[N, K]``.  Returns a tensor shaped like ``x``.

    >>> model = nn.Linear(3, 2)
    >>> with torch.no_grad(): _ = model.weight.copy_(torch.tensor([[1., -2., 3.], [0., 0., 0.]]))
    >>> saliency(model, torch.zeros(1, 3), target=0)
    tensor([[1., 2., 3.]])
    """
    _check(model, x)
    captum_attr = require("captum.attr", extra="interpret")
    leaf = x.detach().requires_grad_(True)  # a fresh leaf: the caller's tensor is left as it is
    return captum_attr.Saliency(model).attribute(leaf, target=target, abs=bool(abs)).detach()


def integrated_gradients(
    model: nn.Module,
    x: Tensor,
    target: Target,
    *,
    baseline: Tensor | float | None = None,
    steps: int = 50,
    method: Literal[
        "gausslegendre", "riemann_trapezoid", "riemann_middle", "riemann_left", "riemann_right"
    ] = "gausslegendre",
    internal_batch_size: int | None = None,
) -> Tensor:
    """Return integrated-gradients attributions ``(x - x') * mean_a grad f(x' + a (x - x'))``.

    Source: Sundararajan et al. 2017, via ``captum.attr.IntegratedGradients`` with
    ``n_steps=steps`` points of the quadrature ``method``.  ``baseline`` ``x'`` is zeros
    by default, or a scalar, or a tensor broadcastable to ``x``.  ``x``: ``[N, ...]``;
    ``target``: int or ``[N]``.  Returns a tensor shaped like ``x`` whose per-sample sum
    approximates ``f(x)_target - f(x')_target`` (exact for a linear model).

    >>> model = nn.Linear(2, 1)
    >>> with torch.no_grad(): _ = model.weight.copy_(torch.tensor([[2., -1.]]))
    >>> integrated_gradients(model, torch.tensor([[3., 4.]]), target=0, steps=4)
    tensor([[ 6., -4.]])
    """
    _check(model, x)
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be an int >= 1 (number of points on the path), got {steps!r}")
    if baseline is not None and not isinstance(baseline, (Tensor, int, float)):
        raise TypeError(
            f"baseline must be None, a number or a tensor broadcastable to x, got {type(baseline).__name__}"
        )
    if isinstance(baseline, Tensor):
        try:
            baseline = baseline.to(dtype=x.dtype, device=x.device).expand_as(x)
        except RuntimeError as exc:
            raise ValueError(
                f"baseline of shape {tuple(baseline.shape)} cannot be broadcast to x of shape {tuple(x.shape)}"
            ) from exc
    captum_attr = require("captum.attr", extra="interpret")
    ig = captum_attr.IntegratedGradients(model)
    leaf = x.detach().requires_grad_(True)
    out = ig.attribute(
        leaf, baselines=baseline, target=target, n_steps=steps, method=method, internal_batch_size=internal_batch_size
    )
    return out.detach()


def _to_hwc(image: Tensor) -> np.ndarray:
    """``[C, H, W]`` / ``[H, W]`` tensor (float in [0, 1] or uint8) -> float RGB ``[H, W, 3]`` in [0, 1]."""
    img = image.detach().cpu()
    if img.dtype == torch.uint8:
        img = img.float() / 255.0
    elif not img.is_floating_point():
        raise TypeError(f"image must be uint8 or floating point in [0, 1], got dtype {img.dtype}")
    if img.dim() == 2:
        img = img.unsqueeze(0)
    if img.dim() != 3 or img.shape[0] not in (1, 3):
        raise ValueError(f"image must be [H, W], [1, H, W] or [3, H, W], got shape {tuple(image.shape)}")
    img = img.float().clamp(0.0, 1.0).expand(3, -1, -1)
    return img.permute(1, 2, 0).numpy()


def save_overlay(
    image: Tensor,
    attribution: Tensor,
    path: str | os.PathLike[str],
    *,
    alpha: float = 0.5,
    cmap: str = "inferno",
    reduce: Literal["max", "sum"] = "max",
) -> Path:
    """Write a PNG of ``(1 - alpha) * image + alpha * cmap(heat)`` at the image's resolution.

    ``heat`` is ``|attribution|`` reduced over channels (``"max"`` as in Simonyan et al.
    2014, or ``"sum"``), divided by its maximum so it spans ``[0, 1]`` (all zeros stay
    zero).  ``image``: ``[C, H, W]`` or ``[H, W]`` with ``C`` in {1, 3}, float in [0, 1] or
    uint8 (un-normalise first); ``attribution``: ``[C', H, W]`` or ``[H, W]``.  Returns the path.

    >>> import tempfile, os
    >>> img, attr = torch.rand(3, 8, 8), torch.randn(3, 8, 8)
    >>> out = save_overlay(img, attr, os.path.join(tempfile.mkdtemp(), "overlay.png"))
    >>> out.read_bytes()[:4] == b"\\x89PNG"
    True
    """
    import matplotlib
    from PIL import Image

    if not isinstance(image, Tensor) or not isinstance(attribution, Tensor):
        raise TypeError(
            f"image and attribution must be tensors, got {type(image).__name__} and {type(attribution).__name__}"
        )
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be a float in [0, 1], got {alpha!r}")
    if reduce not in ("max", "sum"):
        raise ValueError(f"reduce must be 'max' or 'sum', got {reduce!r}")
    try:
        colormap = matplotlib.colormaps[cmap]
    except KeyError as exc:
        raise ValueError(f"cmap {cmap!r} is not a matplotlib colormap (e.g. 'inferno', 'jet', 'viridis')") from exc
    rgb = _to_hwc(image)
    attr = attribution.detach().cpu().float().abs()
    if attr.dim() == 2:
        attr = attr.unsqueeze(0)
    if attr.dim() != 3 or tuple(attr.shape[1:]) != rgb.shape[:2]:
        raise ValueError(
            f"attribution must be [C, H, W] or [H, W] with the image's H, W = {rgb.shape[:2]}, "
            f"got shape {tuple(attribution.shape)}"
        )
    heat = attr.amax(dim=0) if reduce == "max" else attr.sum(dim=0)
    peak = float(heat.max())
    heat_np = (heat / peak if peak > 0 else heat).numpy()
    colored = colormap(heat_np)[..., :3]
    blend = (1.0 - alpha) * rgb + alpha * colored
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.round(blend * 255.0).astype(np.uint8)).save(out, format="PNG")
    return out
