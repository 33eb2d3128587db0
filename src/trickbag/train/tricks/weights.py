"""Recipe tricks that average weights: EMA and SWA.

Both follow one contract with the trainer:

* while ``fit`` runs, evaluation uses the averaged weights: they are copied into the model at
  EVAL_START (the raw weights saved) and the raw ones copied back at EVAL_END, so ``val/acc``,
  ``val/loss``, best.pt selection and early stopping all follow the averaged model;
* the raw weights are evaluated too, after the swap back, and reported as ``val/acc_raw`` and
  ``val/loss_raw`` (EMA: ``tricks.ema.eval_raw``);
* every checkpoint stores the averaged weights as ``eval_model`` (through
  ``state.extra["eval_model_state"]``), which ``trickbag eval`` / ``predict`` and the final test
  use, and the averager's own state under the plug-in's key, so a resumed run continues it;
* at FIT_END the averaged weights are copied into the model for good: after ``fit`` the model is
  the one that was evaluated (the raw weights stay in the checkpoints' ``model``).

EMA and SWA together are refused: both would swap their own weights in for evaluation.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Optional

import torch
from torch.optim.swa_utils import SWALR, AveragedModel, update_bn

from trickbag.config import Recipe
from trickbag.errors import ConflictError, RecipeError
from trickbag.nn import EMA
from trickbag.train.plugin import Plugin
from trickbag.train.state import State
from trickbag.train.trainer import _unwrap
from trickbag.train.tricks import INTERACTION_CHECKS, register_trick

__all__ = ["EMAPlugin", "SWAPlugin"]


def _add_raw_metrics(state: State) -> None:
    """Evaluate the (raw) model on the validation loader; add ``acc_raw`` / ``loss_raw`` to ``state.eval_metrics``."""
    if state.eval_loop is None or state.val_loader is None:
        return
    raw = state.eval_loop(state.val_loader)
    state.eval_metrics["acc_raw"] = raw["acc"]
    state.eval_metrics["loss_raw"] = raw["loss"]


class _Swap:
    """Copy ``source``'s parameters and buffers into ``model`` in place; :meth:`restore` puts the originals back."""

    def __init__(self, model: torch.nn.Module, source: torch.nn.Module) -> None:
        self.dst = list(model.parameters()) + list(model.buffers())
        src = list(source.parameters()) + list(source.buffers())
        with torch.no_grad():
            self.saved = [t.detach().clone() for t in self.dst]
            for d, s in zip(self.dst, src):
                d.copy_(s)

    def restore(self) -> None:
        with torch.no_grad():
            for d, s in zip(self.dst, self.saved):
                d.copy_(s)


# --------------------------------------------------------------------------- EMA
class EMAPlugin(Plugin):
    """Keep an :class:`~trickbag.nn.EMA` of the weights, updated after every optimizer update that was
    not skipped; evaluate and checkpoint with it (see the module docstring)."""

    name = "ema"

    def __init__(self, decay: float, warmup: bool | int, every: int, buffers: str, eval_raw: bool) -> None:
        self.decay, self.warmup, self.every, self.buffers = decay, warmup, every, buffers
        self.eval_raw = eval_raw
        self.ema: Optional[EMA] = None
        self._swap: Any = None
        self._in_fit = False

    def after_optimizer(self, ctx: Any) -> None:
        self.ema = EMA(ctx.model, self.decay, warmup=self.warmup, every=self.every, buffers=self.buffers)  # type: ignore[arg-type]

    def _ema(self) -> EMA:
        if self.ema is None:
            raise RuntimeError("EMAPlugin.after_optimizer(ctx) must run before training")
        return self.ema

    def on_fit_start(self, state: State) -> None:
        self._in_fit = True
        state.extra["eval_model_state"] = lambda: self._ema().module.state_dict()

    def on_step(self, state: State) -> None:
        if not state.step_skipped:
            self._ema().update(state.model)

    def on_eval_start(self, state: State) -> None:
        if self._in_fit:
            self._swap = self._ema().swapped(state.model)
            self._swap.__enter__()

    def on_eval_end(self, state: State) -> None:
        if self._swap is None:
            return
        self._swap.__exit__(None, None, None)
        self._swap = None
        if self.eval_raw:
            _add_raw_metrics(state)

    def on_fit_end(self, state: State) -> None:
        self._in_fit = False
        self._ema().copy_to(state.model)

    def state_dict(self) -> dict[str, Any]:
        return self._ema().state_dict()

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        self._ema().load_state_dict(sd)


