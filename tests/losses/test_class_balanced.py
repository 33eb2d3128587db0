"""class_balanced_weights against Cui et al. 2019's formula evaluated in numpy."""

import numpy as np
import pytest
import torch

from trickbag.losses import class_balanced_weights


def _numpy_reference(counts, beta):
    counts = np.asarray(counts, dtype=np.float64)
    effective = (1.0 - np.power(beta, counts)) / (1.0 - beta)
    w = 1.0 / effective
    return w / w.sum() * len(counts)


@pytest.mark.parametrize("beta", [0.5, 0.9, 0.99, 0.999, 0.9999])
def test_matches_numpy_formula(beta):
    counts = [5000, 2000, 500, 100, 20, 3, 1]
    got = class_balanced_weights(counts, beta)
    assert got.dtype == torch.float32 and got.shape == (7,)
    np.testing.assert_allclose(got.numpy(), _numpy_reference(counts, beta), rtol=1e-6)
    np.testing.assert_allclose(float(got.sum()), 7.0, rtol=1e-6)


def test_beta_zero_gives_all_ones():
    torch.testing.assert_close(class_balanced_weights([1000, 3, 1], beta=0.0), torch.ones(3))


def test_beta_near_one_tends_to_inverse_frequency():
    counts = np.array([400.0, 100.0, 10.0])
    inv = (1 / counts) / (1 / counts).sum() * 3
    np.testing.assert_allclose(class_balanced_weights(counts, beta=1 - 1e-9).numpy(), inv, rtol=1e-5)


def test_rare_classes_get_larger_weights():
    w = class_balanced_weights([1000, 100, 10, 1], beta=0.999)
    assert torch.all(w[1:] > w[:-1])


def test_accepts_list_ndarray_tensor_and_dtype():
    counts = [30, 7, 2]
    ref = class_balanced_weights(counts, 0.99)
    torch.testing.assert_close(class_balanced_weights(np.array(counts), 0.99), ref)
    torch.testing.assert_close(class_balanced_weights(torch.tensor(counts), 0.99), ref)
    w64 = class_balanced_weights(torch.tensor(counts), 0.99, dtype=torch.float64)
    assert w64.dtype == torch.float64
    np.testing.assert_allclose(w64.numpy(), _numpy_reference(counts, 0.99), rtol=1e-12)


@pytest.mark.parametrize(
    "counts, beta, exc, match",
    [
        ([10, 0, 3], 0.9, ValueError, r"classes \[1\]"),
        ([10, -2], 0.9, ValueError, "> 0"),
        ([10, float("nan")], 0.9, ValueError, "finite"),
        ([], 0.9, ValueError, "non-empty"),
        ([[1, 2]], 0.9, ValueError, "1-D"),
        ([1, 2], 1.0, ValueError, "beta"),
        ([1, 2], -0.1, ValueError, "beta"),
        (["a", "b"], 0.9, TypeError, "samples_per_class"),
    ],
)
def test_validation(counts, beta, exc, match):
    with pytest.raises(exc, match=match):
        class_balanced_weights(counts, beta)
