"""Video files through PyAV (extra ``video``): header information and a frame-sampling dataset.

* :func:`video_info` -- height, width, frame count, frame rate and duration of a file.
* :class:`VideoFrames` -- a ``Dataset`` of ``(clip, label)`` where ``clip`` holds the
  frames chosen by :func:`trickbag.data.tsn_indices` (Temporal Segment Networks
  sampling: one random frame per segment in training, the central one otherwise).

Frames are decoded sequentially from the start up to the last selected frame, which
is exact for every codec (seeking by timestamp lands on key frames and is not
frame-exact); it suits the short clips action-recognition datasets are made of.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import Dataset

from trickbag._optional import require
from trickbag.errors import DataError

__all__ = ["VideoInfo", "video_info", "VideoFrames"]

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class VideoInfo:
    """Size and timing of a video's first video stream; ``fps`` in frames per second, ``duration`` in seconds."""

    height: int
    width: int
    frames: int
    fps: float
    duration: float


def _open(path: PathLike) -> Any:
    """Open ``path`` with PyAV, turning every failure into a :class:`DataError` that names the file."""
    av = require("av", extra="video")
    p = Path(path)
    if not p.is_file():
        raise DataError(f"video file not found: {str(p)!r}" + (" (it is a directory)" if p.is_dir() else ""))
    try:
        container = av.open(str(p))
    except (av.FFmpegError, OSError, ValueError) as exc:
        raise DataError(f"cannot read {str(p)!r} as a video: {exc}") from exc
    if not container.streams.video:
        container.close()
        raise DataError(f"{str(p)!r} has no video stream (streams: {[s.type for s in container.streams]})")
    return container


def _count_frames(container: Any, stream: Any) -> int:
    """Frame count from the header, or by demuxing (no decoding) when the container does not store it."""
    if stream.frames:
        return int(stream.frames)
    n = sum(1 for packet in container.demux(stream) if packet.size > 0)
    container.seek(0)
    return n


def video_info(path: PathLike) -> VideoInfo:
    """Return height, width, frame count, fps and duration of the first video stream of ``path``.

    The frame count comes from the container header when it has one (MP4, AVI) and
    otherwise from counting packets (Matroska, WebM); ``fps`` is the stream's average
    frame rate; ``duration`` is the stream's duration, else the container's, else
    ``frames / fps``.  Raises :class:`trickbag.errors.DataError` (a ``ValueError``)
    naming the file when it is missing or is not a video.

    >>> import tempfile, os, numpy as np, av
    >>> path = os.path.join(tempfile.mkdtemp(), "clip.mp4")
    >>> with av.open(path, "w") as out:
    ...     stream = out.add_stream("mpeg4", rate=4)
    ...     stream.width, stream.height, stream.pix_fmt = 32, 16, "yuv420p"
    ...     for i in range(8):
    ...         frame = av.VideoFrame.from_ndarray(np.zeros((16, 32, 3), np.uint8), format="rgb24")
    ...         out.mux(stream.encode(frame))
    ...     out.mux(stream.encode())
    >>> video_info(path)
    VideoInfo(height=16, width=32, frames=8, fps=4.0, duration=2.0)
    """
    container = _open(path)
    try:
        stream = container.streams.video[0]
        frames = _count_frames(container, stream)
        rate = stream.average_rate or stream.guessed_rate
        fps = float(rate) if rate else 0.0
        if stream.duration is not None and stream.time_base is not None:
            duration = float(stream.duration * stream.time_base)
        elif container.duration is not None:
            duration = container.duration / 1_000_000  # AV_TIME_BASE: microseconds
        else:
            duration = frames / fps if fps else 0.0
        ctx = stream.codec_context
        return VideoInfo(height=int(ctx.height), width=int(ctx.width), frames=frames, fps=fps, duration=duration)
    finally:
        container.close()


def _read_frames(path: PathLike, indices: Sequence[int]) -> Tensor:
    """Decode the frames at ``indices`` (sorted or not, repeats allowed) as uint8 ``[T, 3, H, W]`` RGB."""
    av = require("av", extra="video")
    container = _open(path)
    wanted = set(indices)
    last = max(indices)
    got: dict[int, np.ndarray] = {}
    previous: np.ndarray | None = None
    try:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        for i, frame in enumerate(container.decode(stream)):
            previous = frame.to_ndarray(format="rgb24")
            if i in wanted:
                got[i] = previous
            if i >= last:
                break
    except av.FFmpegError as exc:  # a corrupt or truncated file
        raise DataError(f"error while decoding {str(path)!r}: {exc}") from exc
    finally:
        container.close()
    if previous is None:
        raise DataError(f"{str(path)!r} has no decodable frame")
    # The header may over-count frames: indices past the real end reuse the last decoded frame.
    arrays = [got.get(i, previous) for i in indices]
    return torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2).contiguous()