# --------------------------------------------------------------------------- SWA
class SWAPlugin(Plugin):
    """Stochastic weight averaging with ``torch.optim.swa_utils`` (Izmailov et al. 2018).

    From ``start`` on, the recipe's schedule stops (``state.scheduler = None``) and
    :class:`~torch.optim.swa_utils.SWALR` anneals every group's LR to ``lr_factor`` x its base LR
    over ``anneal_epochs`` (stepped per update); the weights at the end of every epoch are averaged
    into an :class:`~torch.optim.swa_utils.AveragedModel`.  Before the averaged weights are
    evaluated, checkpointed or kept at the end, their BatchNorm statistics are recomputed with
    :func:`~torch.optim.swa_utils.update_bn` on the training data without augmentation (under a
    forked RNG, so the training's random stream is not disturbed).
    """

    name = "swa"

    def __init__(self, start: int, lr_factor: float, anneal_epochs: float, anneal_strategy: str,
                 update_bn: bool) -> None:
        self.start, self.lr_factor = start, lr_factor
        self.anneal_epochs, self.anneal_strategy, self.update_bn = anneal_epochs, anneal_strategy, update_bn
        self.swa: Optional[AveragedModel] = None
        self.swalr: Optional[SWALR] = None
        self.active = False
        self._swalr_state: Optional[dict[str, Any]] = None
        self._bn_fresh = True
        self._averaged_epoch = -1
        self._in_fit = False
        self._swap: Optional[_Swap] = None
        self._bn_loader: Any = None
        self._device = torch.device("cpu")
        self._steps_per_epoch = 1

    def configure(self, ctx: Any) -> None:
        from trickbag.train.build import make_loader

        data = ctx.data.eval_train if ctx.data.eval_train is not None else ctx.data.train
        self._bn_loader = make_loader(data, ctx.recipe, train=False, dist=ctx.dist, device=ctx.device)
        self._device, self._steps_per_epoch = ctx.device, ctx.steps_per_epoch
        ctx.notes.append(f"swa: averaging from epoch {self.start + 1}, LR annealed to {self.lr_factor} x base LR")

    def after_optimizer(self, ctx: Any) -> None:
        self.swa = AveragedModel(_unwrap(ctx.model))

    def _model(self) -> AveragedModel:
        if self.swa is None:
            raise RuntimeError("SWAPlugin.after_optimizer(ctx) must run before training")
        return self.swa

    def _begin(self, state: State) -> None:
        self.active = True
        state.scheduler = None  # SWALR sets the LR from here on
        swa_lrs = [self.lr_factor * float(g.get("initial_lr", g["lr"])) for g in state.optimizer.param_groups]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "scheduler created/stepped before optimizer.step()"
            self.swalr = SWALR(state.optimizer, swa_lr=swa_lrs,
                               anneal_epochs=int(round(self.anneal_epochs * self._steps_per_epoch)),
                               anneal_strategy=self.anneal_strategy)  # type: ignore[arg-type]
        if self._swalr_state is not None:
            self.swalr.load_state_dict(self._swalr_state)
            self._swalr_state = None
        state.extra["eval_model_state"] = self._eval_state

    def _average(self, state: State) -> None:
        self._model().update_parameters(_unwrap(state.model))
        self._bn_fresh = False
        self._averaged_epoch = state.epoch

    def _refresh_bn(self) -> None:
        if self._bn_fresh or not self.update_bn:
            return
        m = self._model().module
        m.train()
        # BatchNorm layers kept in eval mode (tricks.freeze.bn_stats) keep their statistics
        kept = [(b, b.running_mean.clone(), b.running_var.clone()) for b in m.modules()
                if isinstance(b, torch.nn.modules.batchnorm._BatchNorm) and not b.training
                and b.running_mean is not None and b.running_var is not None]
        devices = [self._device.index or 0] if self._device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices), torch.no_grad():
            update_bn(self._bn_loader, m, device=self._device)
            for b, mean, var in kept:
                b.running_mean.copy_(mean)
                b.running_var.copy_(var)
        m.eval()
        self._bn_fresh = True

    def _eval_state(self) -> dict[str, Any]:
        self._refresh_bn()
        return self._model().module.state_dict()

    def _ready(self) -> bool:
        return self.active and int(self._model().n_averaged) > 0

    def on_fit_start(self, state: State) -> None:
        self._in_fit = True
        if state.epoch >= self.start:
            self._begin(state)

    def on_epoch_start(self, state: State) -> None:
        if not self.active and state.epoch >= self.start:
            self._begin(state)

    def on_step(self, state: State) -> None:
        if not self.active:
            return
        if not state.step_skipped and self.swalr is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self.swalr.step()
        if state.batches_per_epoch and state.batch_idx + 1 >= state.batches_per_epoch:
            self._average(state)  # the weights at the end of the epoch

    def on_eval_start(self, state: State) -> None:
        if self._in_fit and self.active and self._averaged_epoch != state.epoch:
            self._average(state)  # a loader without len(): the epoch's last update was not recognised
        if self._in_fit and self._ready():
            self._refresh_bn()
            self._swap = _Swap(_unwrap(state.model), self._model().module)

    def on_eval_end(self, state: State) -> None:
        if self._swap is None:
            return
        self._swap.restore()
        self._swap = None
        _add_raw_metrics(state)

    def on_epoch_end(self, state: State) -> None:
        if self.active and self._averaged_epoch != state.epoch:
            self._average(state)

    def on_fit_end(self, state: State) -> None:
        self._in_fit = False
        if self._ready():
            self._refresh_bn()
            _Swap(_unwrap(state.model), self._model().module)  # keep the averaged weights

    def state_dict(self) -> dict[str, Any]:
        return {
            "averaged": self._model().state_dict(),
            "swalr": self.swalr.state_dict() if self.swalr is not None else None,
            "active": self.active,
            "bn_fresh": self._bn_fresh,
            "averaged_epoch": self._averaged_epoch,
        }

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        self._model().load_state_dict(sd["averaged"])
        self._swalr_state = sd.get("swalr")
        self._bn_fresh = bool(sd.get("bn_fresh", True))
        self._averaged_epoch = int(sd.get("averaged_epoch", -1))
        # the phase itself (scheduler hand-over, SWALR) starts again at FIT_START


