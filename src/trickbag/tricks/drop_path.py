"""Drop path / stochastic depth (Huang et al. 2016): drop residual branches per sample while training.

The drops are forward hooks put on the model at build time (:func:`trickbag.nn.add_drop_path`): the
state-dict keys stay those of the plain model, so checkpoints, ``model.weights``, ``eval``/``predict`` and
``export`` see the plain network, which is what evaluation runs (the hooks do nothing in ``eval()``).
The masks come from the trick's own checkpointed generator: a resumed run drops the same branches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator

from trickbag.config import TrickSection
from trickbag.errors import RecipeError
from trickbag.plugin.context import log, sample_shape
from trickbag.plugin.interface import Plugin
from trickbag.tricks.base import GeneratorState, Trick

if TYPE_CHECKING:
    from trickbag.plugin.context import TrickContext


class DropPathConfig(TrickSection):
    """Drop path / stochastic depth (Huang et al. 2016) on the residual blocks of the model."""

    rate: float = Field(0.1, gt=0.0, lt=1.0)  # drop probability of the deepest block (timm's drop_path_rate; DeiT: 0.1)
    mode: Literal["row", "batch"] = "row"  # row: each sample on its own; batch: the whole batch at once (torchvision)
    schedule: Literal["linear", "uniform"] = "linear"  # linear: block i of n drops rate*i/(n-1) (timm); uniform: rate
    blocks: list[str] = Field(default_factory=list)  # residual block class names; []: torchvision ResNet blocks  # noqa: E501 (a key's help is the comment on its line)

    @field_validator("blocks")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        bad = [b for b in v if not b.isidentifier()]
        if bad:
            raise ValueError(f"block class names must be Python identifiers (e.g. BasicBlock), got {bad}")
        return v


def _no_blocks(model: Any, blocks: list[str]) -> str:
    """The one-line refusal for a model with no block to drop."""
    from torchvision.ops import StochasticDepth

    name = type(model).__name__
    if any(isinstance(m, StochasticDepth) for m in model.modules()):
        return (f"tricks.drop_path: model {name} has stochastic depth of its own (torchvision StochasticDepth): "
                "set model.kwargs.stochastic_depth_prob instead and turn tricks.drop_path off")
    if blocks:
        classes = sorted({type(m).__name__ for m in model.modules()} - {name})
        return (f"tricks.drop_path.blocks={blocks} names no module class of model {name}; its classes are: "
                f"{', '.join(classes[:12])}{', ...' if len(classes) > 12 else ''}")
    return (f"tricks.drop_path: model {name} has no residual blocks to drop (torchvision BasicBlock / Bottleneck); "
            "name your blocks (x + branch(x)) in tricks.drop_path.blocks=[ClassName], or turn tricks.drop_path off")


def _probe(ctx: TrickContext, model: Any, named: list[tuple[str, Any]]) -> None:
    """One evaluation-mode forward on zeros: every named block must return its input's shape (x + branch(x))."""
    import torch

    from trickbag.nn import device_of

    bad: list[str] = []

    def record(name: str) -> Any:
        def hook(module: Any, args: Any, output: Any) -> None:
            x = args[0] if args else None
            same = isinstance(x, torch.Tensor) and isinstance(output, torch.Tensor) and x.shape == output.shape
            if not same and not bad:
                got = list(output.shape) if isinstance(output, torch.Tensor) else type(output).__name__
                bad.append(f"{name} ({type(module).__name__}) returns {got} for an input "
                           f"{list(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__}")
        return hook

    handles = [m.register_forward_hook(record(n)) for n, m in named]
    was = model.training
    try:
        with torch.no_grad():
            model.eval()(torch.zeros((2, *sample_shape(ctx.train_set)), device=device_of(model)))
    finally:
        model.train(was)
        for h in handles:
            h.remove()
    if bad:
        raise RecipeError(f"tricks.drop_path.blocks: block {bad[0]}; a named block must return input + "
                          "branch(input), of the input's shape: name the residual blocks, not other modules")


class DropPathPlugin(GeneratorState, Plugin):
    """:func:`trickbag.nn.add_drop_path` on the model at build time, with the trick's own generator."""

    name = "drop_path"

    def __init__(self, cfg: DropPathConfig) -> None:
        self.cfg = cfg
        self.hooks: Any = None

    def configure(self, ctx: TrickContext) -> None:
        from trickbag.nn import add_drop_path, unwrap
        from trickbag.nn.drop_path import residual_blocks
        from trickbag.runtime import trick_generator

        c, model = self.cfg, unwrap(ctx.model)
        blocks = list(c.blocks) or None
        found = residual_blocks(model, blocks)
        if not found:
            raise RecipeError(_no_blocks(model, list(c.blocks)))
        from torchvision.models.resnet import BasicBlock, Bottleneck

        named = [(n, m) for n, m in found if not isinstance(m, (BasicBlock, Bottleneck))]
        if named:
            _probe(ctx, model, named)
        self.rank = ctx.rank
        self.generator = trick_generator(ctx.seed, "drop_path", self.rank)
        self.hooks = add_drop_path(model, c.rate, mode=c.mode, schedule=c.schedule, blocks=blocks,
                                   generator=self.generator)
        rates = list(self.hooks.rates.values())
        log.info(f"drop_path: {len(rates)} blocks ({', '.join(sorted({type(m).__name__ for _, m in found}))}) "
                         f"drop their branch with rate {rates[0]:.3g}..{rates[-1]:.3g} ({c.schedule} by depth, "
                         f"mode {c.mode}); evaluation runs the whole network")


def build(cfg: DropPathConfig) -> list[Plugin]:
    return [DropPathPlugin(cfg)]


TRICK = Trick(
    name="drop_path",
    config=DropPathConfig,
    description="Drop path / stochastic depth: drop residual branches per sample, rate linear in depth (Huang 2016)",
    build=build,
)
