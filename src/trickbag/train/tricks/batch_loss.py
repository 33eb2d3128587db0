"""Recipe tricks on the batch and the loss: cutout, mixup/CutMix, label smoothing, focal, class-balanced,
distillation, L1.

Thin adapters over :mod:`trickbag.data` and :mod:`trickbag.losses`; the math lives there.

* ``cutout`` and ``mix`` replace ``state.batch`` at BATCH_START (cutout first, then mixing), so a
  closure optimizer (SAM) and every LOSS plug-in see the same augmented batch.
* ``label_smoothing``, ``focal`` and ``class_balanced`` each set one field of a single
  :class:`Criterion` that becomes the training loss, in any order.  Label smoothing is applied
  exactly once: by the criterion when ``mix`` is off, folded into the mixed soft targets by
  :class:`~trickbag.data.MixupCutmix` when ``mix`` is on (the criterion then does not smooth).
* ``distillation`` then ``l1`` change ``state.loss`` at LOSS:
  ``loss = alpha * KD(student, teacher; T) + (1 - alpha) * criterion(student, targets) + lambda * sum|w|``;
  the teacher sees the same (mixed) inputs as the student, the hard term uses the (soft) targets.

>>> from trickbag.config import load_recipe
>>> from trickbag.train.tricks import build_tricks
>>> recipe = load_recipe("digits", ["tricks.l1.enabled=true", "tricks.mix.enabled=true", "tricks.cutout.enabled=true"])
>>> [type(p).__name__ for p in build_tricks(recipe)]
['CutoutPlugin', 'MixPlugin', 'L1Plugin']
"""

from __future__ import annotations

import hashlib
import importlib
import re
from pathlib import Path
from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from trickbag.config import Recipe
from trickbag.data import MixupCutmix, cutout
from trickbag.errors import ConflictError, RecipeError, TrickbagError
from trickbag.losses import class_balanced_weights, distillation_loss, focal_loss, l1_penalty, smooth_targets
from trickbag.train.plugin import Plugin
from trickbag.train.state import State
from trickbag.train.tricks import INTERACTION_CHECKS, register_trick

__all__ = [
    "Criterion",
    "CutoutPlugin",
    "MixPlugin",
    "LabelSmoothingPlugin",
    "FocalPlugin",
    "ClassBalancedPlugin",
    "DistillationPlugin",
    "L1Plugin",
    "trick_generator",
    "fork_generator",
]


# --------------------------------------------------------------------------- helpers
def _num_classes(ctx: Any) -> int:
    """Number of model outputs, as :func:`trickbag.train.build.build` decides it."""
    return int(ctx.recipe.model.num_classes or ctx.data.num_classes)