# --------------------------------------------------------------------------- registry
@register_trick("ema", "EMA of the weights (Polyak averaging); evaluation and best.pt use it, raw accuracy logged too")
def _ema(cfg: Any, recipe: Recipe) -> list[Plugin]:
    return [EMAPlugin(cfg.decay, cfg.warmup, cfg.every, cfg.buffers, cfg.eval_raw)]


@register_trick("swa", "SWA: average the last epochs' weights at a constant LR (SWALR), BN statistics recomputed")
def _swa(cfg: Any, recipe: Recipe) -> list[Plugin]:
    epochs = recipe.train.epochs
    start = cfg.start_epoch if cfg.start_epoch is not None else min(epochs - 1, int(math.floor(cfg.start_fraction * epochs)))
    if start >= epochs:
        raise RecipeError(
            f"tricks.swa.start_epoch={cfg.start_epoch} is not before the end of training (train.epochs={epochs}); "
            f"use an epoch in [0, {epochs - 1}]"
        )
    return [SWAPlugin(start, cfg.lr_factor, cfg.anneal_epochs, cfg.anneal_strategy, cfg.update_bn)]


def _check_ema_swa(recipe: Recipe) -> None:
    if recipe.tricks.ema.enabled and recipe.tricks.swa.enabled:
        raise ConflictError(
            "tricks.ema and tricks.swa both average the weights and would each evaluate their own average; "
            "enable only one of them"
        )


INTERACTION_CHECKS.append(_check_ema_swa)
