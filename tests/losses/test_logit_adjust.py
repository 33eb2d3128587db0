"""Logit adjustment (Menon et al. 2021): the offsets against the formula, the loss against the paper's pairwise
form, the Bayes-optimal property that motivates it, and bad arguments."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from trickbag.losses import ClassificationLoss, logit_adjustment


def test_offsets_are_tau_log_prior():
    counts = [128, 40, 9, 3]
    for tau in (0.5, 1.0, 2.0):
        want = torch.tensor([tau * math.log(n / sum(counts)) for n in counts], dtype=torch.float64)
        torch.testing.assert_close(logit_adjustment(counts, tau, dtype=torch.float64), want)
    assert torch.equal(logit_adjustment(torch.tensor([5, 5]), 0.0), torch.zeros(2))
    assert logit_adjustment(np.array([1.0, 2.0])).dtype == torch.float32


def test_loss_is_the_papers_pairwise_form():
    """Menon et al. eq. 10: log(1 + sum_{y' != y} (pi_y'/pi_y)^tau * exp(f_y' - f_y)), per sample, in float64."""
    g = torch.Generator().manual_seed(0)
    counts, tau = [50, 20, 5, 1], 1.3
    logits, y = torch.randn(16, 4, generator=g, dtype=torch.float64), torch.randint(0, 4, (16,), generator=g)
    pi = torch.tensor(counts, dtype=torch.float64) / sum(counts)
    naive = []
    for f, t in zip(logits, y):
        s = sum((pi[k] / pi[t]) ** tau * torch.exp(f[k] - f[t]) for k in range(4) if k != t)
        naive.append(torch.log1p(s))
    loss_fn = ClassificationLoss(4, logit_offset=logit_adjustment(counts, tau, dtype=torch.float64))
    torch.testing.assert_close(loss_fn(logits, y), torch.stack(naive).mean())


def test_composes_with_smoothing_and_weights_on_the_shifted_logits():
    g = torch.Generator().manual_seed(1)
    logits, y = torch.randn(8, 3, generator=g), torch.randint(0, 3, (8,), generator=g)
    off, w = logit_adjustment([10, 4, 1]), torch.tensor([0.5, 1.0, 2.0])
    loss_fn = ClassificationLoss(3, smoothing=0.1, weight=w, logit_offset=off)
    torch.testing.assert_close(loss_fn(logits, y), F.cross_entropy(logits + off, y, weight=w, label_smoothing=0.1))
    loss_fn.gamma = 0.0  # focal with gamma 0 on the shifted logits is cross-entropy on them
    q = (1 - 0.1) * F.one_hot(y, 3) + 0.1 / 3
    want = -(q * w * F.log_softmax(logits + off, 1)).sum(1).mean()  # F.cross_entropy's soft-target weighting
    torch.testing.assert_close(loss_fn(logits, y), want)
    assert "logit_offset=set" in repr(loss_fn)


def test_minimiser_is_the_balanced_classifier():
    """Fitting free logits to a long-tailed label distribution: plain cross-entropy learns log(pi) (predicts the
    head class), the adjusted loss learns equal logits (up to a constant): no class favoured by its frequency."""
    counts = torch.tensor([80.0, 15.0, 5.0])
    y = torch.cat([torch.full((int(n),), k) for k, n in enumerate(counts)])
    for offsets, want in ((None, torch.log(counts / counts.sum())), (logit_adjustment(counts), torch.zeros(3))):
        f = torch.zeros(3, requires_grad=True)
        loss_fn = ClassificationLoss(3, logit_offset=offsets)
        opt = torch.optim.LBFGS([f], max_iter=200, line_search_fn="strong_wolfe")

        def closure(f=f, loss_fn=loss_fn, opt=opt):
            opt.zero_grad()
            loss = loss_fn(f.expand(len(y), 3), y)
            loss.backward()
            return loss

        opt.step(closure)
        learned = f.detach() - f.detach().mean()
        torch.testing.assert_close(learned, want - want.mean(), atol=1e-3, rtol=0)


@pytest.mark.parametrize("counts, tau, match", [
    ([3, 0, 1], 1.0, "classes \\[1\\]"),
    ([3, 1], -0.5, "tau must be"),
    ([3, 1], float("nan"), "tau must be"),
    ([[1, 2]], 1.0, "1-D"),
    ("ab", 1.0, "counts"),
])
def test_bad_arguments(counts, tau, match):
    with pytest.raises((ValueError, TypeError), match=match):
        logit_adjustment(counts, tau)


def test_offset_of_the_wrong_width_is_named():
    loss_fn = ClassificationLoss(3, logit_offset=torch.zeros(4))
    with pytest.raises(ValueError, match="one offset per class"):
        loss_fn(torch.zeros(2, 3), torch.tensor([0, 1]))
