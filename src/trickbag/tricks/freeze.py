"""Freeze parameters by name (transfer learning), optionally unfreezing them at a later epoch.

Frozen parameters are left out of the optimizer. At ``unfreeze_epoch`` they train again: they are
added back with :func:`trickbag.optim.add_param_group`, grouped as the recipe groups them (no-decay,
``lr_scale``, layer decay), each group following the recipe's schedule from where it is now. A
checkpoint taken after the unfreeze records it; on resume the groups are added back before the
optimizer state is loaded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator

from trickbag.config import TrickSection, needs_items
from trickbag.errors import ConflictError, RecipeError
from trickbag.plugin.context import log
from trickbag.plugin.interface import Plugin
from trickbag.tricks.base import Trick
from trickbag.tricks.param_groups import base_options, recipe_param_groups

if TYPE_CHECKING:
    from trickbag.plugin.context import Built, TrickContext
    from trickbag.plugin.interface import RecipeView
    from trickbag.plugin.state import State


class FreezeConfig(TrickSection):
    """Freeze parameters by name (transfer learning), optionally unfreezing them at a later epoch."""

    patterns: list[str] = Field(default_factory=list, validate_default=True)  # parameter-name globs, e.g. ["features.*"]  # noqa: E501 (a key's help is the comment on its line)
    regex: bool = False  # patterns are regular expressions (re.fullmatch) instead of globs
    bn_stats: bool = False  # also keep the running statistics of fully frozen BatchNorm layers fixed (eval mode)
    unfreeze_epoch: int | None = Field(None, ge=1)  # 0-based epoch at whose start they train again; None: never
    allow_untrained: bool = False  # freeze parameters that model.weights did not load (random initialisation) anyway

    @field_validator("patterns")
    @classmethod
    def _patterns(cls, v: list[str], info: Any) -> list[str]:
        return needs_items(v, info, "parameter-name pattern")


class FreezePlugin(Plugin):
    """:func:`trickbag.nn.freeze` before the optimizer is built; unfreeze at ``unfreeze_epoch``."""

    name = "freeze"

    def __init__(self, cfg: FreezeConfig, groups: Any = None, layers: Any = None) -> None:
        self.cfg, self.groups, self.layers = cfg, groups, layers
        self.base: tuple[float, float] = (0.0, 0.0)  # the optimizer's lr and weight decay (unfrozen groups)
        self.frozen: list[str] = []
        self.unfrozen = False
        self._model: Any = None
        self._optimizer: Any = None
        self._scheduler: Any = None

    def configure(self, ctx: TrickContext) -> None:
        from trickbag.nn import freeze, unwrap

        model = unwrap(ctx.model)
        try:
            self.frozen = freeze(model, self.cfg.patterns, freeze_bn_stats=self.cfg.bn_stats, regex=self.cfg.regex)
        except (ValueError, TypeError) as exc:
            raise RecipeError(f"tricks.freeze.patterns: {exc}") from None
        groups = [{**g, "params": [p for p in g["params"] if p.requires_grad]} for g in ctx.param_groups]
        ctx.param_groups = [g for g in groups if g["params"]]
        if not ctx.param_groups:
            raise RecipeError(f"tricks.freeze.patterns={self.cfg.patterns} freezes every parameter; "
                              "leave some trainable (e.g. the head)")
        self._check_trained(ctx)
        self._model = model
        if self.cfg.unfreeze_epoch is not None:
            self.base = base_options(ctx)
        n = sum(p.numel() for p in model.parameters() if not p.requires_grad)
        when = f", unfrozen at epoch {self.cfg.unfreeze_epoch + 1}" if self.cfg.unfreeze_epoch is not None else ""
        log.info(f"freeze: {len(self.frozen)} tensors ({n:,} values) frozen{when}")

    def _check_trained(self, ctx: TrickContext) -> None:
        """Freezing what no weights were loaded into keeps random features for good: refused unless allowed."""
        if self.cfg.allow_untrained:
            return
        loaded = set(ctx.loaded_weights) if ctx.loaded_weights is not None else set()
        untrained = [name for name in self.frozen if name not in loaded]
        if untrained:
            source = "were not loaded from model.weights" if ctx.loaded_weights is not None else \
                "keep their random initialisation (no model.weights)"
            raise RecipeError(
                f"tricks.freeze would freeze {len(untrained)} tensors that {source} (e.g. {untrained[0]}): they would "
                "never train; give model.weights=PATH with trained weights, or set tricks.freeze.allow_untrained=true"
            )

    def after_optimizer(self, built: Built) -> None:
        self._optimizer, self._scheduler = built.optimizer, built.scheduler

    def on_epoch_start(self, state: State) -> None:
        due = self.cfg.unfreeze_epoch is not None and state.epoch >= self.cfg.unfreeze_epoch
        if due and not self.unfrozen:
            self._unfreeze(state.optimizer, state.scheduler)

    def _unfreeze(self, optimizer: Any, scheduler: Any) -> None:
        from trickbag.nn import unfreeze
        from trickbag.optim import add_param_group

        frozen_ids = {id(p) for p in self._model.parameters() if not p.requires_grad}
        unfreeze(self._model, self.cfg.patterns, regex=self.cfg.regex)
        self.unfrozen = True
        g0 = optimizer.param_groups[0]
        factor = float(g0["lr"]) / float(g0["initial_lr"]) if g0.get("initial_lr") else 1.0
        lr, wd = self.base
        for g in recipe_param_groups(self._model, self.groups, self.layers, lr=lr, weight_decay=wd):
            params = [p for p in g["params"] if id(p) in frozen_ids]
            if not params:
                continue
            group = dict(g, params=params, lr=float(g.get("lr", lr)))
            if "param_names" in g:
                names = dict(zip(map(id, g["params"]), g["param_names"]))
                group["param_names"] = [names[id(p)] for p in params]
            if scheduler is None and self._scheduler is not None:  # the schedule was handed over (SWA)
                group["initial_lr"], group["lr"] = group["lr"], group["lr"] * factor
            add_param_group(optimizer, group, scheduler)

    def state_dict(self) -> dict[str, Any]:
        return {"unfrozen": self.unfrozen}

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        # called before the optimizer state is loaded: add the groups back so the optimizer state fits
        if sd.get("unfrozen") and not self.unfrozen and self._optimizer is not None:
            self._unfreeze(self._optimizer, self._scheduler)


def build(cfg: FreezeConfig, param_groups: Any, layer_decay: Any) -> list[Plugin]:
    return [FreezePlugin(cfg, param_groups, layer_decay)]


def check(recipe: RecipeView) -> None:
    """The unfreeze epoch lies inside the run, and not under DDP."""
    f, epochs = recipe.tricks.freeze, recipe.train.epochs
    if not f.enabled or f.unfreeze_epoch is None:
        return
    if f.unfreeze_epoch >= epochs:
        raise RecipeError(
            f"tricks.freeze.unfreeze_epoch={f.unfreeze_epoch} is not before the end of training "
            f"(train.epochs={epochs}); "
            + (f"use an epoch in [1, {epochs - 1}] or None" if epochs > 1 else
               "a 1-epoch run cannot unfreeze: set train.epochs >= 2 or tricks.freeze.unfreeze_epoch=null")
        )
    dist = getattr(recipe, "dist", None)  # not a RecipeView section (check_interactions reads it the same way)
    if dist is not None and dist.nproc > 1:
        raise ConflictError(
            "tricks.freeze.unfreeze_epoch cannot be used with dist.nproc > 1 (DDP fixes the trainable parameters "
            "when it wraps the model); train the two stages as two runs, the second with model.weights=<first best.pt>"
        )


TRICK = Trick(
    name="freeze",
    joins=("param_groups", "layer_decay"),  # unfrozen parameters join the optimizer grouped as those sections say
    config=FreezeConfig,
    description="Freeze parameters by name pattern (not in the optimizer); optional unfreeze epoch adds them back",
    build=build,
    checks=(check,),
)
