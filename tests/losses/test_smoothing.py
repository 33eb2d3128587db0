"""smooth_targets and soft_target_cross_entropy against torch's cross_entropy and explicit formulas."""

import pytest
import torch
import torch.nn.functional as F

from trickbag.losses import SoftTargetCrossEntropy, smooth_targets, soft_target_cross_entropy


def _data(n=6, c=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, c, generator=g, dtype=torch.float64) * 3
    y = torch.randint(0, c, (n,), generator=g)
    return logits, y


def test_smooth_targets_values_follow_eps_over_c():
    eps, c = 0.2, 4
    y = torch.tensor([0, 3, 1])
    q = smooth_targets(y, c, eps)
    # element-wise reference: true class 1 - eps + eps/C, others eps/C (not eps/(C-1))
    expected = torch.full((3, c), eps / c)
    for i, label in enumerate(y.tolist()):
        expected[i, label] = 1 - eps + eps / c
    torch.testing.assert_close(q, expected)
    torch.testing.assert_close(q.sum(1), torch.ones(3))


def test_smooth_targets_exclude_true_uses_eps_over_c_minus_one():
    eps, c = 0.3, 4
    y = torch.tensor([2, 0])
    q = smooth_targets(y, c, eps, exclude_true=True)
    expected = torch.full((2, c), eps / (c - 1))
    expected[0, 2] = 1 - eps
    expected[1, 0] = 1 - eps
    torch.testing.assert_close(q, expected)
    torch.testing.assert_close(q.sum(1), torch.ones(2))
    # the two conventions must differ (catches eps/C vs eps/(C-1) confusion)
    assert not torch.allclose(q, smooth_targets(y, c, eps))


def test_smooth_targets_on_probabilities_is_affine_so_mixing_commutes():
    c, eps, lam = 5, 0.1, 0.7
    ya, yb = torch.tensor([0, 1, 4]), torch.tensor([3, 1, 2])
    mixed = lam * F.one_hot(ya, c).float() + (1 - lam) * F.one_hot(yb, c).float()
    once = smooth_targets(mixed, c, eps)
    mixed_after = lam * smooth_targets(ya, c, eps) + (1 - lam) * smooth_targets(yb, c, eps)
    torch.testing.assert_close(once, mixed_after)
    torch.testing.assert_close(once, (1 - eps) * mixed + eps / c)
    # smoothing twice is a different (wrong) target: mass on the true class shrinks twice
    twice = smooth_targets(once, c, eps)
    assert not torch.allclose(twice, once)
    # exclude_true on one-hot probabilities equals exclude_true on the labels
    torch.testing.assert_close(
        smooth_targets(F.one_hot(ya, c).float(), c, eps, exclude_true=True),
        smooth_targets(ya, c, eps, exclude_true=True),
    )


