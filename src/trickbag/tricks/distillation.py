"""Knowledge distillation from a teacher network at LOSS (Hinton et al. 2015), and from its intermediate
features (FitNets, Romero et al. 2015).

``loss = alpha * KD(student, teacher; T) + (1 - alpha) * loss + feature_weight * sum_k MSE(P_k(s_k), t_k)``: the
teacher runs in eval mode under ``torch.no_grad()`` on the batch the student sees (mixed inputs when ``mix`` is
on); it is not trained and not checkpointed. ``s_k`` / ``t_k`` are the outputs of the student / teacher modules
named in ``features``, ``P_k`` a learned projection (a bias-free 1x1 convolution, or a linear map for flat
features) trained with the student and kept in checkpoints.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator

from trickbag.config import TrickSection
from trickbag.config.schema import expand_home
from trickbag.errors import ConflictError, RecipeError
from trickbag.plugin.context import log, sample_shape
from trickbag.plugin.interface import Plugin
from trickbag.tricks._loss import CLASSIFICATION_ONLY
from trickbag.tricks.base import Trick

if TYPE_CHECKING:
    from trickbag.plugin.context import TrickContext
    from trickbag.plugin.interface import RecipeView
    from trickbag.plugin.state import State


class DistillationConfig(TrickSection):
    """Knowledge distillation from a teacher network (Hinton et al. 2015)."""

    teacher: str | None = None  # a trickbag run checkpoint (.pt) or 'package.module:function' returning the teacher

    @field_validator("teacher")
    @classmethod
    def _teacher_home(cls, v: str | None) -> str | None:
        return expand_home(v)
    temperature: float = Field(4.0, gt=0.0)  # softmax temperature T of both networks (paper: 1-20)
    alpha: float = Field(0.5, ge=0.0, le=1.0)  # weight of the distillation term; 1 - alpha on the usual loss
    features: list[str] = Field(default_factory=list)  # feature distillation: 'student_module=teacher_module' pairs, matched through a learned projection  # noqa: E501 (a key's help is the comment on its line)
    feature_weight: float = Field(1.0, ge=0.0)  # weight of the feature term (mean squared error per pair, summed)


class DistillationPlugin(Plugin):
    """Add :func:`trickbag.losses.distillation_loss` against the teacher's logits at LOSS."""

    name = "distillation"

    def __init__(self, teacher: str, temperature: float, alpha: float, features: list[str] | None = None,
                 feature_weight: float = 1.0) -> None:
        self.spec, self.temperature, self.alpha = teacher, temperature, alpha
        self.pairs = [_pair(f) for f in features or []]
        self.feature_weight, self.seed = feature_weight, 0
        self.teacher: Any = None
        self.projections: Any = None  # torch.nn.ModuleList, one per pair
        self._seen: dict[str, Any] = {}

    def configure(self, ctx: TrickContext) -> None:
        import torch

        from trickbag.nn import device_of

        self.seed = ctx.seed
        try:
            teacher = ctx.load_model(self.spec)
        except RecipeError as exc:
            raise type(exc)(f"tricks.distillation.teacher: {exc}") from None
        device = device_of(ctx.model)
        teacher = teacher.to(device).eval().requires_grad_(False)
        with torch.no_grad():
            out = teacher(torch.zeros((2, *sample_shape(ctx.train_set)), device=device))
        if out.dim() != 2 or out.shape[1] != ctx.num_outputs:
            raise ConflictError(
                f"tricks.distillation.teacher={self.spec!r} predicts {list(out.shape[1:])} outputs but the student "
                f"has {ctx.num_outputs} classes; distil from a teacher trained on the same classes"
            )
        self.teacher = teacher
        log.info(f"distillation from {self.spec} (T={self.temperature}, alpha={self.alpha})")
        if self.pairs:
            self._set_up_features(ctx)

    def _set_up_features(self, ctx: TrickContext) -> None:
        """Hooks on the named modules, their output shapes probed, and the projections made and trained."""
        import torch

        from trickbag.nn import device_of, unwrap

        student, device = unwrap(ctx.model), device_of(ctx.model)
        for side, net, names in (("student", student, [s for s, _ in self.pairs]),
                                 ("teacher", self.teacher, [t for _, t in self.pairs])):
            modules = dict(net.named_modules())
            for k, name in enumerate(names):
                if name not in modules:
                    raise RecipeError(f"tricks.distillation.features: the {side} has no module {name!r}; its "
                                      f"modules: {', '.join(n for n in list(modules)[1:12] if n)} ...")
                modules[name].register_forward_hook(self._keep(f"{side}{k}", side == "student"))
        was = student.training
        with torch.no_grad():
            probe = torch.zeros((2, *sample_shape(ctx.train_set)), device=device)
            student.eval()(probe)
            self.teacher(probe)
        student.train(was)
        projections = [_projection(self._seen[f"student{k}"], self._seen[f"teacher{k}"], self.pairs[k], self.seed)
                       for k in range(len(self.pairs))]
        self.projections = torch.nn.ModuleList(projections).to(device)
        # a new list: a hand-built Trainer then rebuilds its optimizer with the projections in it
        ctx.param_groups = [*ctx.param_groups, {"params": list(self.projections.parameters())}]
        log.info(f"feature distillation: {', '.join(f'{s}={t}' for s, t in self.pairs)} "
                         f"(weight {self.feature_weight}, {sum(p.numel() for p in self.projections.parameters()):,}"
                         f" projection weights)")

    def _keep(self, key: str, student: bool) -> Any:
        def hook(module: Any, args: Any, output: Any) -> None:
            if not student or module.training or key not in self._seen:  # the probe, training, the teacher
                self._seen[key] = output
        return hook

    def on_fit_start(self, state: State) -> None:
        self.teacher.eval()

    def on_loss(self, state: State) -> None:
        import torch

        from trickbag.losses import distillation_loss

        assert state.output is not None and state.loss is not None  # the trainer computes them before LOSS
        with torch.no_grad():
            teacher_logits = self.teacher(state.batch[0])
        soft = distillation_loss(state.output.float(), teacher_logits.float(), self.temperature)
        state.loss = self.alpha * soft + (1.0 - self.alpha) * state.loss
        if self.pairs:
            feature = sum(torch.nn.functional.mse_loss(proj(self._seen[f"student{k}"]).float(),
                                                      self._seen[f"teacher{k}"].float())
                          for k, proj in enumerate(self.projections))
            state.loss = state.loss + self.feature_weight * feature

    def state_dict(self) -> dict[str, Any] | None:
        return {"projections": self.projections.state_dict()} if self.projections is not None else None

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if self.projections is not None and "projections" in state_dict:
            self.projections.load_state_dict(state_dict["projections"])


