"""Stochastic weight averaging (Izmailov et al. 2018): average the last epochs' weights at a constant LR.

From the start epoch on, the recipe's schedule stops (``state.scheduler = None``) and
:class:`~torch.optim.swa_utils.SWALR` anneals every group's LR to ``lr_factor`` x its base LR over
``anneal_epochs`` (stepped per update); the weights at the end of every epoch go into a
:class:`trickbag.nn.SWA` average, whose BatchNorm statistics are recomputed on the training data
without augmentation before it is evaluated, checkpointed or kept. Evaluation, checkpoints and the
final model follow the EMA trick's contract (see :mod:`trickbag.tricks.ema`).
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from trickbag.config import TrickSection
from trickbag.errors import ConflictError, RecipeError
from trickbag.plugin.context import log
from trickbag.plugin.interface import Plugin
from trickbag.tricks.base import EvalOnAverage, Trick

if TYPE_CHECKING:
    from trickbag.plugin.context import Built, TrickContext
    from trickbag.plugin.interface import RecipeView
    from trickbag.plugin.state import State


class SWAConfig(TrickSection):
    """Stochastic weight averaging (Izmailov et al. 2018): average the weights of the last epochs at a constant LR."""

    start_epoch: int | None = Field(None, ge=0)  # first epoch (0-based) of the averaging phase; None: start_fraction
    start_fraction: float = Field(0.75, gt=0.0, lt=1.0)  # averaging starts after this fraction of train.epochs (paper: 0.75)  # noqa: E501 (a key's help is the comment on its line)
    lr_factor: float = Field(0.5, gt=0.0)  # SWA learning rate = lr_factor x each param group's base LR
    anneal_epochs: float = Field(1.0, ge=0.0)  # epochs to anneal from the current LR to the SWA LR (SWALR)
    anneal_strategy: Literal["cos", "linear"] = "cos"  # how SWALR anneals to the SWA LR
    update_bn: bool = True  # recompute BatchNorm statistics of the averaged weights on the training data


def start_epoch(cfg: SWAConfig, epochs: int) -> int:
    return (
        cfg.start_epoch
        if cfg.start_epoch is not None
        else min(epochs - 1, int(math.floor(cfg.start_fraction * epochs)))
    )


class SWAPlugin(EvalOnAverage):
    """SWALR from the start epoch, :class:`trickbag.nn.SWA` at every epoch end, swapped in for evaluation."""

    name = "swa"

    def __init__(self, cfg: SWAConfig) -> None:
        self.cfg, self.start = cfg, 0
        self.swa: Any = None
        self.swalr: Any = None
        self.active = False
        self._swalr_state: dict[str, Any] | None = None
        self._averaged_epoch = -1
        self._in_fit = False
        self._bn_loader: Any = None
        self._device: Any = None
        self._steps_per_epoch = 1

    def configure(self, ctx: TrickContext) -> None:
        from trickbag.nn import device_of

        self.start = start_epoch(self.cfg, ctx.epochs)
        self._bn_loader = ctx.train_eval_loader()
        self._device, self._steps_per_epoch = device_of(ctx.model), ctx.updates_per_epoch
        log.info(f"swa: averaging from epoch {self.start + 1}, LR annealed to {self.cfg.lr_factor} x base LR")

    def after_optimizer(self, built: Built) -> None:
        from trickbag.nn import SWA

        self.swa = SWA(built.model)

    def _begin(self, state: State) -> None:
        from torch.optim.swa_utils import SWALR

        self.active = True
        state.scheduler = None  # SWALR sets the LR from here on
        swa_lrs = [self.cfg.lr_factor * float(g.get("initial_lr", g["lr"])) for g in state.optimizer.param_groups]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "scheduler created/stepped before optimizer.step()"
            # one LR per param group: SWALR takes a float or a list (its docs), its annotation says float
            self.swalr = SWALR(state.optimizer, swa_lr=swa_lrs,  # type: ignore[arg-type]
                               anneal_epochs=int(round(self.cfg.anneal_epochs * self._steps_per_epoch)),
                               anneal_strategy=self.cfg.anneal_strategy)
        if self._swalr_state is not None:
            self.swalr.load_state_dict(self._swalr_state)
            self._swalr_state = None
        state.provide_eval_weights(self._eval_state, owner="tricks.swa")

    def _average(self, state: State) -> None:
        self.swa.update(state.model)
        self._averaged_epoch = state.epoch

    def _refresh_bn(self) -> None:
        if self.cfg.update_bn and self.swa.bn_stale:
            self.swa.update_bn(self._bn_loader, device=self._device)

    def _eval_state(self) -> dict[str, Any]:
        self._refresh_bn()
        return self.swa.module.state_dict()

    def _ready(self) -> bool:
        return self.active and self.swa.n_averaged > 0

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
            self.swap_in(self.swa.swapped(state.model))

    def on_epoch_end(self, state: State) -> None:
        if self.active and self._averaged_epoch != state.epoch:
            self._average(state)

    def on_fit_end(self, state: State) -> None:
        self._in_fit = False
        if self._ready():
            self._refresh_bn()
            self.swa.copy_to(state.model)  # keep the averaged weights

    def state_dict(self) -> dict[str, Any]:
        return {"swa": self.swa.state_dict(), "swalr": self.swalr.state_dict() if self.swalr is not None else None,
                "active": self.active, "averaged_epoch": self._averaged_epoch}

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        self.swa.load_state_dict(sd["swa"])
        self._swalr_state = sd.get("swalr")
        self._averaged_epoch = int(sd.get("averaged_epoch", -1))
        # the phase itself (scheduler hand-over, SWALR) starts again at FIT_START


def build(cfg: SWAConfig) -> list[Plugin]:
    return [SWAPlugin(cfg)]


def check(recipe: RecipeView) -> None:
    from trickbag.optim import optimizers

    cfg, epochs = recipe.tricks.swa, recipe.train.epochs
    why = optimizers.refusal(recipe.optim.name, "no_swa")
    if cfg.enabled and why:  # its trickbag.optim.optimizers entry refuses SWA
        raise ConflictError(f"tricks.swa with optim.name={recipe.optim.name}: {why}; turn one of them off")
    if cfg.enabled and start_epoch(cfg, epochs) >= epochs:
        raise RecipeError(
            f"tricks.swa.start_epoch={cfg.start_epoch} is not before the end of training (train.epochs={epochs}); "
            f"use an epoch in [0, {epochs - 1}]"
        )


TRICK = Trick(
    name="swa",
    after=("compile", "freeze"),  # it averages the model as the build left it
    config=SWAConfig,
    description="SWA: average the last epochs' weights at a constant LR (SWALR), BN statistics recomputed",
    build=build,
    checks=(check,),
    unsharded=("its BatchNorm update runs a copy of the model, and FSDP2 models cannot be copied; tricks.ema "
               "keeps a sharded average"),
)