def trick_generator(recipe: Recipe, trick: str, rank: int = 0) -> torch.Generator:
    """A CPU generator seeded from ``(train.seed, trick, rank)``: reproducible, distinct per trick and rank.

    >>> r = Recipe()
    >>> a, b = trick_generator(r, "mix"), trick_generator(r, "mix")
    >>> torch.equal(torch.rand(3, generator=a), torch.rand(3, generator=b))
    True
    >>> trick_generator(r, "mix").initial_seed() != trick_generator(r, "cutout").initial_seed()
    True
    """
    digest = hashlib.sha256(f"{recipe.train.seed}/{trick}/{rank}".encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") & (2**63 - 1))


def fork_generator(generator: torch.Generator, rank: int) -> None:
    """Reseed ``generator`` in place from one draw of its own stream and ``rank`` (rank 0: untouched).

    A checkpoint holds rank 0's generator (rank 0 writes it). After every rank restored it, rank 0
    continues that stream exactly; each rank ``r > 0`` moves to a stream of its own, so resumed ranks
    still draw different masks and partners, and deterministically so.

    >>> g0, g1 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    >>> fork_generator(g0, 0); fork_generator(g1, 1)
    >>> g0.initial_seed() == 5 and g1.initial_seed() != 5
    True
    """
    if rank <= 0:
        return
    base = int(torch.randint(0, 2**62, (1,), generator=generator).item())
    digest = hashlib.sha256(f"{base}/{rank}".encode()).digest()
    generator.manual_seed(int.from_bytes(digest[:8], "little") & (2**63 - 1))


class _GeneratorState:
    """Checkpoint the trick's generator, so a resumed run draws the same masks and partners.

    Under DDP the checkpoint holds rank 0's generator; other ranks fork their own stream from it
    (:func:`fork_generator`) so their augmentations keep differing after a resume.
    """

    generator: torch.Generator
    rank: int = 0

    def state_dict(self) -> dict[str, Any]:
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.generator.set_state(state_dict["generator"])
        fork_generator(self.generator, self.rank)


# --------------------------------------------------------------------------- the training loss
class Criterion:
    """The training loss the loss tricks compose: cross-entropy or focal, class weights, label smoothing.

    ``criterion(logits, target)`` with logits ``[N, C]`` and int labels ``[N]`` or probabilities
    ``[N, C]`` (mixed targets):

    * ``gamma is None``: ``F.cross_entropy(logits, target, weight=weight, label_smoothing=smoothing)``;
    * ``gamma`` set: :func:`~trickbag.losses.focal_loss` with ``gamma``, ``alpha``, ``weight`` on
      ``smooth_targets(target, C, smoothing)`` (Lin et al. 2017 on soft targets).

    Smoothing is ``q = (1 - eps) * target + eps / C`` (Szegedy et al. 2016), for int and soft targets
    alike; the ``mix`` trick sets it to 0 here because it folds it into the mixed targets itself.

    >>> crit = Criterion(3, smoothing=0.1)
    >>> logits, y = torch.tensor([[2.0, 0.0, -1.0]]), torch.tensor([0])
    >>> torch.allclose(crit(logits, y), F.cross_entropy(logits, y, label_smoothing=0.1))
    True
    >>> crit.gamma = 0.0  # focal with gamma 0 is cross-entropy
    >>> torch.allclose(crit(logits, y), F.cross_entropy(logits, y, label_smoothing=0.1))
    True
    """

    def __init__(
        self,
        num_classes: int,
        *,
        smoothing: float = 0.0,
        gamma: Optional[float] = None,
        alpha: Optional[float | Tensor] = None,
        weight: Optional[Tensor] = None,
    ) -> None:
        if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
            raise ValueError(f"num_classes must be an int >= 1, got {num_classes!r}")
        if not 0.0 <= smoothing < 1.0:
            raise ValueError(f"smoothing must be in [0, 1), got {smoothing!r}")
        self.num_classes = num_classes
        self.smoothing = float(smoothing)
        self.gamma = gamma
        self.alpha = alpha
        self.weight = weight

    def __call__(self, logits: Tensor, target: Tensor) -> Tensor:
        if self.gamma is None:
            return F.cross_entropy(logits, target, weight=self.weight, label_smoothing=self.smoothing)
        if self.smoothing > 0:
            target = smooth_targets(target, self.num_classes, self.smoothing).to(logits.device)
        return focal_loss(logits, target, self.gamma, self.alpha, weight=self.weight)

    def __repr__(self) -> str:
        kind = "cross_entropy" if self.gamma is None else f"focal(gamma={self.gamma})"
        return (f"Criterion({kind}, smoothing={self.smoothing}, alpha={'set' if self.alpha is not None else None}, "
                f"weight={'set' if self.weight is not None else None})")


def _criterion(ctx: Any, trick: str) -> Criterion:
    """The run's :class:`Criterion`, created on first use (the loss tricks configure it in any order)."""
    if isinstance(ctx.loss_fn, Criterion):
        return ctx.loss_fn
    if ctx.loss_fn is not F.cross_entropy:
        raise ConflictError(
            f"tricks.{trick} changes the loss, but the loss was already replaced by {ctx.loss_fn!r}; "
            f"turn one of them off"
        )
    ctx.loss_fn = Criterion(_num_classes(ctx))
    return ctx.loss_fn


# --------------------------------------------------------------------------- batch tricks
class CutoutPlugin(_GeneratorState, Plugin):
    """Blank one square per training image at BATCH_START (:func:`trickbag.data.cutout`, DeVries & Taylor 2017)."""

    name = "cutout"

    def __init__(self, size: Optional[int], prob: float) -> None:
        self.size, self.prob = size, prob

    def configure(self, ctx: Any) -> None:
        shape = tuple(ctx.data.input_shape)
        if len(shape) != 3:
            raise RecipeError(
                f"tricks.cutout needs images [C, H, W]; data.name={ctx.recipe.data.name!r} gives samples of "
                f"shape {list(shape)}: turn tricks.cutout off for this data"
            )
        if self.size is None:
            self.size = max(1, min(shape[1:]) // 2)
        self.rank = ctx.dist.rank
        self.generator = trick_generator(ctx.recipe, "cutout", self.rank)
        ctx.notes.append(f"cutout: one {self.size}x{self.size} square per image with probability {self.prob}")

    def on_batch_start(self, state: State) -> None:
        x = state.batch[0]
        out = cutout(x, self.size, generator=self.generator)
        if self.prob < 1.0:
            keep = torch.rand(x.shape[0], generator=self.generator) < self.prob
            out = torch.where(keep.to(x.device).view(-1, 1, 1, 1), out, x)
        state.batch = (out, *state.batch[1:])


class MixPlugin(_GeneratorState, Plugin):
    """Mixup / CutMix per batch at BATCH_START with :class:`trickbag.data.MixupCutmix` (soft targets out)."""

    name = "mix"

    def __init__(self, mixup_alpha: float, cutmix_alpha: float, prob: float, switch_prob: float,
                 smoothing: float) -> None:
        self.kw = dict(mixup_alpha=mixup_alpha, cutmix_alpha=cutmix_alpha, prob=prob, switch_prob=switch_prob)
        self.smoothing = smoothing

    def configure(self, ctx: Any) -> None:
        shape = tuple(ctx.data.input_shape)
        if len(shape) < 2:
            raise RecipeError(
                f"tricks.mix needs samples with a channel dimension ([C, ...]); the data gives shape {list(shape)}"
            )
        if self.kw["cutmix_alpha"] > 0 and len(shape) not in (2, 3):
            raise RecipeError(
                f"tricks.mix.cutmix_alpha={self.kw['cutmix_alpha']} needs images [C, H, W] or signals [C, L]; "
                f"the data gives samples of shape {list(shape)}: set tricks.mix.cutmix_alpha=0 (mixup only)"
            )
        self.rank = ctx.dist.rank
        self.generator = trick_generator(ctx.recipe, "mix", self.rank)
        self.mixer = MixupCutmix(**self.kw, num_classes=_num_classes(ctx), smoothing=self.smoothing,
                                 generator=self.generator)
        if self.smoothing:
            ctx.notes.append(f"label smoothing {self.smoothing} is folded into the mixed targets (applied once)")

    def on_batch_start(self, state: State) -> None:
        xm, ym = self.mixer(state.batch[0], state.batch[1])
        state.batch = (xm, ym, *state.batch[2:])


# --------------------------------------------------------------------------- loss tricks
class LabelSmoothingPlugin(Plugin):
    """Label smoothing in the training loss, unless ``mix`` folds it into its targets."""

    def __init__(self, eps: float, folded_into_mix: bool) -> None:
        self.eps, self.folded = eps, folded_into_mix

    def configure(self, ctx: Any) -> None:
        _criterion(ctx, "label_smoothing").smoothing = 0.0 if self.folded else self.eps


class FocalPlugin(Plugin):
    """Softmax focal loss as the training loss (Lin et al. 2017)."""

    def __init__(self, gamma: float, alpha: Optional[float | list[float]]) -> None:
        self.gamma, self.alpha = gamma, alpha

    def configure(self, ctx: Any) -> None:
        c = _num_classes(ctx)
        alpha: Optional[float | Tensor] = None
        if isinstance(self.alpha, list):
            if len(self.alpha) != c:
                raise RecipeError(
                    f"tricks.focal.alpha has {len(self.alpha)} values but the model has {c} classes; "
                    f"give one factor per class"
                )
            alpha = torch.tensor(self.alpha, dtype=torch.float32, device=ctx.device)
        elif self.alpha is not None:
            if c != 2:
                raise RecipeError(
                    f"tricks.focal.alpha={self.alpha} (a single value) is the binary convention and needs 2 classes, "
                    f"the model has {c}; give a list of {c} per-class factors"
                )
            alpha = float(self.alpha)
        crit = _criterion(ctx, "focal")
        crit.gamma, crit.alpha = self.gamma, alpha


class ClassBalancedPlugin(Plugin):
    """Per-class loss weights from the training set's class counts (Cui et al. 2019); focal takes them too."""

    def __init__(self, beta: float) -> None:
        self.beta = beta

    def configure(self, ctx: Any) -> None:
        counts = list(ctx.data.class_counts)
        c = _num_classes(ctx)
        if len(counts) != c:
            raise RecipeError(
                f"tricks.class_balanced needs a training count for each of the model's {c} classes, the data has "
                f"{len(counts)} (model.num_classes={ctx.recipe.model.num_classes}); leave model.num_classes unset"
            )
        try:
            weight = class_balanced_weights(counts, self.beta)
        except ValueError as exc:
            raise RecipeError(f"tricks.class_balanced: {exc}") from None
        _criterion(ctx, "class_balanced").weight = weight.to(ctx.device)
        ctx.notes.append("class-balanced weights: " + ", ".join(f"{w:.3g}" for w in weight.tolist()))


_CALLABLE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def load_teacher(spec: str) -> torch.nn.Module:
    """The teacher named by ``tricks.distillation.teacher``: a run checkpoint or ``package.module:function``.

    A checkpoint is loaded with ``weights_only=True``; the recipe stored inside it builds the network
    and its evaluated weights (EMA/SWA if the run had them) are loaded.  A function is called with no
    arguments and must return the trained ``nn.Module``.
    """
    path = Path(spec)
    if path.is_file() or not _CALLABLE.match(spec):
        if not path.exists():
            raise RecipeError(
                f"tricks.distillation.teacher={spec!r} does not exist; give a trickbag run checkpoint "
                "(e.g. runs/NAME/checkpoints/best.pt) or package.module:function"
            )
        from trickbag.train.run import _model_from_checkpoint

        try:
            return _model_from_checkpoint(path)[1]
        except TrickbagError as exc:
            raise type(exc)(f"tricks.distillation.teacher: {exc}") from None
    mod_name, fn_name = spec.split(":")
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as exc:
        raise RecipeError(f"tricks.distillation.teacher={spec!r}: cannot import {mod_name!r} ({exc})") from None
    fn = getattr(mod, fn_name, None)
    if not callable(fn):
        raise RecipeError(f"tricks.distillation.teacher={spec!r}: {mod_name!r} has no callable {fn_name!r}")
    teacher = fn()
    if not isinstance(teacher, torch.nn.Module):
        raise RecipeError(
            f"tricks.distillation.teacher={spec!r} returned {type(teacher).__name__}, not a torch.nn.Module"
        )
    return teacher


class DistillationPlugin(Plugin):
    """Knowledge distillation at LOSS (Hinton et al. 2015): ``alpha * KD + (1 - alpha) * loss``.

    The teacher runs in eval mode under ``torch.no_grad()`` on the device, on the batch the
    student sees (mixed inputs when ``mix`` is on); it is not trained and not checkpointed.
    """

    def __init__(self, teacher: str, temperature: float, alpha: float) -> None:
        self.spec, self.temperature, self.alpha = teacher, temperature, alpha
        self.teacher: Optional[torch.nn.Module] = None

    def configure(self, ctx: Any) -> None:
        teacher = load_teacher(self.spec).to(ctx.device).eval().requires_grad_(False)
        with torch.no_grad():
            out = teacher(torch.zeros((2, *ctx.data.input_shape), device=ctx.device))
        c = _num_classes(ctx)
        if out.dim() != 2 or out.shape[1] != c:
            raise ConflictError(
                f"tricks.distillation.teacher={self.spec!r} predicts {list(out.shape[1:])} outputs but the student "
                f"has {c} classes; distil from a teacher trained on the same classes"
            )
        self.teacher = teacher
        ctx.notes.append(f"distillation from {self.spec} (T={self.temperature}, alpha={self.alpha})")

    def on_fit_start(self, state: State) -> None:
        self.teacher.eval()

    def on_loss(self, state: State) -> None:
        with torch.no_grad():
            teacher_logits = self.teacher(state.batch[0])
        soft = distillation_loss(state.output.float(), teacher_logits.float(), self.temperature)
        state.loss = self.alpha * soft + (1.0 - self.alpha) * state.loss


class L1Plugin(Plugin):
    """Add ``weight * sum |w|`` over the trainable parameters to the loss (:func:`~trickbag.losses.l1_penalty`)."""

    def __init__(self, weight: float) -> None:
        self.weight = weight

    def on_loss(self, state: State) -> None:
        params = [p for p in state.model.parameters() if p.requires_grad]
        state.loss = state.loss + self.weight * l1_penalty(params)


# --------------------------------------------------------------------------- registry
@register_trick("cutout", "Cutout: blank one random square per training image (DeVries & Taylor 2017)")
def _cutout(cfg: Any, recipe: Recipe) -> list[Plugin]:
    return [CutoutPlugin(cfg.size, cfg.prob)]


@register_trick("mix", "Mixup / CutMix per batch, with a switch between them; soft targets (Zhang 2018, Yun 2019)")
def _mix(cfg: Any, recipe: Recipe) -> list[Plugin]:
    if cfg.mixup_alpha == 0 and cfg.cutmix_alpha == 0:
        raise RecipeError(
            "tricks.mix is enabled but tricks.mix.mixup_alpha and tricks.mix.cutmix_alpha are both 0; "
            "set one of them > 0 (e.g. mixup_alpha=0.2) or turn tricks.mix off"
        )
    ls = recipe.tricks.label_smoothing
    return [MixPlugin(cfg.mixup_alpha, cfg.cutmix_alpha, cfg.prob, cfg.switch_prob, ls.eps if ls.enabled else 0.0)]


@register_trick("label_smoothing", "Label smoothing: (1 - eps) * onehot + eps / C targets, applied once (Szegedy 2016)")
def _label_smoothing(cfg: Any, recipe: Recipe) -> list[Plugin]:
    return [LabelSmoothingPlugin(cfg.eps, folded_into_mix=recipe.tricks.mix.enabled)]


@register_trick("focal", "Focal loss: down-weight easy examples by (1 - p)^gamma (Lin et al. 2017)")
def _focal(cfg: Any, recipe: Recipe) -> list[Plugin]:
    return [FocalPlugin(cfg.gamma, cfg.alpha)]


@register_trick("class_balanced", "Class-balanced loss weights from training-set class counts (Cui et al. 2019)")
def _class_balanced(cfg: Any, recipe: Recipe) -> list[Plugin]:
    return [ClassBalancedPlugin(cfg.beta)]


@register_trick("distillation", "Knowledge distillation from a teacher checkpoint or function (Hinton et al. 2015)")
def _distillation(cfg: Any, recipe: Recipe) -> list[Plugin]:
    if not cfg.teacher:
        raise RecipeError(
            "tricks.distillation is enabled but tricks.distillation.teacher is not set; give a run checkpoint "
            "(runs/NAME/checkpoints/best.pt) or package.module:function"
        )
    return [DistillationPlugin(cfg.teacher, cfg.temperature, cfg.alpha)]


@register_trick("l1", "L1 penalty: add weight * sum |w| over trainable parameters to the loss")
def _l1(cfg: Any, recipe: Recipe) -> list[Plugin]:
    return [L1Plugin(cfg.weight)]


def _check_mix_monitor(recipe: Recipe) -> None:
    """Training accuracy is undefined on mixed targets, so it cannot be monitored."""
    if recipe.tricks.mix.enabled and recipe.train.monitor == "train/acc":
        raise ConflictError(
            "train.monitor=train/acc is never reported with tricks.mix (accuracy is undefined on mixed targets); "
            "monitor val/acc or train/loss"
        )


INTERACTION_CHECKS.append(_check_mix_monitor)
