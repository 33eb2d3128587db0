"""Knowledge distillation from a teacher network at LOSS (Hinton et al. 2015).

``loss = alpha * KD(student, teacher; T) + (1 - alpha) * loss``; the teacher runs in eval mode under
``torch.no_grad()`` on the batch the student sees (mixed inputs when ``mix`` is on); it is not
trained and not checkpointed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator

from trickbag.config import TrickSection
from trickbag.config.schema import expand_home
from trickbag.errors import ConflictError, RecipeError
from trickbag.train.plugin import Plugin
from trickbag.train.tricks._loss import CLASSIFICATION_ONLY
from trickbag.train.tricks.base import Trick

if TYPE_CHECKING:
    from trickbag.train.plugin import BuildContext, RecipeView
    from trickbag.train.state import State


class DistillationConfig(TrickSection):
    """Knowledge distillation from a teacher network (Hinton et al. 2015)."""

    teacher: str | None = None  # a trickbag run checkpoint (.pt) or 'package.module:function' returning the teacher

    @field_validator("teacher")
    @classmethod
    def _teacher_home(cls, v: str | None) -> str | None:
        return expand_home(v)
    temperature: float = Field(4.0, gt=0.0)  # softmax temperature T of both networks (paper: 1-20)
    alpha: float = Field(0.5, ge=0.0, le=1.0)  # weight of the distillation term; 1 - alpha on the usual loss


class DistillationPlugin(Plugin):
    """Add :func:`trickbag.losses.distillation_loss` against the teacher's logits at LOSS."""

    name = "distillation"

    def __init__(self, teacher: str, temperature: float, alpha: float) -> None:
        self.spec, self.temperature, self.alpha = teacher, temperature, alpha
        self.teacher: Any = None

    def configure(self, ctx: BuildContext) -> None:
        import torch

        try:
            teacher = ctx.load_model(self.spec)
        except RecipeError as exc:
            raise type(exc)(f"tricks.distillation.teacher: {exc}") from None
        teacher = teacher.to(ctx.device).eval().requires_grad_(False)
        with torch.no_grad():
            out = teacher(torch.zeros((2, *ctx.data.input_shape), device=ctx.device))
        if out.dim() != 2 or out.shape[1] != ctx.num_outputs:
            raise ConflictError(
                f"tricks.distillation.teacher={self.spec!r} predicts {list(out.shape[1:])} outputs but the student "
                f"has {ctx.num_outputs} classes; distil from a teacher trained on the same classes"
            )
        self.teacher = teacher
        ctx.notes.append(f"distillation from {self.spec} (T={self.temperature}, alpha={self.alpha})")

    def on_fit_start(self, state: State) -> None:
        self.teacher.eval()

    def on_loss(self, state: State) -> None:
        import torch

        from trickbag.losses import distillation_loss

        with torch.no_grad():
            teacher_logits = self.teacher(state.batch[0])
        soft = distillation_loss(state.output.float(), teacher_logits.float(), self.temperature)
        state.loss = self.alpha * soft + (1.0 - self.alpha) * state.loss


def build(cfg: DistillationConfig, recipe: RecipeView) -> list[Plugin]:
    return [DistillationPlugin(str(cfg.teacher), cfg.temperature, cfg.alpha)]


def check(recipe: RecipeView) -> None:
    cfg = recipe.tricks.distillation
    if cfg.enabled and not cfg.teacher:
        raise RecipeError(
            "tricks.distillation is enabled but tricks.distillation.teacher is not set; give a run checkpoint "
            "(runs/NAME/checkpoints/best.pt) or package.module:function"
        )


TRICK = Trick(
    name="distillation",
    config=DistillationConfig,
    description="Knowledge distillation from a teacher checkpoint or function (Hinton et al. 2015)",
    build=build,
    checks=(check,),
    tasks=CLASSIFICATION_ONLY,
    why="it matches the teacher's softened class probabilities",
)