class VideoFrames(Dataset):
    """Dataset of ``(clip, label)``: ``num_segments`` frames per video chosen by TSN sampling.

    Source: Temporal Segment Networks (Wang et al. 2016) through
    :func:`trickbag.data.tsn_indices`: the video is cut into ``num_segments`` equal
    segments and one frame is taken from each -- a random one when ``train=True``
    (drawn from ``generator``), the central one otherwise.

    ``items`` is a sequence of ``(path, label)``.  ``clip`` is a uint8 RGB tensor
    ``[T, C, H, W]`` with ``T = num_segments`` and ``C = 3``, passed through
    ``transform`` when given (torchvision ``transforms.v2`` accept this layout, e.g.
    ``v2.ToDtype(torch.float32, scale=True)``).  Frame counts are read once per file and
    cached.

    With ``DataLoader(num_workers > 0)`` leave ``generator=None``: every worker gets a
    copy of a Generator in the same state and would draw the same frames, while torch's
    default generator is seeded differently in each worker.

    >>> import tempfile, os, numpy as np, av
    >>> path = os.path.join(tempfile.mkdtemp(), "clip.mkv")
    >>> with av.open(path, "w") as out:
    ...     stream = out.add_stream("ffv1", rate=8)
    ...     stream.width, stream.height = 16, 16
    ...     for i in range(10):
    ...         frame = av.VideoFrame.from_ndarray(np.full((16, 16, 3), 20 * i, np.uint8), format="rgb24")
    ...         out.mux(stream.encode(frame))
    ...     out.mux(stream.encode())
    >>> clip, label = VideoFrames([(path, 7)], num_segments=3, train=False)[0]
    >>> clip.shape, clip.dtype, label
    (torch.Size([3, 3, 16, 16]), torch.uint8, 7)
    >>> (clip.float().mean(dim=(1, 2, 3)) / 20).round().tolist()  # frames 1, 5, 8
    [1.0, 5.0, 8.0]
    """

    def __init__(
        self,
        items: Sequence[tuple[PathLike, Any]],
        num_segments: int,
        *,
        train: bool,
        transform: Callable[[Tensor], Any] | None = None,
        generator: torch.Generator | None = None,
    ) -> None:
        if isinstance(items, (str, bytes, os.PathLike)) or not isinstance(items, Sequence):
            raise TypeError(f"items must be a sequence of (path, label) pairs, got {type(items).__name__}")
        pairs = []
        for k, item in enumerate(items):
            if not isinstance(item, (tuple, list)) or len(item) != 2:
                raise ValueError(f"items[{k}] must be a (path, label) pair, got {item!r}")
            if not isinstance(item[0], (str, os.PathLike)):
                raise TypeError(f"items[{k}][0] must be a path (str or os.PathLike), got {type(item[0]).__name__}")
            pairs.append((item[0], item[1]))
        if isinstance(num_segments, bool) or not isinstance(num_segments, int) or num_segments < 1:
            raise ValueError(f"num_segments must be an int >= 1, got {num_segments!r}")
        if not isinstance(train, bool):
            raise TypeError(f"train must be a bool, got {train!r}")
        if transform is not None and not callable(transform):
            raise TypeError(f"transform must be callable or None, got {type(transform).__name__}")
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
        self.items = pairs
        self.num_segments = num_segments
        self.train = train
        self.transform = transform
        self.generator = generator
        self._frames: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self.items)

    def num_frames(self, index: int) -> int:
        """Frame count of video ``index`` (read from the file once, then cached)."""
        if index not in self._frames:
            path = self.items[index][0]
            container = _open(path)
            try:
                n = _count_frames(container, container.streams.video[0])
            finally:
                container.close()
            if n < 1:
                raise DataError(f"{str(path)!r} has no frames")
            self._frames[index] = n
        return self._frames[index]

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        from trickbag.data import tsn_indices

        if not -len(self) <= index < len(self):
            raise IndexError(f"index {index} out of range for {len(self)} videos")
        index %= len(self)
        path, label = self.items[index]
        idx = tsn_indices(self.num_frames(index), self.num_segments, train=self.train, generator=self.generator)
        clip = _read_frames(path, [int(i) for i in idx])
        if self.transform is not None:
            clip = self.transform(clip)
        return clip, label
