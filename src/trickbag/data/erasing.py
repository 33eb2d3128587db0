"""Random erasing: fill one random rectangle per image, of random area and aspect ratio."""

from __future__ import annotations

import math
from collections.abc import Sequence
from numbers import Real
from typing import Literal

import torch
from torch import Tensor

__all__ = ["random_erasing", "erasing_boxes"]

Fill = Literal["const", "rand", "pixel"]
ATTEMPTS = 10  # tries to find a box that fits, per image (torchvision and timm)


def _pair(name: str, v: Sequence[float], high: float | None) -> tuple[float, float]:
    """``(low, high)`` with ``0 < low <= high`` (``<= high`` when given), or a ValueError naming ``name``."""
    numbers = isinstance(v, (tuple, list)) and len(v) == 2
    numbers = numbers and all(isinstance(t, Real) and not isinstance(t, bool) for t in v)
    if not numbers or not (0.0 < float(v[0]) <= float(v[1])) or (high is not None and float(v[1]) > high):
        bound = f" <= {high}" if high is not None else ""
        raise ValueError(f"random_erasing: {name} must be (low, high) with 0 < low <= high{bound}, got {v!r}")
    return float(v[0]), float(v[1])


def erasing_boxes(
    n: int, height: int, width: int, *, scale: Sequence[float] = (0.02, 0.33), ratio: Sequence[float] = (0.3, 3.3),
    generator: torch.Generator | None = None,
) -> Tensor:
    """``n`` boxes ``[n, 4]`` of ``(top, left, h, w)`` (long) as torchvision's ``RandomErasing`` chooses them.

    For each image up to 10 tries: area ``U(scale) * height * width``, aspect ratio ``h / w = exp(U(log ratio))``,
    ``h = round(sqrt(area * ratio))``, ``w = round(sqrt(area / ratio))``; the first try with ``h < height`` and
    ``w < width`` is taken, its corner uniform over the positions where the box fits. No fitting try: ``h = w = 0``
    (nothing erased). Draws from ``generator``, in this order: ``rand(n, 10)`` areas, ``rand(n, 10)`` ratios,
    ``rand(n, 2)`` corners.
    """
    s0, s1 = _pair("scale", scale, 1.0)
    r0, r1 = _pair("ratio", ratio, None)
    device = generator.device if generator is not None else torch.device("cpu")
    u_area = torch.rand(n, ATTEMPTS, generator=generator, device=device, dtype=torch.float64)
    u_ratio = torch.rand(n, ATTEMPTS, generator=generator, device=device, dtype=torch.float64)
    u_pos = torch.rand(n, 2, generator=generator, device=device, dtype=torch.float64)
    area = (s0 + (s1 - s0) * u_area) * (height * width)
    aspect = torch.exp(math.log(r0) + (math.log(r1) - math.log(r0)) * u_ratio)
    h = torch.round(torch.sqrt(area * aspect)).long()  # round half to even, as Python's round()
    w = torch.round(torch.sqrt(area / aspect)).long()
    fits = (h < height) & (w < width)
    first = torch.where(fits.any(1), fits.long().argmax(1), -1)  # the first try that fits, or -1
    pick = first.clamp(min=0)[:, None]
    h = torch.where(first >= 0, h.gather(1, pick)[:, 0], 0)
    w = torch.where(first >= 0, w.gather(1, pick)[:, 0], 0)
    top = torch.floor(u_pos[:, 0] * (height - h + 1)).long()
    left = torch.floor(u_pos[:, 1] * (width - w + 1)).long()
    return torch.stack([top, left, h, w], dim=1).cpu()


