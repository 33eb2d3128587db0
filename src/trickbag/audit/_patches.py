"""The wrappers :class:`trickbag.audit.watch.Audit` installs for the duration of a ``with`` block:
clipping functions, LR schedulers, GradScaler, EMA/SWA updates and, for ``trickbag audit SCRIPT``,
optimizer construction and top-level module discovery.  Every wrapper calls the original with the
same arguments; all are undone by ``Audit.__exit__``."""

from __future__ import annotations

import functools
import sys
import warnings
from collections.abc import Callable
from types import FrameType
from typing import Any

import torch
from torch.optim import lr_scheduler as lrs

from trickbag.audit._where import in_trickbag

__all__ = ["install", "stop_module_discovery"]

_SCHEDULER_BASES = (lrs.LRScheduler, lrs.ReduceLROnPlateau)


def install(audit: Any) -> None:
    """Install every wrapper the audit needs (explicit objects instance-wise, the rest class-wise)."""
    audit._sched_depth = audit._ema_depth = 0
    _patch_clip(audit)
    _patch_schedulers(audit)
    _patch_scaler(audit)
    _patch_ema(audit)
    if audit._adopt:
        _patch_optimizer_init(audit)
        _start_module_discovery(audit)


_Through = Callable[[Any, str, tuple, Callable[[], Any]], Any]


def _wrap_calls(audit: Any, explicit: list[tuple[Any, str]], classes: list[tuple[type, str]],
                through: _Through) -> None:
    """Route every ``obj.name(*args, **kw)`` through ``through(obj, name, args, call)`` (``call()`` runs the
    original): on the ``explicit`` (object, method) pairs only when there are any, else on every
    instance of the (class, method) pairs."""
    if explicit:
        for obj, name in explicit:
            audit._wrap_method(obj, name, lambda orig, a, kw, obj=obj, name=name: through(
                obj, name, a, lambda: orig(*a, **kw)))
        return
    for cls, name in classes:
        orig = getattr(cls, name)

        def method(self: Any, *a: Any, _orig: Callable = orig, _name: str = name, **kw: Any) -> Any:
            return through(self, _name, a, lambda: _orig(self, *a, **kw))

        audit.patch(cls, name, functools.wraps(orig)(method))


def _outermost(audit: Any, depth: str, notify: Callable[[], None], call: Callable[[], Any]) -> Any:
    """``call()`` with the counter ``audit.<depth>`` raised; ``notify()`` first when the audit is active
    and this is the outermost such call (a scheduler's ``step`` calling its parent's is one step)."""
    if audit._active and getattr(audit, depth) == 0:
        notify()
    setattr(audit, depth, getattr(audit, depth) + 1)
    try:
        return call()
    finally:
        setattr(audit, depth, getattr(audit, depth) - 1)


# --------------------------------------------------------------------------- clipping
def _clip_wrapper(audit: Any, orig: Callable) -> Callable:
    @functools.wraps(orig)
    def clip(parameters: Any, *args: Any, **kwargs: Any) -> Any:
        if audit._active:
            if not isinstance(parameters, torch.Tensor):
                parameters = list(parameters)  # a generator would be consumed by the check
            audit.on_clip(parameters)
        return orig(parameters, *args, **kwargs)

    return clip


def _patch_clip(audit: Any) -> None:
    import torch.nn.utils as utils
    import torch.nn.utils.clip_grad as clip_grad

    for name in ("clip_grad_norm_", "clip_grad_value_"):
        orig = getattr(clip_grad, name)
        wrapper = _clip_wrapper(audit, orig)
        for module in (utils, clip_grad):
            if getattr(module, name, None) is orig:
                audit.patch(module, name, wrapper)


# --------------------------------------------------------------------------- schedulers
def _constructing(sched: Any) -> bool:
    """True while a scheduler's ``__init__`` runs (its initial ``step()`` is not a training step)."""
    f: FrameType | None = sys._getframe(2)
    for _ in range(25):
        if f is None:
            return False
        if f.f_code.co_name == "__init__" and isinstance(f.f_locals.get("self"), _SCHEDULER_BASES):
            return True
        f = f.f_back
    return False


def _sched_step(audit: Any, sched: Any) -> None:
    if not _constructing(sched):
        audit.on_scheduler_step(sched)


