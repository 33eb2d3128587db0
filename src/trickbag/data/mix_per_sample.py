"""Mixup / CutMix with a draw per sample (timm's ``elem`` mode) or per pair of samples (``pair``).

Sample ``i`` is mixed with its mirror ``j = N - 1 - i`` of the batch, with its own decision (``prob``), method
(``switch_prob``) and ``λ``; in ``pair`` mode the two samples of a pair share them and swap roles, so each pair
holds the same two images in the two proportions (an odd batch leaves its middle sample unmixed). CutMix's ``λ``
is recomputed from the box actually pasted. Targets: ``λ·onehot(y_i) + (1-λ)·onehot(y_j)``, label smoothing
applied once after (``(1-ε)·t + ε/C``); float targets (multi-label, regression) are mixed as they are.

>>> g = torch.Generator().manual_seed(0)
>>> x, y = torch.rand(6, 3, 8, 8), torch.tensor([0, 1, 2, 0, 1, 2])
>>> xm, ym = mix_per_sample(x, y, mode="pair", num_classes=3, generator=g)
>>> xm.shape, ym.shape, bool(torch.allclose(ym.sum(1), torch.ones(6)))
(torch.Size([6, 3, 8, 8]), torch.Size([6, 3]), True)
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from trickbag.data.mix import sample_beta

__all__ = ["mix_per_sample", "MODES"]

MODES = ("elem", "pair")


def _box(h: int, w: int, lam: float, generator: torch.Generator | None) -> tuple[int, int, int, int]:
    """A CutMix box of area about ``(1 - lam)·h·w``, centred uniformly, clipped at the border."""
    cut = math.sqrt(1.0 - lam)
    bh, bw = int(h * cut), int(w * cut)
    cy, cx = (int(torch.randint(n, (1,), generator=generator)) for n in (h, w))
    return max(cy - bh // 2, 0), min(cy + bh // 2, h), max(cx - bw // 2, 0), min(cx + bw // 2, w)


def _draws(n: int, mode: str, mixup_alpha: float, cutmix_alpha: float, prob: float, switch_prob: float,
           generator: torch.Generator | None) -> tuple[Tensor, Tensor, Tensor]:
    """(mixed?, cutmix?, λ) per sample; in pair mode drawn for the first half and mirrored."""
    m = n // 2 if mode == "pair" else n
    mixed = torch.rand(m, generator=generator, dtype=torch.float64) < prob
    both = mixup_alpha > 0 and cutmix_alpha > 0
    use_cut = (torch.rand(m, generator=generator, dtype=torch.float64) < switch_prob) if both else \
        torch.full((m,), cutmix_alpha > 0)
    one = torch.ones(m, dtype=torch.float64)
    lam_mix = sample_beta(mixup_alpha, mixup_alpha, m, generator) if mixup_alpha > 0 else one
    lam_cut = sample_beta(cutmix_alpha, cutmix_alpha, m, generator) if cutmix_alpha > 0 else one
    lam = torch.where(use_cut, lam_cut, lam_mix)
    if mode == "pair":  # the second half mirrors the first; an odd batch's middle sample stays unmixed
        mid = torch.zeros(n - 2 * m, dtype=torch.bool)
        mixed = torch.cat([mixed, mid, mixed.flip(0)])
        use_cut = torch.cat([use_cut, mid, use_cut.flip(0)])
        lam = torch.cat([lam, torch.ones(n - 2 * m, dtype=torch.float64), lam.flip(0)])
    return mixed, use_cut, lam


def mix_per_sample(x: Tensor, y: Tensor, *, mode: str = "elem", mixup_alpha: float = 0.8, cutmix_alpha: float = 1.0,
                   prob: float = 1.0, switch_prob: float = 0.5, num_classes: int, smoothing: float = 0.0,
                   generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """Mix ``x [N, C, H, W]`` (or ``[N, C, L]`` / ``[N, F]`` for mixup) sample by sample; ``(x_mixed, y_soft)``."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if not x.is_floating_point():
        raise TypeError(f"mix_per_sample: x must be floating point, got {x.dtype}")
    n = x.shape[0]
    mixed, use_cut, lam = _draws(n, mode, mixup_alpha, cutmix_alpha, prob, switch_prob, generator)
    lam = torch.where(mixed, lam, torch.ones_like(lam))
    partner = x.flip(0)
    out = x.clone()
    boxes: dict[int, tuple[int, int, int, int]] = {}
    for i in range(n):
        if not mixed[i]:
            continue
        if use_cut[i]:
            if x.dim() not in (3, 4):
                raise ValueError(f"cutmix needs [N, C, H, W] or [N, C, L], got shape {tuple(x.shape)}")
            h, w = (x.shape[2], x.shape[3]) if x.dim() == 4 else (1, x.shape[2])
            j = n - 1 - i
            if mode == "pair" and j in boxes:  # the mirror of the pair's first sample: the same box
                y0, y1, x0, x1 = boxes[j]
            else:
                y0, y1, x0, x1 = _box(h, w, float(lam[i]), generator)
            boxes[i] = (y0, y1, x0, x1)
            if x.dim() == 4:
                out[i, :, y0:y1, x0:x1] = partner[i, :, y0:y1, x0:x1]
            else:
                out[i, :, x0:x1] = partner[i, :, x0:x1]
            lam[i] = 1.0 - (y1 - y0) * (x1 - x0) / (h * w)
        else:
            out[i] = lam[i].to(x.dtype) * x[i] + (1 - lam[i]).to(x.dtype) * partner[i]
    return out, _soft_targets(y, lam, num_classes, smoothing, x.dtype)


def _soft_targets(y: Tensor, lam: Tensor, num_classes: int, smoothing: float, dtype: torch.dtype) -> Tensor:
    w = lam.to(dtype).view(-1, *([1] * (max(y.dim(), 2) - 1)))
    if y.dim() == 1 and not y.is_floating_point():  # class labels: one-hot, mixed, smoothed once
        t = torch.nn.functional.one_hot(y, num_classes).to(dtype)
        t = w * t + (1 - w) * t.flip(0)
        return (1 - smoothing) * t + smoothing / num_classes
    t = y.to(dtype)
    return w * t + (1 - w) * t.flip(0)