def random_erasing(
    x: Tensor,
    *,
    prob: float = 0.5,
    scale: Sequence[float] = (0.02, 0.33),
    ratio: Sequence[float] = (0.3, 3.3),
    fill: Fill = "const",
    value: float = 0.0,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Erase one random rectangle in each image with probability ``prob`` (a new tensor; ``x`` is not modified).

    Zhong et al. 2020, "Random Erasing Data Augmentation": the box is chosen as torchvision's
    ``transforms.v2.RandomErasing`` chooses it (:func:`erasing_boxes`: area fraction in ``scale``, aspect ratio
    ``h / w`` in ``ratio``, log-uniform, 10 tries), but for every image of the batch on its own, as timm's
    ``RandomErasing`` does. The box is filled with ``value`` (``"const"``; apply after normalisation so 0 is the
    mean), with one standard-normal value per channel (``"rand"``) or per pixel (``"pixel"``; torchvision's
    ``value="random"``) — timm's modes.

    Draws from ``generator``: ``rand(N)`` (image ``i`` is erased iff ``u_i < prob``), then the boxes of all
    images (:func:`erasing_boxes`), then, for ``"rand"`` / ``"pixel"``, ``randn`` of each erased box in image order.

    Args:
        x: images ``[N, C, H, W]`` (or one image ``[C, H, W]``), floating point.
        prob: probability in ``[0, 1]`` that an image is erased.
        scale: range of the erased area, as a fraction of the image, ``0 < low <= high <= 1``.
        ratio: range of the aspect ratio ``h / w``, ``0 < low <= high``.
        fill: ``"const"``, ``"rand"`` or ``"pixel"``.
        value: the fill of ``"const"``.
        generator: source of randomness.

    Returns:
        Tensor with the shape and dtype of ``x``.

    >>> g = torch.Generator().manual_seed(0)
    >>> out = random_erasing(torch.ones(4, 1, 6, 6), prob=1.0, scale=(0.1, 0.1), ratio=(1.0, 1.0), generator=g)
    >>> (out[0, 0] == 0).int()                   # one 2x2 box (area 0.1 * 36 = 3.6 -> 2 x 2)
    tensor([[0, 0, 0, 0, 0, 0],
            [1, 1, 0, 0, 0, 0],
            [1, 1, 0, 0, 0, 0],
            [0, 0, 0, 0, 0, 0],
            [0, 0, 0, 0, 0, 0],
            [0, 0, 0, 0, 0, 0]], dtype=torch.int32)
    """
    if not isinstance(x, Tensor) or not x.is_floating_point():
        raise TypeError(f"random_erasing: x must be a floating-point torch.Tensor, got {type(x).__name__}"
                        + (f" of {x.dtype}" if isinstance(x, Tensor) else ""))
    if x.dim() not in (3, 4):
        raise ValueError(f"random_erasing: x must be [N, C, H, W] or [C, H, W], got shape {tuple(x.shape)}")
    if isinstance(prob, bool) or not isinstance(prob, Real) or not 0.0 <= float(prob) <= 1.0:
        raise ValueError(f"random_erasing: prob must be a number in [0, 1], got {prob!r}")
    if fill not in ("const", "rand", "pixel"):
        raise ValueError(f"random_erasing: fill must be 'const', 'rand' or 'pixel', got {fill!r}")
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"random_erasing: value must be a number, got {value!r}")
    single = x.dim() == 3
    out = (x.unsqueeze(0) if single else x).clone()
    n, c, height, width = out.shape
    device = generator.device if generator is not None else torch.device("cpu")
    erase = (torch.rand(n, generator=generator, device=device) < prob).cpu()
    boxes = erasing_boxes(n, height, width, scale=scale, ratio=ratio, generator=generator)
    for i in erase.nonzero().flatten().tolist():
        top, left, h, w = boxes[i].tolist()
        if h == 0 or w == 0:
            continue
        region = out[i, :, top:top + h, left:left + w]
        if fill == "const":
            region.fill_(value)
            continue
        size = (c, 1, 1) if fill == "rand" else (c, h, w)
        noise = torch.randn(size, generator=generator, device=device, dtype=torch.float32)
        region.copy_(noise.to(out.device, out.dtype).expand(c, h, w))
    return out.squeeze(0) if single else out
