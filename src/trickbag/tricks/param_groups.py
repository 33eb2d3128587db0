"""Optimizer parameter groups: no weight decay on biases / norms, a learning-rate factor per name pattern.

With ``layer_decay`` on too, one plug-in builds the groups for both sections
(:func:`trickbag.nn.param_groups` with :func:`trickbag.nn.layer_id_by_depth`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator

from trickbag.config import TrickSection
from trickbag.errors import RecipeError
from trickbag.plugin.context import log
from trickbag.plugin.interface import Plugin
from trickbag.tricks.base import Trick

if TYPE_CHECKING:
    from trickbag.plugin.context import TrickContext


class ParamGroupsConfig(TrickSection):
    """Optimizer parameter groups: no weight decay on biases/norms, per-pattern learning-rate factors."""

    no_decay_bias_norm: bool = True  # biases, 1-D params and norm layers get weight_decay=0 (Goyal et al. 2017)
    lr_scale: dict[str, float] = Field(default_factory=dict)  # {parameter-name glob: LR factor >= 0}, e.g. {"head.*": 10}  # noqa: E501 (a key's help is the comment on its line)

    @field_validator("lr_scale")
    @classmethod
    def _scales(cls, v: dict[str, float]) -> dict[str, float]:
        bad = {k: f for k, f in v.items() if not f >= 0}
        if bad:
            raise ValueError(f"every LR factor must be >= 0, got {bad}")
        return v


def recipe_param_groups(model: Any, groups: Any, layers: Any, *, lr: float, weight_decay: float
                        ) -> list[dict[str, Any]]:
    """Optimizer groups of ``model``'s trainable parameters as the ``tricks.param_groups`` (``groups``) and
    ``tricks.layer_decay`` (``layers``) sections define them, at the optimizer's ``lr`` and ``weight_decay``
    (each group with ``lr``, ``weight_decay``, ``name`` and ``param_names``); with both off, one group holding
    every trainable parameter at the optimizer's defaults.

    >>> import torch
    >>> from trickbag.recipe import load_recipe
    >>> r = load_recipe("digits", ["tricks.param_groups.enabled=true", "tricks.param_groups.lr_scale={'1.*': 10}"])
    >>> groups = recipe_param_groups(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 1)),
    ...                              r.tricks.param_groups, r.tricks.layer_decay, lr=0.05, weight_decay=5e-4)
    >>> [(g["name"], g["lr"], g["weight_decay"]) for g in groups]
    [('decay', 0.05, 0.0005), ('no_decay', 0.05, 0.0),
     ('lr_scale[1.*]/decay', 0.5, 0.0005), ('lr_scale[1.*]/no_decay', 0.5, 0.0)]
    """
    from trickbag.nn import layer_id_by_depth, param_groups

    pg, ld = groups, layers
    if not (pg.enabled or ld.enabled):
        return [{"params": [p for p in model.parameters() if p.requires_grad]}]
    try:
        return param_groups(
            model,
            lr=lr,
            weight_decay=weight_decay,
            no_decay_bias_norm=pg.no_decay_bias_norm if pg.enabled else False,
            lr_scale=dict(pg.lr_scale) if pg.enabled and pg.lr_scale else None,
            layer_decay=ld.decay if ld.enabled else None,
            layer_id_fn=layer_id_by_depth(model, ld.depth) if ld.enabled else None,
        )
    except ValueError as exc:
        key = "tricks.param_groups" if pg.enabled else "tricks.layer_decay"
        raise RecipeError(f"{key}: {exc}") from None


def base_options(ctx: TrickContext) -> tuple[float, float]:
    """The optimizer's learning rate and weight decay, as the run builds it (the groups' starting values)."""
    from trickbag.plugin.context import optimizer_defaults

    options = optimizer_defaults(ctx.make_optimizer)
    if "lr" not in options:
        raise RecipeError("tricks.param_groups / layer_decay / freeze need the optimizer's learning rate; this run "
                          f"builds its optimizer with {ctx.make_optimizer!r}, whose options cannot be read")
    return float(options["lr"]), float(options.get("weight_decay", 0.0))


class ParamGroupsPlugin(Plugin):
    """Replace ``ctx.param_groups`` by :func:`recipe_param_groups`."""

    name = "param_groups"

    def __init__(self, groups: Any, layers: Any) -> None:
        self.groups, self.layers = groups, layers

    def configure(self, ctx: TrickContext) -> None:
        from trickbag.nn import unwrap

        lr, wd = base_options(ctx)
        ctx.param_groups = recipe_param_groups(unwrap(ctx.model), self.groups, self.layers, lr=lr, weight_decay=wd)
        lrs = sorted({round(float(g["lr"]), 12) for g in ctx.param_groups})
        log.info(f"param groups: {len(ctx.param_groups)} ({', '.join(g['name'] for g in ctx.param_groups)}); "
                 f"learning rates {lrs}")


def build(cfg: ParamGroupsConfig, layer_decay: Any) -> list[Plugin]:
    return [ParamGroupsPlugin(cfg, layer_decay)]


TRICK = Trick(
    name="param_groups",
    joins=("layer_decay",),  # one plug-in builds the groups for both sections
    after=("freeze",),  # groups are made from the parameters freeze leaves trainable
    config=ParamGroupsConfig,
    description="Parameter groups: no weight decay on biases/norms, LR factor per name pattern",
    build=build,
)
