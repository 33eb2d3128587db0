"""Sharpness-Aware Minimization (SAM / ASAM) and BatchNorm running-stat freezing for its second pass."""

from __future__ import annotations

import math
import weakref
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn
from torch.nn.modules.batchnorm import _NormBase

__all__ = ["SAM", "disable_running_stats", "enable_running_stats"]

# Smallest gradient norm used as a divisor: a zero gradient gives a zero perturbation, never a NaN.
_TINY = 1e-12


class SAM(torch.optim.Optimizer):
    r"""Wrap a base optimizer so each update is taken at the worst-case nearby weights (SAM / ASAM).

    Sharpness-Aware Minimization (Foret et al. 2021, https://arxiv.org/abs/2010.01412) takes
    the gradient at the perturbed weights :math:`w + e(w)` with

    .. math::  e(w) = \rho \, \frac{g}{\lVert g \rVert_2}

    where :math:`g` is the gradient at :math:`w` and the norm runs over *all* parameters of all
    groups.  With ``adaptive=True`` it is ASAM (Kwon et al. 2021, https://arxiv.org/abs/2102.11600):
    :math:`e(w) = \rho \, T_w^2 g / \lVert T_w g \rVert_2` with :math:`T_w = |w|` element-wise
    (use a larger ``rho``, e.g. 0.5 or 2.0, with ASAM).  The base optimizer then steps from the
    original weights :math:`w` with the gradient taken at :math:`w + e(w)`.

    ``base_optimizer`` is a class (e.g. ``torch.optim.SGD``) and ``**kwargs`` go to it.  SAM and the
    base optimizer share one ``param_groups`` list, so an LR scheduler built on the SAM object
    changes the learning rate the base optimizer uses.  ``rho`` and ``adaptive`` may be set per
    param group.  Parameter shapes are arbitrary; parameters whose ``.grad`` is ``None`` are
    neither perturbed nor updated.

    Two ways to use it, both needing **two** forward/backward passes per update:

    * two-call form: ``loss_fn(model(x), y).backward(); opt.first_step(zero_grad=True);``
      ``loss_fn(model(x), y).backward(); opt.second_step(zero_grad=True)``;
    * closure form: the caller has **already run the first forward+backward** (gradients at
      :math:`w` are in ``.grad``); ``opt.step(closure)`` perturbs the weights, zeroes the
      gradients, calls ``closure`` (which must run forward+backward and return the loss; it is
      run under ``torch.enable_grad()``), restores the weights and takes the base step.  It
      returns the closure's loss, i.e. the loss at the perturbed weights.

    Run the second pass inside :func:`disable_running_stats` so BatchNorm running statistics are
    not updated twice per step.

    :meth:`state_dict` is the base optimizer's state (momentum buffers, …) with SAM's
    ``rho``/``adaptive`` in its param groups; the weight backups made by :meth:`first_step` are
    transient and not saved.

    >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
    <torch._C.Generator object at ...>
    >>> model = nn.Linear(3, 1)
    >>> opt = SAM(model.parameters(), torch.optim.SGD, rho=0.05, lr=0.1, momentum=0.9)
    >>> x, y = torch.randn(8, 3), torch.randn(8, 1)
    >>> loss_fn = nn.MSELoss()
    >>> loss_fn(model(x), y).backward()           # first pass, done by the caller
    >>> def closure():
    ...     loss = loss_fn(model(x), y)
    ...     loss.backward()
    ...     return loss
    >>> loss_at_perturbed = opt.step(closure)      # second pass + base step
    >>> opt.param_groups is opt.base_optimizer.param_groups
    True
    """

    #: trainers step it as ``step(closure)``; the closure re-runs forward + backward (second pass)
    takes_closure = True

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict[str, Any]],
        base_optimizer: type[torch.optim.Optimizer],
        rho: float = 0.05,
        adaptive: bool = False,
        **kwargs: Any,
    ) -> None:
        if not (isinstance(base_optimizer, type) and issubclass(base_optimizer, torch.optim.Optimizer)):
            raise TypeError(
                "SAM: base_optimizer must be an optimizer class such as torch.optim.SGD (its arguments "
                f"are passed as keywords, e.g. SAM(params, torch.optim.SGD, lr=0.1)); got {base_optimizer!r}"
            )
        if issubclass(base_optimizer, SAM):
            raise TypeError("SAM: base_optimizer cannot itself be SAM; pass e.g. torch.optim.SGD")
        _check_rho(rho, "rho")
        _check_adaptive(adaptive, "adaptive")
        defaults = dict(rho=float(rho), adaptive=adaptive, **kwargs)
        super().__init__(params, defaults)
        for i, group in enumerate(self.param_groups):
            _check_rho(group["rho"], f"param_groups[{i}]['rho']")
            _check_adaptive(group["adaptive"], f"param_groups[{i}]['adaptive']")
        # The base optimizer adopts SAM's group dicts; from here on both objects share one list.
        self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
        clash = {"rho", "adaptive"} & set(self.base_optimizer.defaults)
        if clash:
            raise TypeError(
                f"SAM cannot wrap {base_optimizer.__name__}: both use the param-group key(s) "
                f"{sorted(clash)}; choose another base optimizer (e.g. torch.optim.SGD or AdamW)"
            )
        self.param_groups = self.base_optimizer.param_groups
        self.defaults.update(self.base_optimizer.defaults)
        self._perturbed: list[torch.Tensor] | None = None

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a param group to SAM and its base optimizer (they share ``param_groups``)."""
        base = self.__dict__.get("base_optimizer")
        if base is None:  # called from Optimizer.__init__, before the base optimizer exists
            super().add_param_group(param_group)
            return
        param_group.setdefault("rho", self.defaults["rho"])
        param_group.setdefault("adaptive", self.defaults["adaptive"])
        _check_rho(param_group["rho"], "param_group['rho']")
        _check_adaptive(param_group["adaptive"], "param_group['adaptive']")
        base.add_param_group(param_group)

    @torch.no_grad()
    def _grad_norm(self) -> torch.Tensor:
        """L2 norm of all gradients (times ``|w|`` in adaptive groups), over every group at once."""
        tensors: list[torch.Tensor] = []
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            grads = [p.grad for p in params]
            if any(g.is_sparse for g in grads):
                raise RuntimeError("SAM does not support sparse gradients")
            if group["adaptive"]:
                tensors.extend(torch._foreach_mul(torch._foreach_abs(params), grads))
            else:
                tensors.extend(grads)
        return torch.nn.utils.get_total_norm(tensors, norm_type=2.0)

    @torch.no_grad()
    def first_step(self, zero_grad: bool = False) -> None:
        r"""Move every parameter with a gradient to :math:`w + e(w)`, keeping a copy of :math:`w` in ``state``.

        Call it after the first backward pass.  ``zero_grad=True`` clears the gradients so the
        second backward pass does not add to them.
        """
        if self._perturbed is not None:
            raise RuntimeError(
                "SAM.first_step was called twice in a row; call second_step() to restore the weights first"
            )
        grad_norm = self._grad_norm()
        perturbed: list[torch.Tensor] = []
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            scale = group["rho"] / grad_norm.clamp_min(_TINY)
            for p in params:
                state = self.state[p]
                old = state.get("old_p")
                if old is None or old.shape != p.shape or old.dtype != p.dtype or old.device != p.device:
                    state["old_p"] = p.detach().clone()
                else:
                    old.copy_(p)
                e_w = p.grad * scale.to(device=p.device, dtype=p.dtype)
                if group["adaptive"]:
                    e_w.mul_(p * p)
                p.add_(e_w)
                perturbed.append(p)
        self._perturbed = perturbed
        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def second_step(self, zero_grad: bool = False) -> None:
        """Restore the weights saved by :meth:`first_step`, then take the base optimizer's step.

        Call it after the second backward pass (gradients taken at the perturbed weights).
        """
        if self._perturbed is None:
            raise RuntimeError("SAM.second_step was called without a preceding first_step()")
        for p in self._perturbed:
            p.copy_(self.state[p]["old_p"])
        self._perturbed = None
        self.base_optimizer.step()
        # LR schedulers check this flag to tell whether an optimizer update happened before their
        # first step; the two-call form never goes through SAM.step, so set it here.
        self._opt_called = True
        if zero_grad:
            self.zero_grad()

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Take one SAM update: ``first_step(zero_grad=True)``, ``closure()``, ``second_step()``.

        The first forward+backward must already have been run by the caller; ``closure`` runs the
        second one (it is wrapped in ``torch.enable_grad()``).  Returns the closure's result.
        """
        if closure is None:
            raise ValueError(
                "SAM.step needs closure= (a function that runs forward+backward and returns the loss); "
                "without one, call first_step() and second_step() around your second backward pass"
            )
        if not callable(closure):
            raise TypeError(f"SAM.step: closure must be callable, got {type(closure).__name__}")
        self.first_step(zero_grad=True)
        try:
            with torch.enable_grad():
                loss = closure()
        except BaseException:
            # Never leave the model at the perturbed weights.
            with torch.no_grad():
                for p in self._perturbed or ():
                    p.copy_(self.state[p]["old_p"])
            self._perturbed = None
            raise
        self.second_step()
        return loss

    def state_dict(self) -> dict[str, Any]:
        """Return the base optimizer's state dict (its param groups carry SAM's ``rho``/``adaptive``)."""
        return self.base_optimizer.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a dict from :meth:`state_dict` into the base optimizer and re-share its param groups."""
        self.base_optimizer.load_state_dict(state_dict)
        self.param_groups = self.base_optimizer.param_groups
        for i, group in enumerate(self.param_groups):
            group.setdefault("rho", self.defaults["rho"])
            group.setdefault("adaptive", self.defaults["adaptive"])
            _check_rho(group["rho"], f"state_dict param_groups[{i}]['rho']")
            _check_adaptive(group["adaptive"], f"state_dict param_groups[{i}]['adaptive']")
        self.state = defaultdict(dict)
        self._perturbed = None


def _check_rho(rho: Any, name: str) -> None:
    if isinstance(rho, bool) or not isinstance(rho, (int, float)) or not math.isfinite(rho) or rho < 0:
        raise ValueError(f"SAM: {name} must be a finite number >= 0 (typically 0.05, or 0.5-2 for ASAM), got {rho!r}")


def _check_adaptive(adaptive: Any, name: str) -> None:
    if not isinstance(adaptive, bool):
        raise TypeError(f"SAM: {name} must be True or False, got {adaptive!r}")


class _FrozenRunningStats:
    """Saved BatchNorm momentum and batch counters of one model, restored on exit."""

    def __init__(self, model: nn.Module) -> None:
        self.depth = 0
        self.saved: list[tuple[_NormBase, float | None, torch.Tensor | None]] = []
        for m in model.modules():
            if isinstance(m, _NormBase) and m.track_running_stats:
                count = m.num_batches_tracked
                self.saved.append((m, m.momentum, None if count is None else count.detach().clone()))
                # momentum 0: running = 1 * running + 0 * batch, so the statistics stay put.
                m.momentum = 0.0
        self.model = weakref.ref(model)

    def restore(self) -> None:
        with torch.no_grad():
            for m, momentum, count in self.saved:
                m.momentum = momentum
                if count is not None and m.num_batches_tracked is not None:
                    # A forward pass counts itself even with momentum 0; with momentum=None the count
                    # is the averaging weight, so it must not include the second pass. Undo those
                    # counts only: a counter rewound meanwhile (a vetoed update whose buffers were put
                    # back, reset_running_stats) stays where it was put.
                    torch.minimum(m.num_batches_tracked, count, out=m.num_batches_tracked)
        self.saved = []

    def __enter__(self) -> _FrozenRunningStats:
        return self

    def __exit__(self, *exc: object) -> None:
        self.depth -= 1
        if self.depth <= 0:
            model = self.model()
            if model is not None and _FROZEN.get(model) is self:
                del _FROZEN[model]
            self.restore()


_FROZEN: weakref.WeakKeyDictionary[nn.Module, _FrozenRunningStats] = weakref.WeakKeyDictionary()


def disable_running_stats(model: nn.Module) -> _FrozenRunningStats:
    """Stop BatchNorm layers of ``model`` from updating their running statistics (SAM's second pass).

    Sets ``momentum`` to 0 on every BatchNorm/SyncBatchNorm (and running-stat InstanceNorm) layer
    and remembers the original momentum (``None``, cumulative averaging, included) and
    ``num_batches_tracked``.  Takes effect immediately; the returned handle is a context manager
    that restores everything on exit, or call :func:`enable_running_stats` (the davda54/sam
    two-function form).  Training-mode outputs are unchanged: batch statistics are still used.
    Calling it again while disabled (or nesting ``with`` blocks) keeps the first saved values.

    >>> bn_model = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3))
    >>> before = bn_model[1].running_mean.clone()
    >>> with disable_running_stats(bn_model):
    ...     _ = bn_model(torch.randn(5, 4))
    >>> torch.equal(bn_model[1].running_mean, before), bn_model[1].momentum
    (True, 0.1)
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"disable_running_stats: model must be a torch.nn.Module, got {type(model).__name__}")
    handle = _FROZEN.get(model)
    if handle is None:
        handle = _FrozenRunningStats(model)
        _FROZEN[model] = handle
    handle.depth += 1
    return handle


def enable_running_stats(model: nn.Module) -> None:
    """Undo :func:`disable_running_stats` on ``model``: restore momentum and batch counters (no-op if not disabled).

    >>> bn_model = nn.BatchNorm1d(3, momentum=None)
    >>> _ = disable_running_stats(bn_model)
    >>> bn_model.momentum
    0.0
    >>> enable_running_stats(bn_model)
    >>> bn_model.momentum is None
    True
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"enable_running_stats: model must be a torch.nn.Module, got {type(model).__name__}")
    handle = _FROZEN.pop(model, None)
    if handle is not None:
        handle.depth = 0
        handle.restore()
