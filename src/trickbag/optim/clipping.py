"""Gradient clipping: by global norm, by value, and adaptive unit-wise clipping (AGC)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, cast

import torch

__all__ = ["adaptive_clip_gradients", "clip_gradients"]

# Floor for a unit's gradient norm when dividing by it (the value used by the AGC reference code).
_GRAD_NORM_FLOOR = 1e-6


def _params_with_grads(parameters: torch.Tensor | Iterable[torch.Tensor], fn: str) -> list[torch.Tensor]:
    if isinstance(parameters, torch.Tensor):
        parameters = [parameters]
    try:
        params = list(parameters)  # read a generator (model.parameters()) exactly once
    except TypeError:
        raise TypeError(
            f"{fn}: parameters must be a tensor or an iterable of tensors, got {type(parameters).__name__}"
        ) from None
    for p in params:
        if not isinstance(p, torch.Tensor):
            raise TypeError(f"{fn}: parameters must contain tensors, got an element of type {type(p).__name__}")
    return [p for p in params if p.grad is not None]


def _positive(value: Any, name: str, fn: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{fn}: {name} must be a finite number > 0, got {value!r}")
    return float(value)


def clip_gradients(
    parameters: torch.Tensor | Iterable[torch.Tensor],
    *,
    norm: float | None = None,
    value: float | None = None,
    norm_type: float = 2.0,
    foreach: bool | None = None,
) -> torch.Tensor:
    r"""Clip gradients in place by their global norm (``norm=``) or element-wise (``value=``); return the norm before.

    Exactly one of ``norm`` and ``value`` must be given.

    * ``norm=c``: :math:`g \leftarrow g \cdot \min(1, c / (\lVert g \rVert + 10^{-6}))` with the
      ``norm_type`` norm taken over all gradients together (``torch.nn.utils.clip_grad_norm_``;
      Pascanu et al. 2013).
    * ``value=c``: :math:`g \leftarrow \operatorname{clamp}(g, -c, c)` (``clip_grad_value_``).

    Parameters whose ``.grad`` is ``None`` are skipped; any shapes are accepted.  ``foreach=None``
    uses the fused multi-tensor kernels on CPU/CUDA and falls back elsewhere (value mode on the CPU:
    each gradient's norm and clamp back to back, while the tensor is still in cache).
    Returns the total ``norm_type`` norm of the gradients *before* clipping, a 0-d tensor (0 if no
    gradient), for logging in both modes.  With mixed precision, call ``scaler.unscale_(optimizer)`` first.

    >>> w = torch.nn.Parameter(torch.zeros(2))
    >>> w.grad = torch.tensor([3.0, 4.0])
    >>> clip_gradients([w], norm=1.0)
    tensor(5.)
    >>> w.grad
    tensor([0.6000, 0.8000])
    >>> w.grad = torch.tensor([3.0, -0.5])
    >>> clip_gradients([w], value=1.0), w.grad
    (tensor(3.0414), tensor([ 1.0000, -0.5000]))
    """
    fn = "clip_gradients"
    if (norm is None) == (value is None):
        raise ValueError(
            f"{fn}: pass exactly one of norm= (clip the global gradient norm) or value= (clamp each element); "
            f"got norm={norm!r}, value={value!r}"
        )
    if isinstance(norm_type, bool) or not isinstance(norm_type, (int, float)) or not norm_type > 0:
        raise ValueError(f"{fn}: norm_type must be a number > 0 or float('inf'), got {norm_type!r}")
    params = _params_with_grads(parameters, fn)
    if not params:
        return torch.tensor(0.0)
    if norm is not None:
        max_norm = _positive(norm, "norm", fn)
        return torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type=float(norm_type), foreach=foreach)
    clip_value = _positive(value, "value", fn)
    grads = [cast(torch.Tensor, p.grad) for p in params]  # params hold gradients (_params_with_grads)
    if foreach is None and all(g.device.type == "cpu" and g.layout == torch.strided for g in grads):
        # CPU: norm and clamp each tensor while it is still in cache (torch's multi-tensor path reads
        # every gradient three times: norm, clamp_min_, clamp_max_)
        norms = []
        for g in grads:
            norms.append(torch.linalg.vector_norm(g, float(norm_type)))
            g.clamp_(-clip_value, clip_value)
        return torch.linalg.vector_norm(torch.stack(norms), float(norm_type))
    total = torch.nn.utils.get_total_norm(grads, norm_type=float(norm_type), foreach=foreach)
    torch.nn.utils.clip_grad_value_(params, clip_value, foreach=foreach)
    return total


def _unit_norms(t: torch.Tensor) -> torch.Tensor:
    """L2 norm per output unit: over all dims but 0 for >= 2-D tensors (keepdim), the whole tensor otherwise."""
    if t.ndim <= 1:
        return torch.linalg.vector_norm(t)
    return torch.linalg.vector_norm(t, dim=tuple(range(1, t.ndim)), keepdim=True)


@torch.no_grad()
def adaptive_clip_gradients(
    parameters: torch.Tensor | Iterable[torch.Tensor],
    clip_factor: float = 0.01,
    eps: float = 1e-3,
) -> torch.Tensor:
    r"""Adaptive gradient clipping (AGC): clip each unit's gradient relative to its weight norm, in place.

    Brock et al. 2021, "High-Performance Large-Scale Image Recognition Without Normalization"
    (https://arxiv.org/abs/2102.06171).  For every unit :math:`i` (a row ``W[i]`` of a weight
    with ``ndim >= 2``, i.e. the norm runs over all dims but 0; the whole tensor for 0-/1-D
    parameters such as biases and gains):

    .. math::
        g_i \leftarrow \begin{cases}
            \lambda \, \frac{\max(\lVert W_i \rVert, \epsilon)}{\lVert g_i \rVert} \, g_i
                & \text{if } \lVert g_i \rVert > \lambda \max(\lVert W_i \rVert, \epsilon) \\
            g_i & \text{otherwise}
        \end{cases}

    with :math:`\lambda` = ``clip_factor`` and :math:`\epsilon` = ``eps`` (so zero-initialised
    units can still move).  The paper leaves the final classifier layer unclipped: pass the other
    parameters only.  Parameters whose ``.grad`` is ``None`` are skipped.  Whole-tensor norms and
    the final rescaling use multi-tensor (``torch._foreach_*``) kernels.  Returns the global L2
    norm of the gradients before clipping (0-d tensor), for logging.

    >>> layer = torch.nn.Linear(2, 2, bias=False)
    >>> with torch.no_grad():
    ...     _ = layer.weight.copy_(torch.tensor([[3.0, 4.0], [0.0, 1.0]]))
    >>> layer.weight.grad = torch.tensor([[0.0, 1.0], [0.0, 0.001]])
    >>> adaptive_clip_gradients(layer.parameters(), clip_factor=0.01)
    tensor(1.0000)
    >>> layer.weight.grad   # row 0 clipped to norm 0.01 * 5; row 1 (norm 0.001 < 0.01) kept
    tensor([[0.0000, 0.0500],
            [0.0000, 0.0010]])
    """
    fn = "adaptive_clip_gradients"
    lam = _positive(clip_factor, "clip_factor", fn)
    eps = _positive(eps, "eps (floor of the weight norm; 0 would freeze zero-initialised units)", fn)
    params = _params_with_grads(parameters, fn)
    if not params:
        return torch.tensor(0.0)
    grads = [cast(torch.Tensor, p.grad) for p in params]  # params hold gradients (_params_with_grads)
    for g in grads:
        if g.is_sparse:
            raise RuntimeError(f"{fn}: sparse gradients are not supported")

    # Per-unit norms: one multi-tensor call for 0-/1-D tensors, one reduction each for the others.
    w_norms: list[torch.Tensor] = [torch.empty(0)] * len(params)
    g_norms: list[torch.Tensor] = [torch.empty(0)] * len(params)
    flat = [i for i, p in enumerate(params) if p.ndim <= 1]
    if flat:
        for i, wn, gn in zip(
            flat,
            torch._foreach_norm([params[i] for i in flat]),
            torch._foreach_norm([grads[i] for i in flat]),
        ):
            w_norms[i], g_norms[i] = wn, gn
    for i, p in enumerate(params):
        if p.ndim > 1:
            w_norms[i], g_norms[i] = _unit_norms(p), _unit_norms(grads[i])

    max_norms = torch._foreach_mul(torch._foreach_clamp_min(w_norms, eps), lam)
    scales = [
        torch.where(gn > mn, mn / gn.clamp_min(_GRAD_NORM_FLOOR), torch.ones_like(gn))
        for gn, mn in zip(g_norms, max_norms)
    ]
    first = grads[0].device
    total = torch.stack([gn.float().square().sum().to(first) for gn in g_norms]).sum().sqrt()
    torch._foreach_mul_(grads, scales)
    return total.to(grads[0].dtype)
