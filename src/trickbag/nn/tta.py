"""Test-time augmentation: average a model's predictions over flipped copies of the input."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import torch

__all__ = ["flip_tta"]


def flip_tta(
    forward: Callable[[torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    *,
    hflip: bool = True,
    vflip: bool = False,
    average: Literal["probs", "logits"] = "probs",
) -> torch.Tensor:
    """Predict on ``x`` and its flips and average: log of the mean softmax (``"probs"``) or the mean logits.

    Test-time augmentation as in Krizhevsky et al. 2012 (averaging over flips and crops).
    ``hflip`` flips the last dimension (width, or time for 1-D signals), ``vflip`` the one before
    (height; needs ``[N, C, H, W]``).  With ``"probs"`` the result is ``log(mean_k softmax(f(x_k)))``:
    its argmax is the averaged prediction and ``cross_entropy`` on it is the NLL of the averaged
    probabilities.

    Args:
        forward: the model (or any ``[N, ...] -> [N, K]`` logits function).
        x: input batch ``[N, C, H, W]`` (or ``[N, C, L]`` with ``hflip`` only).

    Returns:
        ``[N, K]`` float tensor.

    >>> f = lambda t: t.flatten(1)[:, :2]          # "logits": the first two values of each sample
    >>> x = torch.tensor([[[[1.0, 0.0]]]])         # [1, 1, 1, 2]; its flip is [[0, 1]]
    >>> flip_tta(f, x, average="logits")
    tensor([[0.5000, 0.5000]])
    >>> torch.allclose(flip_tta(f, x).exp().sum(1), torch.ones(1))
    True
    """
    if average not in ("probs", "logits"):
        raise ValueError(f"average must be 'probs' or 'logits', got {average!r}")
    if vflip and x.dim() != 4:
        raise ValueError(f"vflip needs image batches [N, C, H, W], got a tensor of shape {list(x.shape)}")
    views = [x]
    if hflip:
        views.append(torch.flip(x, dims=(-1,)))
    if vflip:
        views.append(torch.flip(x, dims=(-2,)))
    outs = [forward(v).float() for v in views]
    if average == "logits":
        return torch.stack(outs).mean(0)
    logp = torch.stack([torch.log_softmax(o, dim=1) for o in outs])
    return torch.logsumexp(logp, dim=0) - torch.log(torch.tensor(float(len(outs)), device=logp.device))
