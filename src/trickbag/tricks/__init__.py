"""Recipe tricks, one module per trick (config section, plug-in, interaction rules, eval effect), and their registry.

Adding a trick: write the library function (if new), one module here ending in ``TRICK = Trick(...)``
(see :mod:`trickbag.tricks.cutout` for a small one), add it to :data:`MODULES`, and one test
file. The recipe's ``tricks`` section (:class:`TricksConfig`), ``trickbag tricks`` and the
interaction checks are generated from :data:`TRICKS`; the trainer and the run path name no trick.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import Field, create_model

from trickbag.config import Section
from trickbag.errors import ConflictError
from trickbag.plugin.interface import Plugin
from trickbag.tricks import (
    augment,
    channels_last,
    class_balanced,
    clip,
    cutout,
    distillation,
    drop_path,
    ema,
    focal,
    freeze,
    grad_norm,
    l1,
    label_smoothing,
    layer_decay,
    logit_adjust,
    mix,
    multiscale,
    param_groups,
    profile,
    random_erasing,
    resample,
    robust_loss,
    sam,
    swa,
    tta,
)
from trickbag.tricks import compile as compile_
from trickbag.tricks.base import Trick

if TYPE_CHECKING:
    from trickbag.plugin.interface import RecipeView

__all__ = ["MODULES", "TRICKS", "run_order", "TricksConfig", "Trick", "build_tricks", "check_interactions",
           "eval_wrappers", "describe_tricks", "build_sections"]

#: the trick modules; the order their plug-ins run in is :func:`run_order` of it: each trick's ``after`` and
#: ``last``, and where those leave a choice, this order
MODULES = (
    augment,  # build time: the policy goes into the training images' pipeline
    cutout, random_erasing, mix, label_smoothing, focal, robust_loss, class_balanced, logit_adjust,  # batch, loss
    resample,  # build time: the training sampler's weights
    distillation, l1,
    grad_norm, clip, sam,  # gradients and the optimizer
    freeze, param_groups, layer_decay, multiscale, channels_last, drop_path, compile_,  # the model and its parameters
    tta,  # evaluation
    ema, swa,  # weight averaging
    profile,
)

def run_order(tricks: Sequence[Trick]) -> list[Trick]:
    """``tricks`` ordered so that every trick follows the ones it names in ``after`` and ``last`` ones come last;
    among tricks free to go, the earliest in ``tricks`` goes first. A circle of constraints is an error.

    >>> import dataclasses
    >>> a, b, c = (Trick(name=n, config=None, description="", build=None) for n in "abc")  # type: ignore[arg-type]
    >>> [t.name for t in run_order([dataclasses.replace(a, after=("c",)), b, c])]
    ['b', 'c', 'a']
    """
    names = {t.name for t in tricks}
    unknown = sorted({f"{t.name} -> {n}" for t in tricks for n in t.after if n not in names})
    if unknown:
        raise ValueError(f"trick ordering names unknown tricks: {', '.join(unknown)}")
    last = [t.name for t in tricks if t.last]
    needs = {t.name: set(t.after) | (set(names) - set(last) if t.last else set()) for t in tricks}
    out: list[Trick] = []
    left = list(tricks)
    while left:
        free = next((t for t in left if not (needs[t.name] - {o.name for o in out})), None)
        if free is None:
            raise ValueError(f"trick ordering has a circle among: {', '.join(t.name for t in left)}")
        out.append(free)
        left.remove(free)
    return out


#: the tricks by recipe key, in the order their plug-ins run
TRICKS: dict[str, Trick] = {t.name: t for t in run_order([m.TRICK for m in MODULES])}

TricksConfig = create_model(
    "TricksConfig",
    __base__=Section,
    __doc__="Training tricks switched on from the recipe (see ``trickbag tricks``).",
    **{name: (t.config, Field(default_factory=t.config)) for name, t in TRICKS.items()},  # type: ignore[call-overload]
)


def _enabled(recipe: RecipeView) -> list[tuple[Trick, Any]]:
    out = []
    for name, trick in TRICKS.items():
        cfg = getattr(recipe.tricks, name)
        if cfg.enabled:
            out.append((trick, cfg))
    return out


def check_interactions(recipe: RecipeView) -> None:
    """Raise a one-line :class:`~trickbag.errors.RecipeError` for refused combinations and tasks."""
    task = recipe.task.type
    for trick, _ in _enabled(recipe):
        if task not in trick.tasks:
            raise ConflictError(f"tricks.{trick.name} does not apply to task.type={task}: {trick.why}; "
                                f"turn tricks.{trick.name} off")
    dist = getattr(recipe, "dist", None)
    if dist is not None and dist.strategy == "fsdp":
        for trick, _ in _enabled(recipe):
            if trick.unsharded:
                raise ConflictError(f"tricks.{trick.name} is refused with dist.strategy=fsdp: {trick.unsharded}; "
                                    f"turn it off, or use dist.strategy=ddp")
    for trick in TRICKS.values():
        for check in trick.checks:
            check(recipe)


def build_tricks(recipe: RecipeView) -> list[Plugin]:
    """Plug-ins for the tricks enabled in ``recipe.tricks``, in :data:`TRICKS` (run) order (checks first).

    >>> from trickbag.recipe import load_recipe
    >>> on = ["tricks.l1.enabled=true", "tricks.mix.enabled=true", "tricks.cutout.enabled=true"]
    >>> recipe = load_recipe("digits", on)
    >>> [type(p).__name__ for p in build_tricks(recipe)]
    ['CutoutPlugin', 'MixPlugin', 'L1Plugin']
    """
    check_interactions(recipe)
    return build_sections(recipe.tricks)


def build_sections(tricks: Any) -> list[Plugin]:
    """Plug-ins for the enabled sections of a ``tricks`` section, in :data:`TRICKS` (run) order, with no checks:
    each trick's ``build`` receives its own section and the ones it names in ``Trick.joins``, nothing else."""
    plugins: list[Plugin] = []
    for name, trick in TRICKS.items():
        cfg = getattr(tricks, name)
        if cfg.enabled:
            plugins += trick.build(cfg, **{other: getattr(tricks, other) for other in trick.joins})
    return plugins


def eval_wrappers(recipe: RecipeView, input_shape: tuple[int, ...]) -> list[tuple[str, Callable[[Any], Any]]]:
    """``(phrase, wrap)`` for every enabled trick that changes how a trained model predicts, in plug-in
    order: ``trickbag eval`` / ``predict`` wrap the model's forward with them, as the run's own
    evaluation did (flip TTA, the multi-scale test size)."""
    out = []
    for trick, cfg in _enabled(recipe):
        wrap = trick.eval_wrapper(cfg, input_shape) if trick.eval_wrapper else None
        if wrap is not None:
            out.append((trick.describe_eval(cfg) if trick.describe_eval else trick.name, wrap))
    return out


def _default(field: Any) -> str:
    value = field.get_default(call_default_factory=True)
    return "null" if value is None else repr(value)


def describe_tricks(name: str | None = None) -> str:
    """One block per trick: name, what it does, and its recipe keys with defaults."""
    lines = []
    for key, trick in TRICKS.items():
        if name is not None and key != name:
            continue
        lines.append(f"{key:18s} {trick.description}")
        keys = [f"tricks.{key}.{k}={_default(f)}" for k, f in trick.config.model_fields.items() if k != "enabled"]
        lines.append(" " * 19 + "  ".join([f"tricks.{key}.enabled=true"] + keys))
    return "\n".join(lines)
