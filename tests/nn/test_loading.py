"""load_matching on two small models that share some layers and differ in others."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from trickbag.errors import CheckpointError
from trickbag.nn import LoadReport, load_matching


class Source(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8))
        self.aux = nn.Linear(8, 8)  # not in Target
        self.head = nn.Linear(8, 10)


class Target(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8))
        self.head = nn.Linear(8, 3)  # different number of classes
        self.extra = nn.Linear(3, 3)  # not in Source


def models():
    torch.manual_seed(0)
    src = Source()
    with torch.no_grad():
        src.features[1].running_mean.uniform_()
    torch.manual_seed(1)
    return src, Target()


def expected_report(src_sd, dst_sd) -> LoadReport:
    """Naive classification by key sets and shapes."""
    common = [k for k in dst_sd if k in src_sd]
    same = [k for k in common if src_sd[k].shape == dst_sd[k].shape]
    return LoadReport(
        loaded=same,
        missing=[k for k in dst_sd if k not in src_sd],
        unexpected=[k for k in src_sd if k not in dst_sd],
        shape_mismatched=[(k, tuple(src_sd[k].shape), tuple(dst_sd[k].shape)) for k in common if k not in same],
    )


def check_loaded(src, dst, before, report):
    src_sd, dst_sd = src.state_dict(), dst.state_dict()
    for k in dst_sd:
        ref = src_sd[k] if k in report.loaded else before[k]
        torch.testing.assert_close(dst_sd[k], ref, rtol=0, atol=0, msg=k)


def test_loads_matching_and_reports_the_rest():
    src, dst = models()
    before = {k: v.clone() for k, v in dst.state_dict().items()}
    report = load_matching(dst, src.state_dict())
    assert report == expected_report(src.state_dict(), before)
    assert report.shape_mismatched == [("head.weight", (10, 8), (3, 8)), ("head.bias", (10,), (3,))]
    assert "features.1.num_batches_tracked" in report.loaded
    assert not report.ok
    check_loaded(src, dst, before, report)
    text = str(report)
    for fragment in ("loaded 7", "extra.weight", "aux.bias", "head.weight checkpoint (10, 8) vs model (3, 8)"):
        assert fragment in text


def test_strips_wrapper_prefixes_from_real_wrappers():
    src, dst = models()
    before = {k: v.clone() for k, v in dst.state_dict().items()}
    compiled_dp = nn.DataParallel(torch.compile(src))
    sd = compiled_dp.state_dict()
    assert all(k.startswith("module._orig_mod.") for k in sd)
    report = load_matching(dst, sd)
    assert report == expected_report(src.state_dict(), before)
    check_loaded(src, dst, before, report)


def test_loads_into_a_wrapped_model():
    src, dst = models()
    report = load_matching(torch.compile(dst), src.state_dict())
    assert report.loaded[0] == "features.0.weight"
    torch.testing.assert_close(dst.features[0].weight, src.features[0].weight, rtol=0, atol=0)


@pytest.mark.parametrize("nest", [None, "model", "state_dict"])
def test_path_and_nested_dicts(tmp_path, nest):
    src, dst = models()
    before = {k: v.clone() for k, v in dst.state_dict().items()}
    obj = src.state_dict() if nest is None else {nest: src.state_dict(), "epoch": 3}
    path = tmp_path / "ckpt.pt"
    torch.save(obj, path)
    report = load_matching(dst, str(path))
    assert report == expected_report(src.state_dict(), before)
    check_loaded(src, dst, before, report)
    assert load_matching(Target(), path).loaded == report.loaded  # os.PathLike too


class NotATensor:
    pass


def test_unsafe_pickle_is_refused(tmp_path):
    path = tmp_path / "evil.pt"
    torch.save({"model": NotATensor()}, path)
    with pytest.raises(CheckpointError, match="weights_only=True"):
        load_matching(Target(), path)
    with pytest.raises(FileNotFoundError, match="missing.pt"):
        load_matching(Target(), tmp_path / "missing.pt")
    with pytest.raises(TypeError, match="state_dict_or_path"):
        load_matching(Target(), 42)  # type: ignore[arg-type]


def test_strict_raises_and_loads_nothing():
    src, dst = models()
    before = {k: v.clone() for k, v in dst.state_dict().items()}
    with pytest.raises(CheckpointError, match="head.weight"):
        load_matching(dst, src.state_dict(), strict=True)
    for k, v in dst.state_dict().items():
        torch.testing.assert_close(v, before[k], rtol=0, atol=0)
    other = Target()
    report = load_matching(other, dst.state_dict(), strict=True)
    assert report.ok and report.loaded == list(dst.state_dict())
    assert str(report) == f"loaded {len(report.loaded)} tensor(s)"