def test_smooth_targets_keeps_probability_dtype_and_zero_eps_is_identity():
    p = torch.softmax(torch.randn(3, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64), 1)
    out = smooth_targets(p, 4, 0.0)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, p)


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(target=torch.tensor([0, 1]), num_classes=3, smoothing=1.0), ValueError, "smoothing"),
        (dict(target=torch.tensor([0, 1]), num_classes=3, smoothing=-0.1), ValueError, "smoothing"),
        (dict(target=torch.tensor([0, 3]), num_classes=3), ValueError, r"\[0, 2\]"),
        (dict(target=torch.tensor([-1, 0]), num_classes=3), ValueError, "labels"),
        (dict(target=torch.zeros(2, 4), num_classes=3), ValueError, "num_classes"),
        (dict(target=torch.zeros(2, 2, dtype=torch.long), num_classes=3), ValueError, r"\[N\]"),
        (dict(target=torch.tensor([0]), num_classes=0), ValueError, "num_classes"),
        (dict(target=torch.tensor([0]), num_classes=1, exclude_true=True), ValueError, "exclude_true"),
        (dict(target=[0, 1], num_classes=3), TypeError, "torch.Tensor"),
    ],
)
def test_smooth_targets_validation(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        smooth_targets(**kwargs)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_soft_ce_equals_cross_entropy_on_one_hot(reduction):
    logits, y = _data()
    onehot = F.one_hot(y, logits.shape[1]).to(logits.dtype)
    torch.testing.assert_close(
        soft_target_cross_entropy(logits, onehot, reduction=reduction),
        F.cross_entropy(logits, y, reduction=reduction),
    )


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.4])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_soft_ce_on_smoothed_targets_equals_label_smoothing(eps, reduction):
    logits, y = _data(seed=2)
    q = smooth_targets(y, logits.shape[1], eps).to(logits.dtype)
    expected = F.cross_entropy(logits, y, label_smoothing=eps, reduction=reduction)
    torch.testing.assert_close(soft_target_cross_entropy(logits, q, reduction=reduction), expected)
    if eps > 0:
        # classic bug: smoothing in the targets *and* in the loss
        double = F.cross_entropy(logits, q, label_smoothing=eps, reduction=reduction)
        assert not torch.allclose(double, expected)
        # classic bug: eps/(C-1) instead of eps/C does not reproduce torch's label_smoothing
        q_other = smooth_targets(y, logits.shape[1], eps, exclude_true=True).to(logits.dtype)
        assert not torch.allclose(soft_target_cross_entropy(logits, q_other, reduction=reduction), expected)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_soft_ce_with_class_weight_matches_torch_probability_semantics(reduction):
    logits, y = _data(n=8, c=4, seed=3)
    w = torch.tensor([0.5, 2.0, 1.0, 3.0], dtype=torch.float64)
    q = smooth_targets(y, 4, 0.2).to(logits.dtype)
    got = soft_target_cross_entropy(logits, q, weight=w, reduction=reduction)
    torch.testing.assert_close(got, F.cross_entropy(logits, q, weight=w, reduction=reduction))
    # naive reference: per-sample explicit double sum, mean over N (not a weighted mean)
    log_p = torch.log_softmax(logits, 1)
    per = torch.tensor(
        [-sum(w[c] * q[n, c] * log_p[n, c] for c in range(4)) for n in range(8)], dtype=torch.float64
    )
    ref = {"mean": per.sum() / 8, "sum": per.sum(), "none": per}[reduction]
    torch.testing.assert_close(got, ref)
    if reduction == "mean":
        onehot = F.one_hot(y, 4).to(logits.dtype)
        # on one-hot targets the int-label weighted mean differs: torch divides by sum w[y]
        int_weighted = F.cross_entropy(logits, y, weight=w)
        prob_mean = soft_target_cross_entropy(logits, onehot, weight=w)
        torch.testing.assert_close(prob_mean * 8 / w[y].sum(), int_weighted)


def test_soft_ce_gradient_matches_softmax_minus_target():
    logits, y = _data(n=4, c=3, seed=4)
    logits.requires_grad_(True)
    q = smooth_targets(y, 3, 0.1).to(logits.dtype)
    soft_target_cross_entropy(logits, q, reduction="sum").backward()
    torch.testing.assert_close(logits.grad, torch.softmax(logits.detach(), 1) - q)


def test_soft_target_cross_entropy_module_and_buffer():
    w = torch.tensor([1.0, 2.0, 3.0])
    mod = SoftTargetCrossEntropy(weight=w, reduction="sum")
    assert "weight" in dict(mod.named_buffers())
    logits = torch.randn(5, 3, generator=torch.Generator().manual_seed(5))
    q = smooth_targets(torch.tensor([0, 1, 2, 2, 1]), 3, 0.1)
    torch.testing.assert_close(mod(logits, q), F.cross_entropy(logits, q, weight=w, reduction="sum"))


def test_soft_ce_validation():
    logits = torch.zeros(2, 3)
    with pytest.raises(TypeError, match="F.cross_entropy"):
        soft_target_cross_entropy(logits, torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="shape"):
        soft_target_cross_entropy(logits, torch.zeros(2, 4))
    with pytest.raises(ValueError, match="reduction"):
        soft_target_cross_entropy(logits, torch.zeros(2, 3), reduction="batchmean")
    with pytest.raises(ValueError, match="weight"):
        soft_target_cross_entropy(logits, torch.zeros(2, 3), weight=torch.ones(4))
    with pytest.raises(ValueError, match=r"\[N, C\]"):
        soft_target_cross_entropy(torch.zeros(3), torch.zeros(3))
    with pytest.raises(ValueError, match="reduction"):
        SoftTargetCrossEntropy(reduction="avg")
