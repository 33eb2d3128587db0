"""sce_loss / gce_loss against the papers' formulas written as Python loops, torch's cross-entropy and L1
limits, and a mixup-style linear split of soft targets."""

import math

import pytest
import torch
import torch.nn.functional as F

from trickbag.losses import ClassificationLoss, RobustLoss, gce_loss, sce_loss


def _data(n=6, c=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, c, generator=g, dtype=torch.float64) * 2
    y = torch.randint(0, c, (n,), generator=g)
    q = torch.softmax(torch.randn(n, c, generator=g, dtype=torch.float64), 1)
    return logits, y, q


def _probs(row):
    m = max(row)
    z = sum(math.exp(v - m) for v in row)
    return [math.exp(v - m) / z for v in row]


def _naive_sce(logits, t, alpha, beta):
    """Wang et al. 2019's code on each one-hot target k (alpha * CE + beta * -sum_c p_c log(clamp(onehot_c,
    1e-4, 1))), weighted by the soft target's t_k."""
    out = []
    for row, trow in zip(logits.tolist(), t.tolist()):
        p, total = _probs(row), 0.0
        for k, tk in enumerate(trow):
            onehot = [1.0 if c == k else 0.0 for c in range(len(row))]
            rce = -sum(pc * math.log(min(max(oc, 1e-4), 1.0)) for pc, oc in zip(p, onehot))
            total += tk * (alpha * -math.log(p[k]) + beta * rce)
        out.append(total)
    return torch.tensor(out, dtype=torch.float64)


def _naive_gce(logits, t, q):
    """Zhang & Sabuncu 2018: (1 - p_y^q) / q, taken linearly over soft targets."""
    return torch.tensor([sum(tc * (1 - pc ** q) / q for pc, tc in zip(_probs(row), trow))
                         for row, trow in zip(logits.tolist(), t.tolist())], dtype=torch.float64)


@pytest.mark.parametrize("alpha,beta", [(0.1, 1.0), (1.0, 0.0), (0.5, 2.0)])
def test_sce_matches_the_papers_formula(alpha, beta):
    logits, y, q = _data()
    onehot = F.one_hot(y, 4).double()
    got = sce_loss(logits, y, alpha, beta, reduction="none")
    torch.testing.assert_close(got, _naive_sce(logits, onehot, alpha, beta))
    torch.testing.assert_close(sce_loss(logits, q, alpha, beta, reduction="none"), _naive_sce(logits, q, alpha, beta))
    if beta == 0.0:  # the CE part alone is torch's cross-entropy
        torch.testing.assert_close(sce_loss(logits, y, alpha, beta), alpha * F.cross_entropy(logits, y))


@pytest.mark.parametrize("q", [0.7, 1.0, 0.05])
def test_gce_matches_the_papers_formula(q):
    logits, y, soft = _data(seed=1)
    got = gce_loss(logits, y, q, reduction="none")
    torch.testing.assert_close(got, _naive_gce(logits, F.one_hot(y, 4).double(), q))
    torch.testing.assert_close(gce_loss(logits, soft, q, reduction="none"), _naive_gce(logits, soft, q))


def test_gce_limits_are_cross_entropy_and_mae():
    logits, y, _ = _data(seed=2)
    torch.testing.assert_close(gce_loss(logits, y, 1e-6), F.cross_entropy(logits, y), rtol=1e-4, atol=1e-5)
    p = torch.softmax(logits, 1)
    mae = (p - F.one_hot(y, 4).double()).abs().sum(1) / 2  # at q = 1: 1 - p_y, half the L1 distance
    torch.testing.assert_close(gce_loss(logits, y, 1.0, reduction="none"), mae)


def test_gradients_are_bounded_where_cross_entropy_is_not():
    """On a confidently wrong example cross-entropy pulls with |grad| -> 1 per logit; GCE's and RCE's pull
    vanishes with p_y (the property that keeps wrong labels from being learned by heart)."""
    logits = torch.tensor([[12.0, 0.0, 0.0]], dtype=torch.float64, requires_grad=True)
    y = torch.tensor([1])
    grads = {}
    for name, fn in (("ce", lambda: F.cross_entropy(logits, y)), ("gce", lambda: gce_loss(logits, y)),
                     ("rce", lambda: sce_loss(logits, y, 0.0, 1.0))):
        logits.grad = None
        fn().backward()
        grads[name] = logits.grad.abs().max().item()
    assert grads["ce"] > 0.99 and grads["gce"] < 1e-3 and grads["rce"] < 1e-3


def test_soft_targets_split_linearly_as_mixup_does():
    logits, y, _ = _data(seed=3)
    y2, lam = y.roll(1), 0.3
    t = lam * F.one_hot(y, 4).double() + (1 - lam) * F.one_hot(y2, 4).double()
    for fn in (gce_loss, sce_loss):
        torch.testing.assert_close(fn(logits, t), lam * fn(logits, y) + (1 - lam) * fn(logits, y2))


def test_class_weights_follow_cross_entropys_convention():
    logits, y, q = _data(seed=4)
    w = torch.tensor([1.0, 2.0, 0.5, 3.0], dtype=torch.float64)
    # SCE with beta 0 is alpha * weighted cross-entropy, the mean divided by sum_n w_{y_n} (int labels)
    torch.testing.assert_close(sce_loss(logits, y, 1.0, 0.0, weight=w), F.cross_entropy(logits, y, weight=w))
    per = gce_loss(logits, y, reduction="none")
    torch.testing.assert_close(gce_loss(logits, y, weight=w), (per * w[y]).sum() / w[y].sum())
    per_soft = gce_loss(logits, q, reduction="none")
    torch.testing.assert_close(gce_loss(logits, q, weight=w), (per_soft * (q @ w)).mean())
    torch.testing.assert_close(gce_loss(logits, y, reduction="sum"), per.sum())


def test_stays_finite_on_saturated_fp16_logits():
    logits = torch.tensor([[60.0, -60.0, 0.0]], dtype=torch.float16)
    for fn in (gce_loss, sce_loss):
        assert torch.isfinite(fn(logits.float(), torch.tensor([1]))).all()
        assert torch.isfinite(fn(logits.float(), torch.tensor([0]))).all()


def test_bad_arguments_are_named():
    logits, y, _ = _data()
    with pytest.raises(ValueError, match="q must lie in"):
        gce_loss(logits, y, 0.0)
    with pytest.raises(ValueError, match="q must lie in"):
        gce_loss(logits, y, 1.5)
    with pytest.raises(ValueError, match="alpha must be"):
        sce_loss(logits, y, -1.0)
    with pytest.raises(ValueError, match="kind must be"):
        RobustLoss("mae")
    with pytest.raises(ValueError, match="weight must have shape"):
        sce_loss(logits, y, weight=torch.ones(3))


def test_classification_loss_composes_smoothing_and_weights():
    logits, y, _ = _data(seed=5)
    w = torch.tensor([1.0, 2.0, 0.5, 3.0], dtype=torch.float64)
    loss = ClassificationLoss(4, smoothing=0.1, weight=w, robust=RobustLoss("sce"))
    t = 0.9 * F.one_hot(y, 4).double() + 0.1 / 4
    torch.testing.assert_close(loss(logits, y), (_naive_sce(logits, t, 0.1, 1.0) * (t @ w)).mean())
    loss.gamma = 2.0
    with pytest.raises(ValueError, match="set one of them"):
        loss(logits, y)