def _pair(spec: str) -> tuple[str, str]:
    student, sep, teacher = spec.partition("=")
    if not sep or not student.strip() or not teacher.strip():
        raise RecipeError(f"tricks.distillation.features: {spec!r} is not 'student_module=teacher_module' "
                          "(e.g. features.3=features.3)")
    return student.strip(), teacher.strip()


def _projection(s: Any, t: Any, pair: tuple[str, str], seed: int) -> Any:
    """A bias-free map from the student's feature to the teacher's: 1x1 convolution ([N, C, ...]) or linear
    ([N, F]); its initial weights from ``seed`` without touching the run's random state."""
    import torch

    if s.dim() != t.dim() or s.shape[2:] != t.shape[2:]:
        raise RecipeError(f"tricks.distillation.features: {pair[0]}={pair[1]} gives student {list(s.shape[1:])} "
                          f"and teacher {list(t.shape[1:])}; pick layers with the same spatial size")
    conv = {3: torch.nn.Conv1d, 4: torch.nn.Conv2d, 5: torch.nn.Conv3d}.get(s.dim())
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if conv is not None:
            return conv(s.shape[1], t.shape[1], 1, bias=False)
        return torch.nn.Linear(s.shape[1], t.shape[1], bias=False)


def build(cfg: DistillationConfig) -> list[Plugin]:
    return [DistillationPlugin(str(cfg.teacher), cfg.temperature, cfg.alpha, cfg.features, cfg.feature_weight)]


def check(recipe: RecipeView) -> None:
    cfg = recipe.tricks.distillation
    if cfg.enabled and not cfg.teacher:
        raise RecipeError(
            "tricks.distillation is enabled but tricks.distillation.teacher is not set; give a run checkpoint "
            "(runs/NAME/checkpoints/best.pt) or package.module:function"
        )
    dist = getattr(recipe, "dist", None)  # not a RecipeView section (check_interactions reads it the same way)
    if cfg.enabled and cfg.features and dist is not None and dist.nproc > 1:
        raise ConflictError("tricks.distillation.features is not supported with several processes yet (the "
                            "projections are outside the DDP model); use the logit distillation alone")


TRICK = Trick(
    name="distillation",
    config=DistillationConfig,
    description="Knowledge distillation from a teacher checkpoint or function (Hinton et al. 2015)",
    build=build,
    checks=(check,),
    tasks=CLASSIFICATION_ONLY,
    why="it matches the teacher's softened class probabilities",
    unsharded="the teacher (and the feature projections) would sit outside the sharded model, whole on every process",
)
