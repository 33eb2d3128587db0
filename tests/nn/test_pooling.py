"""BilinearPool against a naive per-position loop."""

from __future__ import annotations

import math

import pytest
import torch

from trickbag.nn import BilinearPool


def naive_bilinear(x: torch.Tensor, signed_sqrt: bool, normalize: bool, eps: float) -> torch.Tensor:
    n, c = x.shape[:2]
    flat = x.reshape(n, c, -1)
    positions = flat.shape[-1]
    rows = []
    for i in range(n):
        b = [[0.0] * c for _ in range(c)]
        for p in range(positions):
            for j in range(c):
                for k in range(c):
                    b[j][k] += flat[i, j, p].item() * flat[i, k, p].item() / positions
        y = [v for row in b for v in row]
        if signed_sqrt:
            y = [math.copysign(math.sqrt(abs(v) + eps), v) if v != 0 else 0.0 for v in y]
        if normalize:
            norm = math.sqrt(sum(v * v for v in y))
            y = [v / max(norm, 1e-12) for v in y]
        rows.append(y)
    return torch.tensor(rows, dtype=torch.float64)


@pytest.mark.parametrize("signed_sqrt, normalize", [(True, True), (False, False), (True, False), (False, True)])
def test_matches_naive_loop(signed_sqrt, normalize):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 4, 5, generator=g, dtype=torch.float64)
    out = BilinearPool(signed_sqrt=signed_sqrt, normalize=normalize, eps=1e-10)(x)
    assert out.shape == (2, 9)
    torch.testing.assert_close(out, naive_bilinear(x, signed_sqrt, normalize, 1e-10))


def test_other_spatial_ranks_and_half_input():
    g = torch.Generator().manual_seed(1)
    x1d = torch.randn(3, 4, 7, generator=g, dtype=torch.float64)
    torch.testing.assert_close(BilinearPool()(x1d), naive_bilinear(x1d, True, True, 1e-10))
    half = torch.randn(2, 3, 2, 2, generator=g).half()
    out = BilinearPool()(half)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out.double(), naive_bilinear(half.double(), True, True, 1e-10), atol=1e-5, rtol=1e-4)


def test_gradient_is_finite_with_zero_features():
    x = torch.zeros(2, 3, 4, 4)
    x[0, 0] = 1.0  # one active channel; every other entry of B is exactly 0
    x.requires_grad_(True)
    BilinearPool()(x).sum().backward()
    assert torch.isfinite(x.grad).all()


def test_invalid_inputs():
    with pytest.raises(ValueError, match="ndim >= 3"):
        BilinearPool()(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="eps"):
        BilinearPool(eps=-1.0)
    with pytest.raises(TypeError, match="signed_sqrt"):
        BilinearPool(signed_sqrt="yes")  # type: ignore[arg-type]
