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
