"""mix_per_sample (timm's elem / pair modes): every output sample is checked by reading it back — unmixed, a
convex blend with its mirror, or its mirror's box pasted — against a naive reconstruction written here."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from trickbag.data.mix_per_sample import mix_per_sample

K = 4


def _read_back(x, xm, i):
    """('none', 1.0) | ('mixup', λ) | ('cutmix', λ): what happened to sample i, recovered from the pixels."""
    j = len(x) - 1 - i
    if torch.equal(xm[i], x[i]):
        return "none", 1.0
    d = x[i] - x[j]
    lam = float(((xm[i] - x[j]) * d).sum() / (d * d).sum())
    if torch.allclose(xm[i], lam * x[i] + (1 - lam) * x[j], atol=1e-5):
        return "mixup", lam
    changed = (xm[i] != x[i]).any(0)
    rows, cols = changed.any(1).nonzero().flatten(), changed.any(0).nonzero().flatten()
    box = torch.zeros_like(changed)
    box[rows.min(): rows.max() + 1, cols.min(): cols.max() + 1] = True
    assert torch.equal(xm[i][:, box], x[j][:, box]) and torch.equal(xm[i][:, ~box], x[i][:, ~box])
    return "cutmix", 1.0 - float(box.sum()) / box.numel()


def _expected_target(y, i, lam, smoothing):
    j = len(y) - 1 - i
    t = lam * F.one_hot(y[i], K).double() + (1 - lam) * F.one_hot(y[j], K).double()
    return (1 - smoothing) * t + smoothing / K


@pytest.mark.parametrize("mode", ["elem", "pair"])
def test_each_sample_is_unmixed_blended_or_pasted_with_its_mirror_and_its_target_follows(mode):
    torch.manual_seed(0)
    x, y = torch.rand(15, 3, 12, 12), torch.randint(0, K, (15,))
    g = torch.Generator().manual_seed(3)
    xm, ym = mix_per_sample(x, y, mode=mode, prob=0.8, num_classes=K, smoothing=0.1, generator=g)
    kinds, lams = [], []
    for i in range(len(x)):
        kind, lam = _read_back(x, xm, i)
        kinds.append(kind)
        lams.append(lam)
        torch.testing.assert_close(ym[i].double(), _expected_target(y, i, lam, 0.1), atol=1e-5, rtol=0)
    assert {"mixup", "cutmix"} <= set(kinds)
    assert len({round(v, 4) for v, k in zip(lams, kinds) if k == "mixup"}) > 1  # a λ per sample, not per batch
    if mode == "pair":  # mirrored: the same method and λ for i and its mirror; the middle sample of 15 unmixed
        assert kinds[7] == "none"
        for i in range(7):
            j = 14 - i
            assert kinds[i] == kinds[j] and lams[i] == pytest.approx(lams[j], abs=1e-5)


def test_float_targets_are_mixed_as_they_are_and_bad_input_is_refused():
    x, t = torch.rand(4, 2, 8), torch.rand(4, 3)
    xm, tm = mix_per_sample(x, t, mode="elem", cutmix_alpha=0.0, num_classes=3, generator=torch.Generator())
    for i in range(4):
        kind, lam = _read_back(x.unsqueeze(2), xm.unsqueeze(2), i)
        torch.testing.assert_close(tm[i], lam * t[i] + (1 - lam) * t[3 - i], atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="mode must be one of elem, pair"):
        mix_per_sample(x, t, mode="batch", num_classes=3)
    with pytest.raises(TypeError, match="floating point"):
        mix_per_sample(x.long(), t, num_classes=3)
