"""Regularisation penalties added to a loss: WGAN-GP gradient penalty and L1 weight penalty."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from torch import Tensor

__all__ = ["gradient_penalty", "l1_penalty"]


def gradient_penalty(
    critic: Callable[[Tensor], Tensor],
    real: Tensor,
    fake: Tensor,
    *,
    generator: torch.Generator | None = None,
) -> Tensor:
    """WGAN-GP penalty ``E[(||grad_x D(x_hat)||_2 - 1)^2]`` on random interpolates ``x_hat``.

    Source: Gulrajani et al. 2017, "Improved Training of Wasserstein GANs", Algorithm 1:
    ``x_hat = eps * real + (1 - eps) * fake`` with ``eps ~ U[0, 1]`` drawn once per
    sample and broadcast over the other dimensions.  The gradient is taken with
    ``create_graph=True``, so the penalty back-propagates into the critic's
    parameters; ``real`` and ``fake`` are detached (the penalty trains the critic only).
    The critic must treat samples independently (no batch norm, as the paper advises).
    Multiply by the paper's ``lambda`` (10) yourself.

    Args:
        critic: maps ``[N, ...]`` to ``N`` scores (``[N]`` or ``[N, 1]``).
        real: ``[N, ...]`` real samples.
        fake: generated samples, same shape as ``real``.
        generator: ``torch.Generator`` on ``real``'s device, for reproducible ``eps``.

    Returns:
        scalar tensor.

    >>> w = torch.tensor([3.0, 4.0])
    >>> gradient_penalty(lambda x: x @ w, torch.randn(5, 2), torch.randn(5, 2))  # (||w|| - 1)^2
    tensor(16.)
    """
    if not callable(critic):
        raise TypeError(f"critic must be callable (e.g. an nn.Module), got {type(critic).__name__}")
    for name, x in (("real", real), ("fake", fake)):
        if not isinstance(x, Tensor) or not x.is_floating_point():
            got = x.dtype if isinstance(x, Tensor) else type(x).__name__
            raise TypeError(f"{name} must be a floating-point tensor [N, ...], got {got}")
    if real.shape != fake.shape or real.ndim < 1 or real.shape[0] == 0:
        raise ValueError(
            f"real and fake must have the same non-empty shape [N, ...], got {list(real.shape)} and {list(fake.shape)}"
        )
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    n = real.shape[0]
    eps_shape = (n,) + (1,) * (real.ndim - 1)
    eps = torch.rand(eps_shape, generator=generator, device=real.device, dtype=real.dtype)
    x_hat = (eps * real.detach() + (1.0 - eps) * fake.detach()).requires_grad_(True)
    with torch.enable_grad():
        scores = critic(x_hat)
        if not isinstance(scores, Tensor) or scores.numel() != n:
            shape = list(scores.shape) if isinstance(scores, Tensor) else type(scores).__name__
            raise ValueError(f"critic must return one score per sample ({n} values, [N] or [N, 1]), got {shape}")
        (grad,) = torch.autograd.grad(scores.sum(), x_hat, create_graph=True, allow_unused=True)
    if grad is None:
        raise ValueError("the critic's output does not depend on its input; cannot compute a gradient penalty")
    norms = grad.reshape(n, -1).norm(2, dim=1)
    return ((norms - 1.0) ** 2).mean()


def l1_penalty(parameters: Iterable[Tensor] | Tensor) -> Tensor:
    """Sum of absolute values of all given tensors, ``sum_p ||p||_1`` (L1 / lasso penalty).

    Add ``lambda * l1_penalty(model.parameters())`` to the loss to push weights
    towards zero (Tibshirani 1996).  Uses one ``torch._foreach_norm(ord=1)`` call per
    device and dtype instead of a Python loop; differentiable.

    Args:
        parameters: an iterable of tensors (e.g. ``model.parameters()``) or one tensor.

    Returns:
        scalar tensor (``0.`` for an empty iterable); on the first tensor's device.

    >>> l1_penalty([torch.tensor([1.0, -2.0]), torch.tensor([[-3.0]])])
    tensor(6.)
    """
    if isinstance(parameters, Tensor):
        tensors = [parameters]
    else:
        try:
            tensors = list(parameters)
        except TypeError as exc:
            raise TypeError(
                f"parameters must be an iterable of tensors or a tensor, got {type(parameters).__name__}"
            ) from exc
    for i, p in enumerate(tensors):
        if not isinstance(p, Tensor):
            raise TypeError(f"parameters[{i}] must be a torch.Tensor, got {type(p).__name__}")
        if not p.is_floating_point():
            raise TypeError(f"parameters[{i}] must be a floating-point tensor, got dtype {p.dtype}")
    if not tensors:
        return torch.zeros(())
    groups: dict[tuple[torch.device, torch.dtype], list[Tensor]] = {}
    for p in tensors:
        groups.setdefault((p.device, p.dtype), []).append(p)
    out_device = tensors[0].device
    out_dtype = torch.promote_types(tensors[0].dtype, torch.get_default_dtype())
    for _, dtype in groups:
        out_dtype = torch.promote_types(out_dtype, dtype)
    total = torch.zeros((), device=out_device, dtype=out_dtype)
    for group in groups.values():
        norms = torch._foreach_norm(group, 1)
        total = total + torch.stack(norms).sum().to(device=out_device, dtype=out_dtype)
    return total