class _UserFrameWarnings:
    """Stands in for the ``warnings`` module inside ``torch.optim.lr_scheduler`` while the audit runs, so
    that torch's own warnings ("Detected call of `lr_scheduler.step()` before `optimizer.step()`") point at
    the user's line and not at the audit's wrapper that sits between the user's call and torch."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def warn(self, message: Any, category: Any = None, stacklevel: int = 1, **kwargs: Any) -> None:
        f = sys._getframe(1)  # the torch function that warns: stacklevel 1
        level = 1
        while level < stacklevel and f.f_back is not None:
            f, level = f.f_back, level + 1
        while f.f_back is not None and in_trickbag(f.f_code.co_filename):
            f, level = f.f_back, level + 1
        self._real.warn(message, category, stacklevel=level + 1, **kwargs)


def _patch_schedulers(audit: Any) -> None:
    def through(sched: Any, name: str, args: tuple, call: Callable[[], Any]) -> Any:
        return _outermost(audit, "_sched_depth", lambda: _sched_step(audit, sched), call)

    if isinstance(getattr(lrs, "warnings", None), type(warnings)):
        audit.patch(lrs, "warnings", _UserFrameWarnings(lrs.warnings))
    classes = [c for c in vars(lrs).values() if isinstance(c, type) and issubclass(c, _SCHEDULER_BASES)]
    _wrap_calls(audit, [(s, "step") for s in audit.schedulers], [(c, "step") for c in classes if "step" in vars(c)],
                through)


# --------------------------------------------------------------------------- GradScaler
def _scaler_call(audit: Any, scaler: Any, kind: str, args: tuple, call: Callable[[], Any]) -> Any:
    if not audit._active:
        return call()
    if kind == "scale":
        audit.on_scaler_scale(scaler)
    elif kind == "unscale_":
        audit.on_scaler_unscale()
    elif kind == "update":
        audit.on_scaler_update()
    elif kind == "step" and args:
        return audit.on_scaler_step(args[0], call)
    return call()


def _patch_scaler(audit: Any) -> None:
    kinds = ("scale", "unscale_", "step", "update")
    _wrap_calls(audit, [(audit.scaler, kind) for kind in kinds] if audit.scaler is not None else [],
                [(torch.amp.GradScaler, kind) for kind in kinds],
                lambda scaler, kind, args, call: _scaler_call(audit, scaler, kind, args, call))


# --------------------------------------------------------------------------- EMA / SWA
def _ema_classes() -> list[tuple[type, str]]:
    from torch.optim.swa_utils import AveragedModel

    from trickbag.nn.ema import EMA
    from trickbag.nn.swa import SWA

    out = [(AveragedModel, "update_parameters"), (EMA, "update"), (SWA, "update")]
    timm_ema = sys.modules.get("timm.utils.model_ema")
    for name in ("ModelEma", "ModelEmaV2", "ModelEmaV3"):
        cls = getattr(timm_ema, name, None) if timm_ema is not None else None
        if isinstance(cls, type):
            out.append((cls, "update"))
    return out


def _patch_ema(audit: Any) -> None:
    explicit = [(e, "update_parameters" if hasattr(e, "update_parameters") else "update") for e in audit.emas]
    _wrap_calls(audit, explicit, _ema_classes(),
                lambda ema, name, args, call: _outermost(audit, "_ema_depth", lambda: audit.on_ema_update(ema), call))


# --------------------------------------------------------------------------- script mode
def _patch_optimizer_init(audit: Any) -> None:
    orig = torch.optim.Optimizer.__init__

    @functools.wraps(orig)
    def init(self: Any, *a: Any, **kw: Any) -> None:
        orig(self, *a, **kw)
        if audit._active and id(self) not in audit._opt:
            audit._adopt_optimizer(self)

    audit.patch(torch.optim.Optimizer, "__init__", init)


def _start_module_discovery(audit: Any) -> None:
    """Record the top-level modules called before the first optimizer step (global hooks, removed
    at the first step: after that only the attached models are hooked)."""
    from torch.nn.modules import module as M

    def pre(mod: torch.nn.Module, args: Any) -> None:
        if audit._depth == 0:
            audit._top_modules.setdefault(id(mod), mod)
        audit._depth += 1

    def post(mod: torch.nn.Module, args: Any, out: Any) -> None:
        audit._depth = max(0, audit._depth - 1)

    audit._discovery = [M.register_module_forward_pre_hook(pre), M.register_module_forward_hook(post)]
    audit._undo.append(lambda: stop_module_discovery(audit))


def stop_module_discovery(audit: Any) -> None:
    for handle in getattr(audit, "_discovery", []):
        handle.remove()
    audit._discovery = []
