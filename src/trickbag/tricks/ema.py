"""EMA of the weights (Polyak averaging): evaluation, best.pt and the final model use the averaged weights.

While ``fit`` runs the averaged weights are swapped into the model for every evaluation (the raw
ones are evaluated too and reported as ``val/<metric>_raw``); every checkpoint stores them as
``eval_model`` (``trickbag eval``/``predict`` and the final test use it) and the averager's state
under ``ema``; at FIT_END they are copied into the model for good.

``select`` chooses which weights are kept: ``ema`` (the default, above), ``raw`` (the average is
evaluated and reported, the raw weights are kept) or ``best`` (at each evaluation, whichever of the
two has the better monitored metric). With ``raw`` or ``best``, ``val/<metric>`` are the kept weights'
metrics (what best.pt is chosen on), ``val/<metric>_ema`` and ``val/<metric>_raw`` each set's own, and
``val/kept_averaged`` is 1 when the average was kept; checkpoints store the kept weights as ``eval_model``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator

from trickbag.config import TrickSection
from trickbag.errors import ConflictError
from trickbag.plugin.interface import Plugin
from trickbag.tricks.base import EvalOnAverage, Trick

if TYPE_CHECKING:
    from trickbag.plugin.context import Built
    from trickbag.plugin.interface import RecipeView
    from trickbag.plugin.state import State


class EMAConfig(TrickSection):
    """Exponential moving average of the weights; evaluation and best.pt use the averaged weights."""

    decay: float = Field(0.9998, ge=0.0, le=1.0)  # per averaging update; time constant 1/(1-decay) updates (timm: 0.9998)  # noqa: E501 (a key's help is the comment on its line)
    warmup: bool | int = True  # True: decay min(decay, (1+n)/(10+n)); int W: decay (1-exp(-n/W)); False: none
    every: int = Field(1, ge=1)  # average every this many optimizer updates
    buffers: Literal["copy", "average"] = "copy"  # BatchNorm running statistics: copied from the live model or averaged
    eval_raw: bool = True  # also evaluate the raw weights each epoch: val/acc_raw, val/loss_raw
    select: Literal["ema", "raw", "best"] = "ema"  # weights kept for evaluation/best.pt: the average, the raw ones, or the better of the two at each evaluation  # noqa: E501 (a key's help is the comment on its line)

    @field_validator("warmup")
    @classmethod
    def _warmup(cls, v: bool | int) -> bool | int:
        if not isinstance(v, bool) and v < 1:
            raise ValueError("must be true, false, or a number of averaging updates >= 1")
        return v


class EMAPlugin(EvalOnAverage):
    """:class:`trickbag.nn.EMA` updated after every update that was not skipped; swapped in for evaluation,
    and kept (or not, ``select``) as the evaluation weights."""

    name = "ema"

    def __init__(self, cfg: EMAConfig) -> None:
        self.cfg = cfg
        self.eval_raw = cfg.eval_raw or cfg.select != "ema"  # choosing needs the raw weights' metrics
        self.ema: Any = None
        self._in_fit = False
        self.kept_averaged = cfg.select != "raw"
        self._metric, self._mode = "loss", "min"

    def after_optimizer(self, built: Built) -> None:
        from trickbag.nn import EMA

        c = self.cfg
        self.ema = EMA(built.model, c.decay, warmup=c.warmup, every=c.every, buffers=c.buffers)

    def _eval_weights(self, state: State) -> dict[str, Any]:
        from trickbag.nn import unwrap

        return self.ema.module.state_dict() if self.kept_averaged else unwrap(state.model).state_dict()

    def on_fit_start(self, state: State) -> None:
        self._in_fit = True
        split, _, name = state.monitor.partition("/")
        if split == "val":
            self._metric, self._mode = name.removesuffix("_raw"), state.mode
        state.provide_eval_weights(lambda: self._eval_weights(state), owner="tricks.ema")

    def on_step(self, state: State) -> None:
        if not state.step_skipped:
            self.ema.update(state.model)

    def on_eval_start(self, state: State) -> None:
        if self._in_fit:
            self.swap_in(self.ema.swapped(state.model))

    def on_eval_end(self, state: State) -> None:
        swapped = self._swap is not None
        super().on_eval_end(state)
        if swapped and self.cfg.select != "ema":
            self._select(state.eval_metrics)

    def _select(self, m: dict[str, float]) -> None:
        """Keep the average or the raw weights (``select``); ``m``'s plain metrics become the kept weights'."""
        ema, raw = m.get(self._metric), m.get(f"{self._metric}_raw")
        if ema is None or raw is None:
            return
        if self.cfg.select == "raw":
            self.kept_averaged = False
        else:  # best: a tie keeps the average
            self.kept_averaged = not (raw > ema if self._mode == "max" else raw < ema)
        for k in [k for k in m if f"{k}_raw" in m]:
            m[f"{k}_ema"] = m[k]
            if not self.kept_averaged:
                m[k] = m[f"{k}_raw"]
        m["kept_averaged"] = float(self.kept_averaged)

    def on_fit_end(self, state: State) -> None:
        self._in_fit = False
        if self.kept_averaged:
            self.ema.copy_to(state.model)

    def state_dict(self) -> dict[str, Any] | None:
        return {**self.ema.state_dict(), "kept_averaged": self.kept_averaged}

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        self.ema.load_state_dict(sd)
        self.kept_averaged = bool(sd.get("kept_averaged", self.cfg.select != "raw"))


def build(cfg: EMAConfig) -> list[Plugin]:
    return [EMAPlugin(cfg)]


def check(recipe: RecipeView) -> None:
    if recipe.tricks.ema.enabled and recipe.tricks.swa.enabled:
        raise ConflictError(
            "tricks.ema and tricks.swa both average the weights and would each evaluate their own average; "
            "enable only one of them"
        )


TRICK = Trick(
    name="ema",
    after=("compile", "freeze"),  # it averages the model as the build left it
    config=EMAConfig,
    description="EMA of the weights (Polyak averaging); evaluation and best.pt use it, raw accuracy logged too",
    build=build,
    checks=(check,),
)
