"""ClassificationLoss against torch's cross_entropy and a naive focal formula written here."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from trickbag.losses import ClassificationLoss

C = 4


def data(n: int = 6, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, C, generator=g, dtype=torch.float64) * 2
    labels = torch.randint(0, C, (n,), generator=g)
    probs = torch.softmax(torch.randn(n, C, generator=g, dtype=torch.float64), dim=1)
    weight = torch.rand(C, generator=g, dtype=torch.float64) + 0.5
    return logits, labels, probs, weight


def naive_focal(logits, q, gamma, alpha, weight, int_labels=None):
    """Mean over samples of -sum_c w_c a_c (1 - p_c)^gamma q_c log p_c, one sample and class at a time;
    with int labels and weights, the mean is divided by sum_n w_{y_n} (F.cross_entropy's rule)."""
    n, c = logits.shape
    total, norm = 0.0, 0.0
    for i in range(n):
        p = [float(v) for v in torch.softmax(logits[i], 0)]
        for k in range(c):
            w = float(weight[k]) if weight is not None else 1.0
            a = float(alpha[k]) if alpha is not None else 1.0
            total += -w * a * (1 - p[k]) ** gamma * float(q[i, k]) * math.log(p[k])
        norm += float(weight[int_labels[i]]) if (weight is not None and int_labels is not None) else 1.0
    return total / norm


def smoothed(labels_or_probs, eps):
    q = F.one_hot(labels_or_probs, C).double() if not labels_or_probs.is_floating_point() else labels_or_probs
    return (1 - eps) * q + eps / C


@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@pytest.mark.parametrize("use_weight", [False, True])
@pytest.mark.parametrize("soft", [False, True])
def test_cross_entropy_branch_is_torchs(smoothing, use_weight, soft):
    logits, labels, probs, weight = data()
    target = probs if soft else labels
    w = weight if use_weight else None
    got = ClassificationLoss(C, smoothing=smoothing, weight=w)(logits, target)
    want = F.cross_entropy(logits, target, weight=w, label_smoothing=smoothing)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    # independent check of the smoothed soft-target form (plain mean over N for probabilities)
    if soft:
        q = smoothed(probs, smoothing) * (w if w is not None else 1.0)
        torch.testing.assert_close(got, -(q * F.log_softmax(logits, 1)).sum(1).mean())


@pytest.mark.parametrize("smoothing", [0.0, 0.15])
@pytest.mark.parametrize("use_weight", [False, True])
@pytest.mark.parametrize("soft", [False, True])
@pytest.mark.parametrize("gamma", [0.5, 2.0])
def test_focal_branch_matches_the_naive_formula(gamma, soft, use_weight, smoothing):
    logits, labels, probs, weight = data(seed=1)
    alpha = torch.tensor([0.1, 0.4, 0.2, 0.3], dtype=torch.float64)
    w = weight if use_weight else None
    target = probs if soft else labels
    got = ClassificationLoss(C, smoothing=smoothing, gamma=gamma, alpha=alpha, weight=w)(logits, target)
    q = smoothed(target, smoothing)
    # smoothing turns int labels into probabilities, whose weighted mean is the plain mean over N
    int_labels = labels if (not soft and smoothing == 0) else None
    want = naive_focal(logits, q, gamma, alpha, w, int_labels)
    # smooth_targets gives int labels float32 probabilities (the default dtype), hence the looser rel
    assert float(got) == pytest.approx(want, rel=1e-6 if (smoothing and not soft) else 1e-9)


def test_focal_gamma_zero_is_cross_entropy_and_fields_can_change():
    logits, labels, _, weight = data(seed=2)
    loss_fn = ClassificationLoss(C, weight=weight)
    ce = loss_fn(logits, labels)
    loss_fn.gamma = 0.0
    torch.testing.assert_close(loss_fn(logits, labels), ce)
    loss_fn.gamma = 2.0
    assert float(loss_fn(logits, labels)) < float(ce)  # focusing down-weights every sample


def test_repr_and_validation():
    assert repr(ClassificationLoss(3)) == "ClassificationLoss(cross_entropy, smoothing=0.0, alpha=None, weight=None)"
    r = repr(ClassificationLoss(2, smoothing=0.1, gamma=2.0, alpha=0.25, weight=torch.ones(2)))
    assert r == "ClassificationLoss(focal(gamma=2.0), smoothing=0.1, alpha=set, weight=set)"
    for bad in (0, True, 2.0):
        with pytest.raises(ValueError, match="num_classes must be an int >= 1"):
            ClassificationLoss(bad)  # type: ignore[arg-type]
    for bad in (1.0, -0.1, float("nan")):
        with pytest.raises(ValueError, match="smoothing must be in"):
            ClassificationLoss(3, smoothing=bad)
    with pytest.raises(TypeError, match="smoothing"):
        ClassificationLoss(3, smoothing="0.1")  # type: ignore[arg-type]
