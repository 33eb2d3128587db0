"""Recipe tricks on gradients and the optimizer: gradient-norm logging, clipping (norm / value / AGC), SAM / ASAM.

Thin adapters over :mod:`trickbag.optim`.  All three act at AFTER_BACKWARD, once per update, on
unscaled gradients; with SAM they act again after its second pass (``state.closure_pass``), on
the gradients the update actually uses.  Order: the norm is logged before clipping.

>>> from trickbag.config import load_recipe
>>> from trickbag.train.tricks import build_tricks
>>> recipe = load_recipe("digits", ["tricks.sam.enabled=true", "tricks.clip.enabled=true", "tricks.grad_norm.enabled=true"])
>>> [type(p).__name__ for p in build_tricks(recipe)]
['GradNormPlugin', 'ClipPlugin', 'SAMPlugin']
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from trickbag.config import Recipe
from trickbag.errors import ConflictError
from trickbag.optim import SAM, adaptive_clip_gradients, clip_gradients, disable_running_stats, enable_running_stats
from trickbag.train.plugin import Plugin
from trickbag.train.state import State
from trickbag.train.tricks import INTERACTION_CHECKS, register_trick

__all__ = ["GradNormPlugin", "ClipPlugin", "SAMPlugin"]


def _params(state: State) -> list[torch.Tensor]:
    return [p for g in state.optimizer.param_groups for p in g["params"]]


class GradNormPlugin(Plugin):
    """Log the global L2 gradient norm before clipping: ``state.grad_norm`` per update (``train/grad_norm``
    in the step rows of metrics.csv) and its epoch mean / max (``train/grad_norm``, ``train/grad_norm_max``).

    Updates skipped for non-finite gradients are left out of the epoch values.
    """

    name = "grad_norm"

    def __init__(self) -> None:
        self._sum: Optional[torch.Tensor] = None
        self._max: Optional[torch.Tensor] = None
        self._n = 0

    def on_epoch_start(self, state: State) -> None:
        self._sum, self._max, self._n = None, None, 0

    def on_after_backward(self, state: State) -> None:
        grads = [p.grad for p in _params(state) if p.grad is not None]
        state.grad_norm = torch.nn.utils.get_total_norm(grads) if grads else torch.zeros((), device=state.device)

    def on_step(self, state: State) -> None:
        if state.step_skipped or state.grad_norm is None:
            return
        norm = state.grad_norm.detach().double()
        self._sum = norm if self._sum is None else self._sum + norm
        self._max = norm if self._max is None else torch.maximum(self._max, norm)
        self._n += 1
        # tensors: the trainer turns them into floats once, at the end of the epoch (no sync per update)
        state.extra.setdefault("epoch_metrics", {}).update(
            {"train/grad_norm": self._sum / self._n, "train/grad_norm_max": self._max}
        )


class ClipPlugin(Plugin):
    """Clip gradients once per update at AFTER_BACKWARD (:func:`~trickbag.optim.clip_gradients` /
    :func:`~trickbag.optim.adaptive_clip_gradients`); norm and value modes record the norm before clipping.
    """

    def __init__(self, mode: str, max_norm: float, value: float, clip_factor: float, eps: float,
                 exclude_head: bool) -> None:
        self.mode, self.max_norm, self.value = mode, max_norm, value
        self.clip_factor, self.eps, self.exclude_head = clip_factor, eps, exclude_head
        self.head: set[int] = set()

    def configure(self, ctx: Any) -> None:
        if self.mode != "agc" or not self.exclude_head:
            return
        k = int(ctx.recipe.model.num_classes or ctx.data.num_classes)
        heads = [m for m in ctx.model.modules() if isinstance(m, torch.nn.Linear) and m.out_features == k]
        if heads:
            self.head = {id(p) for p in heads[-1].parameters()}
            ctx.notes.append("AGC: the classifier layer (last Linear) is not clipped")
        else:
            ctx.notes.append(f"AGC: no Linear layer with {k} outputs found; every parameter is clipped")

    def on_after_backward(self, state: State) -> None:
        params = _params(state)
        if self.mode == "norm":
            state.grad_norm = clip_gradients(params, norm=self.max_norm)
        elif self.mode == "value":
            state.grad_norm = clip_gradients(params, value=self.value)
        else:
            adaptive_clip_gradients([p for p in params if id(p) not in self.head], self.clip_factor, self.eps)


class SAMPlugin(Plugin):
    """Wrap the recipe's optimizer in :class:`~trickbag.optim.SAM` (ASAM with ``adaptive``).

    The trainer steps it as ``optimizer.step(closure)``; the closure re-runs forward and backward
    over every micro-batch of the update.  BatchNorm running statistics are frozen
    (:func:`~trickbag.optim.disable_running_stats`) from the end of the first pass to the end of the
    step, so only the first pass updates them.
    """

    def __init__(self, rho: Optional[float], adaptive: bool) -> None:
        self.rho = rho if rho is not None else (0.5 if adaptive else 0.05)
        self.adaptive = adaptive

    def configure(self, ctx: Any) -> None:
        from trickbag.train.build import optimizer_kwargs

        base, kwargs = optimizer_kwargs(ctx.recipe)
        rho, adaptive = self.rho, self.adaptive
        ctx.optimizer_factory = lambda groups: SAM(groups, base, rho=rho, adaptive=adaptive, **kwargs)
        ctx.notes.append(f"{'ASAM' if adaptive else 'SAM'} (rho={rho}) around {base.__name__}: two passes per update")

    def on_after_backward(self, state: State) -> None:
        if not state.closure_pass:
            disable_running_stats(state.model)

    def on_step(self, state: State) -> None:
        enable_running_stats(state.model)

    def on_fit_end(self, state: State) -> None:
        enable_running_stats(state.model)


@register_trick("grad_norm", "Gradient-norm logging: global L2 norm before clipping, per update and per epoch")
def _grad_norm(cfg: Any, recipe: Recipe) -> list[Plugin]:
    return [GradNormPlugin()]


@register_trick("clip", "Gradient clipping once per update: global norm, value, or adaptive AGC (Brock et al. 2021)")
def _clip(cfg: Any, recipe: Recipe) -> list[Plugin]:
    return [ClipPlugin(cfg.mode, cfg.max_norm, cfg.value, cfg.clip_factor, cfg.eps, cfg.exclude_head)]


@register_trick("sam", "SAM / ASAM: minimise the worst loss within radius rho (Foret 2021, Kwon 2021); 2 passes")
def _sam(cfg: Any, recipe: Recipe) -> list[Plugin]:
    return [SAMPlugin(cfg.rho, cfg.adaptive)]


def _check_sam_fp16(recipe: Recipe) -> None:
    """SAM's second pass is not covered by the fp16 GradScaler's scale / unscale / inf-check bookkeeping."""
    if recipe.tricks.sam.enabled and recipe.train.precision == "16":
        raise ConflictError(
            "tricks.sam cannot run with train.precision=16: the fp16 GradScaler does not scale, unscale or "
            "inf-check SAM's second pass; use train.precision=bf16 (or 32)"
        )


def _check_clip_once(recipe: Recipe) -> None:
    """Gradients are clipped by one rule: train.clip or tricks.clip."""
    if recipe.tricks.clip.enabled and recipe.train.clip is not None:
        raise ConflictError(
            f"train.clip={recipe.train.clip} and tricks.clip both clip the gradients; keep one "
            f"(train.clip=null to use tricks.clip.mode={recipe.tricks.clip.mode})"
        )


INTERACTION_CHECKS.extend([_check_sam_fp16, _check_clip_once])
