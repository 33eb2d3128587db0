"""Bilinear pooling of a feature map into second-order features (Lin et al. 2015)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["BilinearPool"]


class BilinearPool(nn.Module):
    """Bilinear pooling: outer product of features averaged over positions, signed sqrt, L2 normalisation.

    Source: Lin, RoyChowdhury & Maji 2015, "Bilinear CNN Models for Fine-grained Visual
    Recognition", sec. 3: for a feature map ``x`` with ``C`` channels at ``P`` positions,

    ``B = (1/P) sum_p x_p x_p^T``  (``C x C``), flattened to ``C^2``;
    ``y = sign(B) * sqrt(|B| + eps)`` (signed square root, if ``signed_sqrt``);
    ``z = y / max(||y||_2, 1e-12)`` (if ``normalize``).

    ``eps`` keeps the square root's gradient finite at 0 (entries equal to 0 stay 0
    since ``sign(0) = 0``).  The product is computed in float32 at least.

    Shapes: input ``[N, C, *spatial]`` (e.g. ``[N, C, H, W]``) -> output ``[N, C * C]``.

    Args:
        signed_sqrt: apply the signed square root.
        normalize: L2-normalise each output row.
        eps: added inside the square root (``>= 0``).

    >>> pool = BilinearPool()
    >>> z = pool(torch.randn(2, 8, 5, 5))
    >>> z.shape
    torch.Size([2, 64])
    >>> torch.allclose(z.norm(dim=1), torch.ones(2))
    True
    """

    def __init__(self, *, signed_sqrt: bool = True, normalize: bool = True, eps: float = 1e-10) -> None:
        super().__init__()
        if not isinstance(signed_sqrt, bool) or not isinstance(normalize, bool):
            raise TypeError(f"signed_sqrt and normalize must be bools, got {signed_sqrt!r} and {normalize!r}")
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not math.isfinite(eps) or eps < 0:
            raise ValueError(f"eps must be a finite float >= 0, got {eps!r}")
        self.signed_sqrt = signed_sqrt
        self.normalize = normalize
        self.eps = float(eps)

    def forward(self, x: Tensor) -> Tensor:
        if not isinstance(x, Tensor):
            raise TypeError(f"x must be a tensor [N, C, *spatial], got {type(x).__name__}")
        if x.ndim < 3:
            raise ValueError(f"x must have shape [N, C, *spatial] (ndim >= 3), got shape {tuple(x.shape)}")
        n, c = x.shape[:2]
        feats = x.reshape(n, c, -1)
        if feats.shape[-1] == 0:
            raise ValueError(f"x has no spatial positions: shape {tuple(x.shape)}")
        if feats.dtype in (torch.float16, torch.bfloat16):
            feats = feats.float()
        b = torch.bmm(feats, feats.transpose(1, 2)) / feats.shape[-1]
        y = b.reshape(n, c * c)
        if self.signed_sqrt:
            y = torch.sign(y) * torch.sqrt(y.abs() + self.eps)
        if self.normalize:
            y = F.normalize(y, p=2.0, dim=1)
        return y

    def extra_repr(self) -> str:
        return f"signed_sqrt={self.signed_sqrt}, normalize={self.normalize}, eps={self.eps}"
