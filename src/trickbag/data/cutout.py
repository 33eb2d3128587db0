"""Cutout: blank one square patch per image."""

from __future__ import annotations

from numbers import Real

import torch
from torch import Tensor

__all__ = ["cutout"]


def cutout(
    x: Tensor,
    size: int,
    *,
    generator: torch.Generator | None = None,
    value: float = 0.0,
    centers: Tensor | None = None,
    prob: float = 1.0,
) -> Tensor:
    """Fill one ``size × size`` square per image with ``value`` (each image with probability ``prob``).

    Returns a new tensor.
    DeVries & Taylor 2017, "Improved Regularization of Convolutional Neural
    Networks with Cutout".  The square's centre is uniform over the pixels
    (drawn from ``generator``: rows first, then columns, one per image), so the
    square may stick out of the image and is clipped at the border, as in the
    paper.  Rows ``cy - size//2 .. cy - size//2 + size - 1`` (and the same for
    columns) are filled.  Apply it after normalisation so ``value=0`` is the
    dataset mean.  ``x`` is not modified.

    With ``prob < 1`` each image is cut with probability ``prob`` and left unchanged otherwise:
    after the centres, one uniform draw per image ``u_i`` comes from ``generator``
    (``torch.rand(N)``) and image ``i`` is cut iff ``u_i < prob``.  ``prob=1`` draws nothing more.

    Args:
        x: images ``[N, C, H, W]`` or a single image ``[C, H, W]``.
        size: side of the square in pixels, ``>= 0`` (0 returns an unchanged copy).
        generator: source of randomness for the centres.
        value: fill value.
        centers: integer ``[N, 2]`` (``[2]`` for one image) of ``(row, col)``
            centres to use instead of random ones.
        prob: probability in ``[0, 1]`` that an image is cut.

    Returns:
        Tensor with the shape and dtype of ``x``.

    >>> out = cutout(torch.ones(1, 1, 4, 4), 2, centers=torch.tensor([[0, 3]]))
    >>> out[0, 0]         # centre (0, 3): rows -1..0 and columns 2..3, clipped
    tensor([[1., 1., 0., 0.],
            [1., 1., 1., 1.],
            [1., 1., 1., 1.],
            [1., 1., 1., 1.]])
    >>> g = torch.Generator().manual_seed(0)
    >>> out = cutout(torch.ones(6, 1, 4, 4), 2, generator=g, prob=0.5)
    >>> (out == 0).flatten(1).any(1).tolist()   # which images were cut
    [True, True, True, False, False, False]
    """
    if not isinstance(x, Tensor):
        raise TypeError(f"cutout: x must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() not in (3, 4):
        raise ValueError(f"cutout: x must be [N, C, H, W] or [C, H, W], got shape {tuple(x.shape)}")
    if isinstance(size, bool) or not isinstance(size, int):
        raise TypeError(f"cutout: size must be an int >= 0, got {size!r} ({type(size).__name__})")
    if size < 0:
        raise ValueError(f"cutout: size must be an int >= 0, got {size}")
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"cutout: value must be a number, got {value!r} ({type(value).__name__})")
    if isinstance(prob, bool) or not isinstance(prob, Real):
        raise TypeError(f"cutout: prob must be a number in [0, 1], got {prob!r} ({type(prob).__name__})")
    if not 0.0 <= float(prob) <= 1.0:
        raise ValueError(f"cutout: prob must be in [0, 1], got {prob!r}")
    single = x.dim() == 3
    batch = x.unsqueeze(0) if single else x
    n, _, h, w = batch.shape
    gen_device = generator.device if generator is not None else torch.device("cpu")
    if centers is None:
        cy = torch.randint(0, h, (n,), generator=generator, device=gen_device).to(x.device)
        cx = torch.randint(0, w, (n,), generator=generator, device=gen_device).to(x.device)
    else:
        if not isinstance(centers, Tensor) or centers.is_floating_point() or centers.dtype == torch.bool:
            raise TypeError(f"cutout: centers must be an integer tensor of (row, col) pairs, got {centers!r}")
        expected = (2,) if single else (n, 2)
        if tuple(centers.shape) != expected:
            raise ValueError(f"cutout: centers must have shape {list(expected)}, got {list(centers.shape)}")
        centers = centers.reshape(-1, 2).to(device=x.device, dtype=torch.long)
        cy, cx = centers[:, 0], centers[:, 1]
        if bool(((cy < 0) | (cy >= h) | (cx < 0) | (cx >= w)).any()):
            raise ValueError(
                f"cutout: centers must lie inside the image (rows [0, {h}), cols [0, {w})), got {centers.tolist()}"
            )
    y0 = cy - size // 2
    x0 = cx - size // 2
    rows = torch.arange(h, device=x.device)
    cols = torch.arange(w, device=x.device)
    in_rows = (rows >= y0[:, None]) & (rows < (y0 + size)[:, None])  # [N, H]
    in_cols = (cols >= x0[:, None]) & (cols < (x0 + size)[:, None])  # [N, W]
    mask = in_rows[:, None, :, None] & in_cols[:, None, None, :]  # [N, 1, H, W]
    if prob < 1.0:
        keep = torch.rand(n, generator=generator, device=gen_device) < prob  # after the centres
        mask = mask & keep.to(x.device).view(-1, 1, 1, 1)
    out = batch.masked_fill(mask, value)
    return out.squeeze(0) if single else out
