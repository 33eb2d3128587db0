"""The classification loss the loss tricks (label smoothing, focal, class-balanced) compose together."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trickbag.plugin.context import TrickContext

CLASSIFICATION_ONLY = ("classification",)


def classification_loss(ctx: TrickContext, trick: str) -> Any:
    """The run's :class:`trickbag.losses.ClassificationLoss`, made on first use from the task's
    cross-entropy (the loss tricks set its fields in any order)."""
    from trickbag.losses import ClassificationLoss

    if isinstance(ctx.loss_fn, ClassificationLoss):
        return ctx.loss_fn
    ctx.loss_fn = ClassificationLoss(ctx.num_outputs or None)  # (0: unknown, the logits' width at each call)
    return ctx.loss_fn


def training_counts(ctx: TrickContext, trick: str, instead: str) -> list[int]:
    """The training split's class counts, one per output of the model, for a trick built from them
    (``class_balanced``, ``logit_adjust``); a one-line :class:`~trickbag.errors.RecipeError` naming the trick
    when the data gives none (``instead``: what to do by hand) or the model's width differs."""
    from trickbag.errors import RecipeError

    if ctx.class_counts is None:
        raise RecipeError(f"tricks.{trick} needs the training set's class counts, which this trainer's data does not "
                          f"give; use a recipe data source or {instead}")
    counts, c = list(ctx.class_counts), ctx.num_outputs
    if len(counts) != c:
        raise RecipeError(f"tricks.{trick} needs a training count for each of the model's {c} classes, the data has "
                          f"{len(counts)}; leave model.num_classes unset")
    return counts
