"""Gradient clipping against naive per-element / per-row reimplementations written here."""

from __future__ import annotations

import math

import pytest
import torch

from trickbag.optim import adaptive_clip_gradients, clip_gradients


def _params(scale: float = 1.0, seed: int = 0) -> list[torch.nn.Parameter]:
    g = torch.Generator().manual_seed(seed)
    shapes = [(4, 3), (4,), (2, 3, 2, 2), (), (5, 1)]
    params = [torch.nn.Parameter(torch.randn(s, generator=g)) for s in shapes]
    for p in params:
        p.grad = torch.randn(p.shape, generator=g) * scale
    params.append(torch.nn.Parameter(torch.randn(3, generator=g)))  # no grad: skipped
    return params


def _grads(params) -> list[torch.Tensor | None]:
    return [None if p.grad is None else p.grad.clone() for p in params]


@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf])
@pytest.mark.parametrize("max_norm", [0.5, 1e6])
def test_clip_by_norm_matches_formula(norm_type: float, max_norm: float) -> None:
    params = _params(scale=2.0)
    before = _grads(params)
    flat = torch.cat([g.flatten() for g in before if g is not None])
    if math.isinf(norm_type):
        total = flat.abs().max()
    else:
        total = flat.abs().pow(norm_type).sum().pow(1 / norm_type)
    coef = min(1.0, max_norm / (float(total) + 1e-6))
    # a generator, as model.parameters() is: must be read only once
    returned = clip_gradients((p for p in params), norm=max_norm, norm_type=norm_type)
    torch.testing.assert_close(returned, total)
    for p, g in zip(params, before):
        if g is None:
            assert p.grad is None
        else:
            torch.testing.assert_close(p.grad, g * coef)
    if max_norm < 1:
        after = torch.cat([p.grad.flatten() for p in params if p.grad is not None])
        assert float(torch.linalg.vector_norm(after, norm_type)) == pytest.approx(max_norm, rel=1e-4)


def test_clip_by_value_matches_clamp_and_returns_norm_before() -> None:
    params = _params(scale=3.0)
    before = _grads(params)
    total = torch.sqrt(sum((g**2).sum() for g in before if g is not None))
    returned = clip_gradients(iter(params), value=1.5)
    torch.testing.assert_close(returned, total)
    for p, g in zip(params, before):
        if g is not None:
            torch.testing.assert_close(p.grad, torch.where(g.abs() > 1.5, 1.5 * g.sign(), g))


def test_clip_gradients_argument_rules() -> None:
    params = _params()
    with pytest.raises(ValueError, match="exactly one of norm= .* or value="):
        clip_gradients(params)
    with pytest.raises(ValueError, match="exactly one"):
        clip_gradients(params, norm=1.0, value=1.0)
    with pytest.raises(ValueError, match="norm must be a finite number > 0, got -1"):
        clip_gradients(params, norm=-1.0)
    with pytest.raises(ValueError, match="norm_type"):
        clip_gradients(params, norm=1.0, norm_type=0)
    with pytest.raises(TypeError, match="iterable of tensors"):
        clip_gradients(3, norm=1.0)  # type: ignore[arg-type]
    no_grads = [torch.nn.Parameter(torch.ones(2))]
    assert float(clip_gradients(no_grads, norm=1.0)) == 0.0


def _naive_agc(params, clip_factor: float, eps: float) -> None:
    """AGC written out per parameter and per output row."""
    for p in params:
        if p.grad is None:
            continue
        w, g = p.detach(), p.grad
        if w.ndim <= 1:
            rows = [(w, g)]
        else:
            rows = [(w[i], g[i]) for i in range(w.shape[0])]
        for wr, gr in rows:
            max_norm = clip_factor * max(float(wr.norm()), eps)
            gn = float(gr.norm())
            if gn > max_norm:
                gr.mul_(max_norm / gn)


@pytest.mark.parametrize("clip_factor", [0.01, 0.3, 10.0])
def test_agc_matches_naive_per_row_loop(clip_factor: float) -> None:
    params = _params(scale=0.5)
    with torch.no_grad():
        params[0][1].zero_()  # a zero-weight row: its threshold is clip_factor * eps
        params[0].grad[2] *= 1e-4  # a row small enough to stay unclipped at clip_factor=0.3
    ref = [torch.nn.Parameter(p.detach().clone()) for p in params]
    for r, p in zip(ref, params):
        r.grad = None if p.grad is None else p.grad.clone()
    before = _grads(params)
    total = torch.sqrt(sum((g**2).sum() for g in before if g is not None))

    _naive_agc(ref, clip_factor, eps=1e-3)
    returned = adaptive_clip_gradients(params, clip_factor=clip_factor, eps=1e-3)

    torch.testing.assert_close(returned, total)
    changed = 0
    for p, r, g in zip(params, ref, before):
        if g is None:
            assert p.grad is None
            continue
        torch.testing.assert_close(p.grad, r.grad)
        changed += int(not torch.equal(p.grad, g))
    if clip_factor < 1:
        assert changed > 0  # the test exercises clipping, not only the pass-through branch


def test_agc_unit_norms_are_per_output_row() -> None:
    w = torch.nn.Parameter(torch.tensor([[3.0, 4.0], [0.3, 0.4]]))
    w.grad = torch.tensor([[0.0, 0.1], [0.0, 0.1]])
    adaptive_clip_gradients([w], clip_factor=0.1)
    # row 0: threshold 0.1 * 5 = 0.5 > 0.1 -> kept; row 1: threshold 0.05 < 0.1 -> scaled to norm 0.05.
    # A whole-tensor norm would treat both rows alike.
    torch.testing.assert_close(w.grad, torch.tensor([[0.0, 0.1], [0.0, 0.05]]))


def test_agc_argument_errors() -> None:
    with pytest.raises(ValueError, match="clip_factor"):
        adaptive_clip_gradients(_params(), clip_factor=0.0)
    with pytest.raises(ValueError, match="eps"):
        adaptive_clip_gradients(_params(), eps=0.0)
    assert float(adaptive_clip_gradients([torch.nn.Parameter(torch.ones(2))])) == 0.0
