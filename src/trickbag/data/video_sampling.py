"""Frame indices for video clips: Temporal Segment Networks sampling."""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["tsn_indices"]


def _check_count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int >= 1, got {value!r} ({type(value).__name__})")
    if value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value}")
    return value


def tsn_indices(
    num_frames: int, num_segments: int, *, train: bool, generator: torch.Generator | None = None
) -> Tensor:
    """Pick one frame per equal-length segment of a video (random when training, central otherwise).

    Temporal Segment Networks (Wang et al. 2016).  The video ``[0, F)`` is cut
    into ``S`` segments ``[k·F/S, (k+1)·F/S)``; frame ``i`` belongs to the
    segment that contains its midpoint ``i + 0.5``.  Evaluation takes the frame
    at each segment's centre, ``floor((k + 0.5)·F/S)`` (the TSN test-time
    formula); training takes a uniformly random frame of each segment, so every
    frame can be drawn.  When ``F < S`` segments are shorter than a frame: the
    frame at time ``(k + u)·F/S`` is taken (``u`` random in training, 0.5 in
    evaluation), which repeats frames and keeps the output sorted with length ``S``.

    Args:
        num_frames: ``F >= 1``, number of frames in the video.
        num_segments: ``S >= 1``, number of indices to return.
        train: random frame per segment if True, central frame if False.
        generator: source of randomness in training.

    Returns:
        int64 tensor ``[S]``, non-decreasing, values in ``[0, F)``.

    >>> tsn_indices(10, 3, train=False)
    tensor([1, 5, 8])
    >>> tsn_indices(3, 5, train=False)
    tensor([0, 0, 1, 2, 2])
    >>> tsn_indices(100, 4, train=True, generator=torch.Generator().manual_seed(0)).dtype
    torch.int64
    """
    f = _check_count("num_frames", num_frames)
    s = _check_count("num_segments", num_segments)
    if not isinstance(train, bool):
        raise TypeError(f"train must be a bool, got {train!r} ({type(train).__name__})")
    k = torch.arange(s, dtype=torch.int64)
    if not train:
        # floor((k + 0.5)·F/S) in exact integer arithmetic.
        return ((2 * k + 1) * f) // (2 * s)
    device = generator.device if generator is not None else torch.device("cpu")
    u = torch.rand(s, generator=generator, dtype=torch.float64, device=device).cpu()
    if f >= s:
        # Segment k holds frames i with k·F/S <= i + 0.5 < (k+1)·F/S, i.e. [ceil(k·F/S - 0.5), ...).
        start = (2 * k * f + s - 1) // (2 * s)
        stop = (2 * (k + 1) * f + s - 1) // (2 * s)
        offset = torch.floor(u * (stop - start)).to(torch.int64)
        return start + torch.minimum(offset, stop - start - 1)
    # Fewer frames than segments: the frame under a random time point of each segment.
    idx = torch.floor((k + u) * (f / s)).to(torch.int64)
    return idx.clamp_(0, f - 1)
