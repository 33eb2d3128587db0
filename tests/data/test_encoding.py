"""one_hot: against a naive loop and against F.cross_entropy(label_smoothing=)."""

import pytest
import torch
import torch.nn.functional as F

from trickbag.data import one_hot


def naive_one_hot(labels, num_classes, eps):
    flat = labels.reshape(-1).tolist()
    rows = []
    for label in flat:
        rows.append([(1 - eps) * (1.0 if c == label else 0.0) + eps / num_classes for c in range(num_classes)])
    return torch.tensor(rows, dtype=torch.float64).reshape(*labels.shape, num_classes)


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.5])
def test_matches_naive_loop_any_shape(eps):
    labels = torch.tensor([[0, 3, 1], [2, 2, 4]])
    out = one_hot(labels, 5, eps)
    assert out.shape == (2, 3, 5) and out.dtype == torch.float32
    torch.testing.assert_close(out.double(), naive_one_hot(labels, 5, eps), rtol=0, atol=1e-7)
    torch.testing.assert_close(out.sum(-1), torch.ones(2, 3))


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_same_loss_as_cross_entropy_label_smoothing(eps):
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(7, 6, generator=g, dtype=torch.float64)
    labels = torch.randint(0, 6, (7,), generator=g)
    ref = F.cross_entropy(logits, labels, label_smoothing=eps)
    got = F.cross_entropy(logits, one_hot(labels, 6, eps, dtype=torch.float64))
    torch.testing.assert_close(got, ref)


def test_dtype_and_empty():
    assert one_hot(torch.tensor([1, 0]), 2, dtype=torch.long).tolist() == [[0, 1], [1, 0]]
    assert one_hot(torch.tensor([1]), 2, 0.2, dtype=torch.float64).dtype == torch.float64
    assert one_hot(torch.tensor([1], dtype=torch.uint8), 3).tolist() == [[0.0, 1.0, 0.0]]
    assert one_hot(torch.empty(0, dtype=torch.long), 4).shape == (0, 4)


@pytest.mark.parametrize(
    "labels, num_classes, eps, kwargs, exc, match",
    [
        (torch.tensor([0, 3]), 3, 0.0, {}, ValueError, "found label 3"),
        (torch.tensor([-1, 0]), 3, 0.0, {}, ValueError, "found label -1"),
        (torch.tensor([0.0, 1.0]), 3, 0.0, {}, TypeError, "integer tensor"),
        ([0, 1], 3, 0.0, {}, TypeError, "labels must be"),
        (torch.tensor([0]), 0, 0.0, {}, ValueError, "num_classes"),
        (torch.tensor([0]), 3.0, 0.0, {}, TypeError, "num_classes"),
        (torch.tensor([0]), 3, 1.0, {}, ValueError, "smoothing"),
        (torch.tensor([0]), 3, -0.1, {}, ValueError, "smoothing"),
        (torch.tensor([0]), 3, 0.1, {"dtype": torch.long}, ValueError, "floating-point dtype"),
    ],
)
def test_rejects_bad_arguments(labels, num_classes, eps, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        one_hot(labels, num_classes, eps, **kwargs)
