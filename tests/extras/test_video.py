"""video_info / VideoFrames on real files written here with PyAV; each frame's brightness encodes its index."""

from __future__ import annotations

import av
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from trickbag.data import tsn_indices
from trickbag.errors import DataError
from trickbag.extras.video import VideoFrames, VideoInfo, _read_frames, video_info

H, W, N, FPS = 24, 32, 16, 8
BASE, STEP = 20, 12  # frame i is uniformly grey at BASE + STEP * i


def _write(path, codec, *, n=N, fps=FPS):
    with av.open(str(path), "w") as out:
        stream = out.add_stream(codec, rate=fps)
        stream.width, stream.height = W, H
        stream.pix_fmt = "yuv444p" if codec == "ffv1" else "yuv420p"
        if codec == "mpeg4":
            stream.options = {"qscale": "2"}
        for i in range(n):
            arr = np.full((H, W, 3), BASE + STEP * i, np.uint8)
            out.mux(stream.encode(av.VideoFrame.from_ndarray(arr, format="rgb24")))
        out.mux(stream.encode())
    return path


def _frame_ids(clip: torch.Tensor) -> list[int]:
    """Recover each frame's index from its mean brightness; check it is within codec tolerance."""
    means = clip.float().mean(dim=(1, 2, 3))
    ids = torch.round((means - BASE) / STEP)
    assert torch.all((means - (BASE + STEP * ids)).abs() <= 3.0), means
    return ids.long().tolist()


@pytest.fixture(scope="module", params=[("mpeg4", "mp4"), ("ffv1", "mkv")], ids=["mp4-header", "mkv-no-count"])
def video(request, tmp_path_factory):
    codec, ext = request.param
    return _write(tmp_path_factory.mktemp("vid") / f"clip.{ext}", codec)


def test_video_info_matches_what_was_written(video):
    with av.open(str(video)) as c:  # MP4 stores the frame count, Matroska does not (counted by demuxing)
        assert c.streams.video[0].frames == (N if video.suffix == ".mp4" else 0)
    info = video_info(video)
    assert info == VideoInfo(height=H, width=W, frames=N, fps=float(FPS), duration=pytest.approx(N / FPS))


def test_video_info_str_path_and_counts_other_lengths(tmp_path):
    path = _write(tmp_path / "short.mkv", "ffv1", n=5, fps=10)
    info = video_info(str(path))
    assert (info.frames, info.fps) == (5, 10.0)
    assert info.duration == pytest.approx(0.5)


def test_errors_name_the_file(tmp_path):
    missing = tmp_path / "nope.mp4"
    with pytest.raises(DataError, match="video file not found: .*nope.mp4"):
        video_info(missing)
    text = tmp_path / "notes.txt"
    text.write_text("hello, not a video\n")
    with pytest.raises(ValueError, match="cannot read .*notes.txt.* as a video"):
        video_info(text)
    with pytest.raises(DataError, match="directory"):
        video_info(tmp_path)


def test_audio_only_file_has_no_video_stream(tmp_path):
    path = tmp_path / "tone.wav"
    with av.open(str(path), "w") as out:
        stream = out.add_stream("pcm_s16le", rate=8000)
        samples = (np.sin(np.arange(800) / 5) * 1000).astype(np.int16)[None, :]
        frame = av.AudioFrame.from_ndarray(samples, format="s16", layout="mono")
        frame.sample_rate = 8000
        out.mux(stream.encode(frame))
        out.mux(stream.encode())
    with pytest.raises(DataError, match="tone.wav.* has no video stream"):
        video_info(path)


def test_eval_picks_central_frames(video):
    ds = VideoFrames([(video, 3)], num_segments=4, train=False)
    clip, label = ds[0]
    assert clip.shape == (4, 3, H, W) and clip.dtype == torch.uint8 and label == 3
    # independent: centre of segment k of 16 frames cut in 4 is floor((k + 0.5) * 4) = 2, 6, 10, 14
    assert _frame_ids(clip) == [2, 6, 10, 14]
    assert _frame_ids(clip) == tsn_indices(N, 4, train=False).tolist()
    assert _frame_ids(ds[-1][0]) == [2, 6, 10, 14]


def test_train_draws_from_the_generator(video):
    ds = VideoFrames([(video, 0), (video, 1)], num_segments=4, train=True, generator=torch.Generator().manual_seed(5))
    ref_gen = torch.Generator().manual_seed(5)
    seen = []
    for k in [0, 1, 0]:
        clip, label = ds[k]
        ids = _frame_ids(clip)
        assert ids == tsn_indices(N, 4, train=True, generator=ref_gen).tolist()
        # one frame inside each segment [4k, 4k + 4)
        assert all(4 * s <= i < 4 * s + 4 for s, i in enumerate(ids))
        assert label == k
        seen.append(ids)
    assert len({tuple(s) for s in seen}) > 1  # random, not always the same frames


def test_more_segments_than_frames_repeats_frames(tmp_path):
    path = _write(tmp_path / "tiny.mkv", "ffv1", n=3)
    clip, _ = VideoFrames([(path, 0)], num_segments=5, train=False)[0]
    assert _frame_ids(clip) == tsn_indices(3, 5, train=False).tolist() == [0, 0, 1, 2, 2]


def test_pixels_round_trip_within_codec_tolerance(video):
    clip = _read_frames(video, [0, 7, 15])
    for frame, i in zip(clip, [0, 7, 15]):
        expected = torch.full((3, H, W), float(BASE + STEP * i))
        assert (frame.float() - expected).abs().max() <= 4.0


def test_indices_past_the_end_reuse_the_last_frame(video):
    clip = _read_frames(video, [15, 40, 3])
    assert _frame_ids(clip) == [15, 15, 3]


def test_transform_and_dataloader_batch(video):
    def to_float(clip):
        return clip.float() / 255.0

    ds = VideoFrames([(video, 0), (video, 1), (video, 2)], num_segments=2, train=False, transform=to_float)
    batch, labels = next(iter(DataLoader(ds, batch_size=3)))
    assert batch.shape == (3, 2, 3, H, W) and batch.dtype == torch.float32
    assert labels.tolist() == [0, 1, 2]
    assert batch.min() >= 0.0 and batch.max() <= 1.0
    assert ds.num_frames(0) == N


def test_dataset_validation(video, tmp_path):
    with pytest.raises(TypeError, match="items must be a sequence"):
        VideoFrames(str(video), 2, train=False)
    with pytest.raises(ValueError, match=r"items\[0\] must be a \(path, label\) pair"):
        VideoFrames([str(video)], 2, train=False)
    with pytest.raises(ValueError, match="num_segments must be an int >= 1"):
        VideoFrames([(video, 0)], 0, train=False)
    with pytest.raises(TypeError, match="train must be a bool"):
        VideoFrames([(video, 0)], 2, train="yes")
    with pytest.raises(TypeError, match="generator must be"):
        VideoFrames([(video, 0)], 2, train=True, generator=0)
    with pytest.raises(IndexError):
        VideoFrames([(video, 0)], 2, train=False)[1]
    with pytest.raises(DataError, match="gone.mp4"):
        VideoFrames([(tmp_path / "gone.mp4", 0)], 2, train=False)[0]


def test_missing_extra_names_it(monkeypatch, video):
    import sys

    from trickbag.errors import MissingExtraError

    monkeypatch.setitem(sys.modules, "av", None)  # makes `import av` fail
    with pytest.raises(MissingExtraError, match=r"trickbag\[video\]"):
        video_info(video)
