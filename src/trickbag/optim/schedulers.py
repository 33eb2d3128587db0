"""Learning-rate schedules with optional linear warm-up, and changes to a running schedule.

The per-update schedules (``constant``, ``step``, ``multistep``, ``cosine``, ``linear``,
``polynomial``, each with an optional linear warm-up) are one class, :class:`LRSchedule`, a
``torch.optim.lr_scheduler.LambdaLR`` whose per-group factor is a small picklable object, so
``state_dict()`` / ``load_state_dict()`` round-trip and the schedule can be extended
(:func:`add_param_group`) or re-planned (:func:`replan_schedule`) through public attributes only.
``onecycle`` is torch's ``OneCycleLR`` held at its final LR after the end
(:class:`ClampedOneCycleLR`), ``plateau`` is torch's ``ReduceLROnPlateau``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

import torch
from torch.optim import lr_scheduler as lrs

__all__ = [
    "scale_lr",
    "SCHEDULERS",
    "ClampedOneCycleLR",
    "LRSchedule",
    "add_param_group",
    "build_scheduler",
    "replan_schedule",
    "scaled_lr",
]

SCHEDULERS: tuple[str, ...] = (
    "constant",
    "step",
    "multistep",
    "cosine",
    "onecycle",
    "linear",
    "polynomial",
    "plateau",
    "wsd",
)

# Keyword arguments each schedule accepts (beyond total_steps / warmup_*).
_OPTIONS: dict[str, frozenset[str]] = {
    "constant": frozenset(),
    "step": frozenset({"step_size", "gamma"}),
    "multistep": frozenset({"milestones", "gamma"}),
    "cosine": frozenset({"min_lr"}),
    "onecycle": frozenset(
        {
            "pct_start",
            "anneal_strategy",
            "cycle_momentum",
            "base_momentum",
            "max_momentum",
            "div_factor",
            "final_div_factor",
            "three_phase",
        }
    ),
    "linear": frozenset({"end_factor"}),
    "polynomial": frozenset({"power"}),
    "wsd": frozenset({"min_lr", "decay_fraction", "decay_shape"}),
    "plateau": frozenset(
        {"mode", "factor", "patience", "threshold", "threshold_mode", "cooldown", "min_lr", "eps"}
    ),
}
_NEEDS_TOTAL = frozenset({"cosine", "onecycle", "linear", "polynomial", "wsd"})
_LAMBDA_NAMES = ("constant", "step", "multistep", "cosine", "linear", "polynomial", "wsd")  # LRSchedule's
_ANNEALED = ("cosine", "linear", "polynomial", "wsd")  # reach an end value at total_steps and stay there
#: the decay shapes of ``wsd``: the unit curve from 1 at the decay's start to 0 at its end
WSD_SHAPES = ("linear", "cosine", "1-sqrt")


@contextmanager
def _errors_named(who: str) -> Iterator[None]:
    """Prefix the message of a ValueError / TypeError raised inside with ``who: `` (once)."""
    try:
        yield
    except (ValueError, TypeError) as exc:
        msg = str(exc)
        for prefix in ("LRSchedule: ", "build_scheduler: "):
            if msg.startswith(prefix):
                msg = msg[len(prefix):]
        raise type(exc)(f"{who}: {msg}") from None


# --------------------------------------------------------------------------- the per-group factor
class _Factor:
    """LR factor of one param group of :class:`LRSchedule`: ``lr(t) = base_lr * factor(t)``.

    Its ``__dict__`` holds plain data only (``LambdaLR.state_dict`` saves it and
    ``load_state_dict`` restores it).  The annealed schedules are described by segments
    ``[start, scale, end]``, base-LR free: from update ``start`` on (the segment added last
    among those that have started wins), the annealed part is ``G(t) = scale * shape(x)`` with
    ``x = min(1, (t - start) / (end - start))`` and ``shape`` the unit curve (cosine
    ``(1 + cos(pi x)) / 2``, linear ``1 - x``, polynomial ``(1 - x)^power``), and the factor is
    ``f_end + (1 - f_end) * G`` (cosine: ``(min_lr + (base_lr - min_lr) * G) / base_lr``).  Built
    with ``[[warmup_steps, 1.0, total_steps]]``; :func:`replan_schedule` appends segments.  A warm
    restart's segment has a fourth entry, ``warm``: for ``start <= t < start + warm``,
    ``G(t) = scale * (t - start + 1) / (warm + 1)``, and the anneal spans ``start + warm .. end``.
    """

    def __init__(
        self,
        *,
        name: str,
        base_lr: float,
        warmup_steps: int,
        warmup_start: float,
        total_steps: int | None,
        step_size: int | None = None,
        gamma: float = 0.1,
        milestones: list[int] | None = None,
        min_lr: float = 0.0,
        end_factor: float = 0.0,
        power: float = 1.0,
        decay_fraction: float = 0.2,
        decay_shape: str = "1-sqrt",
    ) -> None:
        self.name = name
        self.base_lr = float(base_lr)
        self.warmup_steps = int(warmup_steps)
        self.warmup_start = float(warmup_start)
        self.total_steps = total_steps
        self.step_size = step_size
        self.gamma = float(gamma)
        self.milestones = list(milestones or [])
        self.min_lr = float(min_lr)
        self.end_factor = float(end_factor)
        self.power = float(power)
        self.decay_fraction, self.decay_shape = float(decay_fraction), str(decay_shape)
        first = self.decay_start(total_steps, self.warmup_steps) if name == "wsd" else self.warmup_steps
        self.segments: list[list[Any]] = [[first, 1.0, total_steps]] if name in _ANNEALED else []

    def decay_start(self, total_steps: Any, t0: int) -> int:
        """``wsd``: the update the decay starts at, ``decay_fraction`` of the updates after the warm-up before
        ``total_steps`` (not before ``t0``)."""
        total = int(total_steps)
        return max(t0, self.warmup_steps, total - int(round(self.decay_fraction * (total - self.warmup_steps))))

    def with_base(self, base_lr: float) -> _Factor:
        """The same plan (segments included) for a param group with base LR ``base_lr``."""
        if self.name in ("cosine", "wsd") and base_lr < self.min_lr:
            raise ValueError(
                f"min_lr={self.min_lr} of the cosine schedule is above the new group's lr={base_lr}; "
                "the cosine would raise its LR. Give the group an lr no smaller than min_lr"
            )
        other = _Factor.__new__(_Factor)
        other.__dict__.update(self.__dict__)
        other.base_lr = float(base_lr)
        other.milestones = list(self.milestones)
        other.segments = [list(seg) for seg in self.segments]
        return other

    # -- evaluation ------------------------------------------------------------------------

    def _segment(self, t: int) -> list[Any] | None:
        found = None
        for seg in self.segments:
            if seg[0] <= t:
                found = seg
        return found

    def _unit(self, t: int, seg: list[Any]) -> float:
        start, scale, end = seg[:3]
        warm = int(seg[3]) if len(seg) > 3 else 0  # a restart's warm-up (see replan)
        if t < start + warm:
            return scale * (t - start + 1) / (warm + 1)
        start += warm
        x = 1.0 if end <= start or t >= end else (t - start) / (end - start)
        shape = self.decay_shape if self.name == "wsd" else self.name
        if shape == "cosine":
            return scale * (1.0 + math.cos(math.pi * x)) / 2.0
        if shape == "linear":
            return scale * (1.0 - x)
        if shape == "1-sqrt":
            return scale * (1.0 - math.sqrt(x))
        return scale * (1.0 - x) ** self.power

    def _annealed(self, g: float) -> float:
        if self.name in ("cosine", "wsd"):
            if self.base_lr <= 0.0:
                return g  # lr = 0 * factor = 0 whatever the factor
            return (self.min_lr + (self.base_lr - self.min_lr) * g) / self.base_lr
        if self.name == "linear":
            return self.end_factor + (1.0 - self.end_factor) * g
        return g

    def __call__(self, t: int) -> float:
        seg = self._segment(t)
        w = self.warmup_steps
        if seg is None and t < w:
            s = self.warmup_start
            return s + (1.0 - s) * t / w
        if self.name == "constant" or (seg is None and self.name == "wsd"):  # wsd: the stable phase
            return 1.0
            return 1.0
        if self.name == "step":
            return self.gamma ** ((t - w) // self.step_size)  # type: ignore[operator]
        if self.name == "multistep":
            return self.gamma ** sum(1 for m in self.milestones if m <= t)
        return self._annealed(self._unit(t, seg))  # type: ignore[arg-type]

    # -- re-planning -----------------------------------------------------------------------

    def ended(self, t: int) -> bool:
        """Whether the anneal is over at update ``t`` (the factor sits at its end value)."""
        seg = self._segment(t)
        return self.name in _ANNEALED and seg is not None and t >= seg[2]

    def replan(self, t0: int, total_steps: int, restart: float | None = None, restart_warmup: int = 0) -> None:
        """From update ``t0`` on, reach the end value at ``total_steps`` (see :func:`replan_schedule`)."""
        if self.name not in _ANNEALED:
            return
        seg = self._segment(t0)
        if seg is not None and t0 >= seg[2]:
            if restart is not None and total_steps > t0:  # a warm restart: warm-up, then the anneal again
                self.segments = self.segments + [[t0, float(restart), total_steps, int(restart_warmup)]]
                self.total_steps = total_steps
            return  # else the anneal is over: stay at the floor
        if total_steps <= t0:
            self.segments = self.segments + [[t0, 0.0, t0]]
            self.total_steps = t0
            return
        if seg is None:  # warming up (wsd: or stable): the warm-up continues, the main phase spans the new total
            if total_steps <= self.warmup_steps:
                raise ValueError(
                    f"total_steps={total_steps} ends inside the warm-up ({self.warmup_steps} updates, now at update "
                    f"{t0}); give total_steps > {self.warmup_steps}, or <= {t0} to go to the floor at once"
                )
            first = self.decay_start(total_steps, t0) if self.name == "wsd" else self.warmup_steps
            self.segments = [[first, 1.0, total_steps]]  # wsd: the stable phase goes on, the decay moves
        else:
            self.segments = self.segments + [[t0, self._unit(t0, seg), total_steps]]
        self.total_steps = total_steps


# --------------------------------------------------------------------------- argument checks
def _check_int(value: Any, name: str, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def _check_number(value: Any, name: str, *, minimum: float, maximum: float = math.inf) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not minimum <= value <= maximum
    ):
        allowed = f">= {minimum}" if maximum == math.inf else f"in [{minimum}, {maximum}]"
        raise ValueError(f"{name} must be a number {allowed}, got {value!r}")


def _gamma(kw: dict[str, Any]) -> float:
    gamma = kw.get("gamma", 0.1)
    _check_number(gamma, "gamma", minimum=0.0)
    return float(gamma)


def _check_common(
    optimizer: Any,
    name: Any,
    names: tuple[str, ...],
    total_steps: Any,
    warmup_steps: Any,
    warmup_start_factor: Any,
    kwargs: dict[str, Any],
) -> float:
    """Checks shared by every schedule; returns the warm-up start factor."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}")
    if not isinstance(name, str) or name not in names:
        raise ValueError(f"unknown schedule name {name!r}; allowed: {', '.join(names)}")
    unknown = set(kwargs) - _OPTIONS[name]
    if unknown:
        allowed = ", ".join(sorted(_OPTIONS[name])) or "none"
        raise TypeError(f"unexpected option(s) {sorted(unknown)} for schedule {name!r}; allowed options: {allowed}")
    if total_steps is not None:
        _check_int(total_steps, "total_steps", minimum=1)
    elif name in _NEEDS_TOTAL:
        raise ValueError(f"schedule {name!r} needs total_steps= (the number of optimizer updates)")
    _check_int(warmup_steps, "warmup_steps", minimum=0)
    if warmup_start_factor is None:
        warmup_start_factor = 1.0 / (warmup_steps + 1)
    elif (
        isinstance(warmup_start_factor, bool)
        or not isinstance(warmup_start_factor, (int, float))
        or not 0.0 < warmup_start_factor <= 1.0
    ):
        raise ValueError(
            "warmup_start_factor must be in (0, 1] (a fraction of the base LR; "
            f"0 would make the first update use LR 0), got {warmup_start_factor!r}"
        )
    if warmup_steps and total_steps is not None and warmup_steps >= total_steps:
        raise ValueError(f"warmup_steps={warmup_steps} must be smaller than total_steps={total_steps}")
    if warmup_steps and name in ("plateau", "onecycle"):
        hint = "use pct_start= for its own warm-up" if name == "onecycle" else "build the warm-up separately"
        raise ValueError(f"schedule {name!r} cannot be combined with warmup_steps={warmup_steps}; {hint}")
    return float(warmup_start_factor)


def _plan(name: str, total_steps: int | None, warmup_steps: int, start: float, kw: dict[str, Any]) -> dict[str, Any]:
    """Validated :class:`_Factor` fields shared by every param group."""
    plan: dict[str, Any] = dict(name=name, warmup_steps=warmup_steps, warmup_start=start, total_steps=total_steps)
    if name == "step":
        if "step_size" not in kw:
            raise ValueError("schedule 'step' needs step_size= (updates between LR decays)")
        _check_int(kw["step_size"], "step_size", minimum=1)
        plan.update(step_size=kw["step_size"], gamma=_gamma(kw))
    elif name == "multistep":
        milestones = kw.get("milestones")
        if milestones is None:
            raise ValueError("schedule 'multistep' needs milestones= (a list of update counts)")
        milestones = list(milestones)
        for m in milestones:
            _check_int(m, "milestones[...]", minimum=warmup_steps + 1)
        if milestones != sorted(milestones):
            raise ValueError(f"milestones must be increasing, got {milestones}")
        plan.update(milestones=milestones, gamma=_gamma(kw))
    elif name == "cosine":
        min_lr = kw.get("min_lr", 0.0)
        _check_number(min_lr, "min_lr", minimum=0.0)
        plan.update(min_lr=float(min_lr))
    elif name == "linear":
        end_factor = kw.get("end_factor", 0.0)
        _check_number(end_factor, "end_factor", minimum=0.0, maximum=1.0)
        plan.update(end_factor=float(end_factor))
    elif name == "polynomial":
        power = kw.get("power", 1.0)
        _check_number(power, "power", minimum=0.0)
        plan.update(power=float(power))
    elif name == "wsd":
        min_lr, fraction, shape = kw.get("min_lr", 0.0), kw.get("decay_fraction", 0.2), kw.get("decay_shape", "1-sqrt")
        _check_number(min_lr, "min_lr", minimum=0.0)
        _check_number(fraction, "decay_fraction", minimum=0.0, maximum=1.0)
        if not fraction > 0:
            raise ValueError("decay_fraction must be > 0 (the share of the updates after warm-up spent decaying)")
        if shape not in WSD_SHAPES:
            raise ValueError(f"decay_shape must be one of {', '.join(WSD_SHAPES)}, got {shape!r}")
        plan.update(min_lr=float(min_lr), decay_fraction=float(fraction), decay_shape=shape)
    return plan


def _base_lrs(optimizer: torch.optim.Optimizer) -> list[float]:
    """The base LR ``LRScheduler.__init__`` will record for each group (``initial_lr`` if already set)."""
    return [float(g.get("initial_lr", g["lr"])) for g in optimizer.param_groups]


# --------------------------------------------------------------------------- the schedules
class LRSchedule(lrs.LambdaLR):
    r"""A per-update LR schedule with an optional linear warm-up: ``lr_t = base_lr * factor(t)`` per param group.

    One ``torch.optim.lr_scheduler.LambdaLR`` for the names ``constant``, ``step``, ``multistep``,
    ``cosine``, ``linear`` and ``polynomial``; the formulas, options and checks are those of
    :func:`build_scheduler` (which returns this class for these names).  ``lr_lambdas`` holds one
    picklable factor object per param group and ``base_lrs`` the groups' base LRs (their
    ``initial_lr``), so ``state_dict()`` / ``load_state_dict()`` round-trip with
    ``torch.load(weights_only=True)``.  After ``total_steps`` updates the annealed schedules stay
    at their end value.

    Args:
        optimizer: the optimizer (its groups' ``lr`` are the base LRs).
        name: one of the six names above.
        total_steps, warmup_steps, warmup_start_factor, options: as in :func:`build_scheduler`.
        last_epoch: ``-1`` for a new schedule (torch's convention).

    >>> opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    >>> sched = LRSchedule(opt, "linear", total_steps=4, warmup_steps=1, end_factor=0.5)
    >>> seen = []
    >>> for _ in range(6):
    ...     seen.append(round(opt.param_groups[0]["lr"], 4))
    ...     opt.step()
    ...     sched.step()
    >>> seen, sched.name, sched.total_steps
    ([0.05, 0.1, 0.0833, 0.0667, 0.05, 0.05], 'linear', 4)
    """

    lr_lambdas: list[_Factor]  # type: ignore[assignment]  # LambdaLR types them as plain callables

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        name: str,
        *,
        total_steps: int | None = None,
        warmup_steps: int = 0,
        warmup_start_factor: float | None = None,
        last_epoch: int = -1,
        **options: Any,
    ) -> None:
        with _errors_named("LRSchedule"):
            start = _check_common(optimizer, name, _LAMBDA_NAMES, total_steps, warmup_steps, warmup_start_factor,
                                  options)
            plan = _plan(name, total_steps, warmup_steps, start, dict(options))
            bases = _base_lrs(optimizer)
            if name == "cosine":
                for i, base in enumerate(bases):
                    if base < plan["min_lr"]:
                        raise ValueError(
                            f"min_lr={plan['min_lr']} is above param_groups[{i}]['lr']={base}; "
                            "the cosine would raise that group's LR. Use a min_lr no larger than every group's LR"
                        )
        super().__init__(optimizer, [_Factor(base_lr=b, **plan) for b in bases], last_epoch)

    @property
    def name(self) -> str:
        """The schedule's name (``"cosine"``, ...)."""
        return self.lr_lambdas[0].name

    @property
    def total_steps(self) -> int | None:
        """The update count at which the schedule reaches its end (after :func:`replan_schedule`: the new one)."""
        return self.lr_lambdas[0].total_steps

    @property
    def warmup_steps(self) -> int:
        """Length of the linear warm-up, in updates."""
        return self.lr_lambdas[0].warmup_steps


class ClampedOneCycleLR(lrs.OneCycleLR):
    """``torch.optim.lr_scheduler.OneCycleLR`` that stays at its final LR (and momentum) after ``total_steps``
    updates instead of raising.

    >>> opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    >>> sched = ClampedOneCycleLR(opt, max_lr=0.1, total_steps=4, cycle_momentum=False)
    >>> for _ in range(8):
    ...     opt.step()
    ...     sched.step()
    >>> opt.param_groups[0]["lr"] == 0.1 / 25 / 1e4      # initial_lr / final_div_factor
    True
    """

    def get_lr(self) -> list[Any]:
        t = self.last_epoch
        if t < self.total_steps:
            return super().get_lr()
        self.last_epoch = self.total_steps - 1  # the last update of the cycle: its final value
        try:
            return super().get_lr()
        finally:
            self.last_epoch = t


def build_scheduler(
    optimizer: torch.optim.Optimizer,
    name: str,
    *,
    total_steps: int | None = None,
    warmup_steps: int = 0,
    warmup_start_factor: float | None = None,
    **kwargs: Any,
) -> lrs.LRScheduler:
    r"""Build a per-update LR scheduler by name, with an optional linear warm-up in front.

    Call ``scheduler.step()`` once after every optimizer update; ``total_steps`` is the number of
    updates.  The LR used by update :math:`t` (0-based, before the :math:`t`-th ``step()``) is,
    with base LR :math:`\eta` of each param group, warm-up length :math:`W`, start factor
    :math:`s` and :math:`u = t - W` updates after warm-up, :math:`L = T - W`:

    * warm-up (:math:`t < W`): :math:`\eta\,(s + (1 - s)\,t / W)` (Goyal et al. 2017).
      ``warmup_start_factor`` defaults to :math:`1/(W+1)`, so the first LR is
      :math:`\eta/(W+1) > 0` and the LR reaches :math:`\eta` exactly when warm-up ends;
    * ``constant``: :math:`\eta`;
    * ``step`` (``step_size``, ``gamma=0.1``): :math:`\eta\,\gamma^{\lfloor u / \text{step\_size}\rfloor}`;
      ``step_size`` counts updates after warm-up;
    * ``multistep`` (``milestones``, ``gamma=0.1``): :math:`\eta\,\gamma^{\#\{m \le t\}}`; milestones
      are *absolute* update counts and must be greater than ``warmup_steps``;
    * ``cosine`` (``min_lr=0``, an absolute LR shared by all groups; Loshchilov & Hutter 2017):
      :math:`\text{min\_lr} + (\eta - \text{min\_lr})(1 + \cos(\pi u / L)) / 2`, equal to
      :math:`\eta` right after warm-up and to ``min_lr`` after ``total_steps`` updates;
    * ``linear`` (``end_factor=0``): :math:`\eta\,(1 + (\text{end\_factor} - 1)\,u / L)`;
    * ``polynomial`` (``power=1``): :math:`\eta\,(1 - u / L)^{\text{power}}`;
    * ``wsd`` (warmup-stable-decay, a trapezoid; ``decay_fraction=0.2``, ``decay_shape=1-sqrt``, ``min_lr=0``;
      Hu et al. 2024, Hägele et al. 2024): :math:`\eta` until the decay starts at
      :math:`D = T - \text{round}(\text{decay\_fraction}\cdot L)`, then
      :math:`\text{min\_lr} + (\eta - \text{min\_lr})\,s(x)` with :math:`x = (t - D)/(T - D)` and :math:`s` =
      ``1-sqrt`` :math:`1 - \sqrt{x}`, ``linear`` :math:`1 - x` or ``cosine`` :math:`(1 + \cos \pi x)/2`.
      :func:`replan_schedule` in the stable phase keeps it stable and moves the decay to the new end;
    * ``onecycle`` (Smith & Topin 2019, ``OneCycleLR`` with ``max_lr`` = each group's LR): has its
      own warm-up (``pct_start``), so ``warmup_steps`` must be 0.  Momentum is cycled only if the
      optimizer already uses momentum or Adam betas (``cycle_momentum`` overrides this);
    * ``plateau``: ``ReduceLROnPlateau``; step it with the monitored metric,
      ``scheduler.step(val_loss)``.  It cannot be combined with warm-up.  Each group's starting LR
      is recorded as its ``initial_lr`` (as the other schedules do).

    Past ``total_steps`` updates every schedule stays at its final value (as in timm): ``cosine``
    at ``min_lr``, ``linear`` at ``end_factor`` times :math:`\eta`, ``polynomial`` at 0,
    ``onecycle`` at its final LR; ``step`` and ``multistep`` keep their rule, ``constant`` is constant.

    Each param group keeps its own base LR (two groups with LRs 0.1 and 0.01 follow the same
    curve, in proportion; with ``cosine`` both end at the shared absolute ``min_lr``).
    Returns an :class:`LRSchedule` for ``constant``, ``step``, ``multistep``, ``cosine``,
    ``linear`` and ``polynomial``, a :class:`ClampedOneCycleLR` for ``onecycle`` and a
    ``ReduceLROnPlateau`` for ``plateau``.  A running schedule takes new param groups with
    :func:`add_param_group` and a new length with :func:`replan_schedule`.

    >>> model = torch.nn.Linear(2, 1)
    >>> opt = torch.optim.SGD(model.parameters(), lr=0.1)
    >>> sched = build_scheduler(opt, "cosine", total_steps=10, warmup_steps=2, min_lr=0.001)
    >>> lrs_seen = []
    >>> for _ in range(10):
    ...     lrs_seen.append(opt.param_groups[0]["lr"])
    ...     opt.step()
    ...     sched.step()
    >>> [round(v, 4) for v in lrs_seen[:4]], round(opt.param_groups[0]["lr"], 6)
    ([0.0333, 0.0667, 0.1, 0.0962], 0.001)
    """
    with _errors_named("build_scheduler"):
        _check_common(optimizer, name, SCHEDULERS, total_steps, warmup_steps, warmup_start_factor, kwargs)
        if name in _LAMBDA_NAMES:
            return LRSchedule(optimizer, name, total_steps=total_steps, warmup_steps=warmup_steps,
                              warmup_start_factor=warmup_start_factor, **kwargs)
        kw = dict(kwargs)
        if name == "onecycle":
            if "pct_start" in kw:
                _check_number(kw["pct_start"], "pct_start", minimum=0.0, maximum=1.0)
                kw["pct_start"] = float(kw["pct_start"])
            if kw.get("cycle_momentum") is None:
                kw["cycle_momentum"] = "betas" in optimizer.defaults or any(
                    float(g.get("momentum", 0.0) or 0.0) > 0 for g in optimizer.param_groups
                )
            max_lr = [float(g["lr"]) for g in optimizer.param_groups]
            return ClampedOneCycleLR(optimizer, max_lr=max_lr, total_steps=total_steps, **kw)
        # plateau
        scheduler = lrs.ReduceLROnPlateau(optimizer, **kw)
        for group in optimizer.param_groups:
            group.setdefault("initial_lr", group["lr"])
        return scheduler


# --------------------------------------------------------------------------- changing a running schedule
def _resync(scheduler: lrs.LRScheduler) -> None:
    """Recompute the current update's LRs (all groups) and ``get_last_lr()``: step back once, then ``step()``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "lr_scheduler.step() before optimizer.step()": not a real update
        scheduler.last_epoch -= 1
        scheduler.step()


def add_param_group(
    optimizer: torch.optim.Optimizer, group: dict[str, Any], scheduler: Any = None
) -> dict[str, Any]:
    """Add a param group to ``optimizer`` while ``scheduler`` runs; the group follows the same curve from now on.

    The group's base LR is ``group["lr"]`` (default: the optimizer's default ``lr``), recorded as
    its ``initial_lr``; its current LR is where the schedule is now for that base LR, i.e. what
    it would be had the group been there from the start:

    * :class:`LRSchedule`: a factor for the new group is appended to ``scheduler.lr_lambdas``
      and its base LR to ``scheduler.base_lrs`` (``cosine``: ``min_lr`` must not exceed it);
    * ``OneCycleLR`` (:class:`ClampedOneCycleLR`): the group's ``max_lr`` is its base LR and its
      ``initial_lr`` / ``min_lr`` (and momentum bounds) are in proportion to group 0's;
    * ``ReduceLROnPlateau``: current LR = base LR times group 0's reduction so far
      (``lr / initial_lr`` of group 0, so group 0 needs ``initial_lr``, which
      :func:`build_scheduler` sets), and not below the group's ``min_lr``: the shared ``min_lr``
      (per-group ``min_lr`` lists: group 0's, scaled by base LR / group 0's base LR), appended to
      ``min_lrs``.  Once group 0 sits at its own ``min_lr`` its ratio understates the reductions
      a group with a larger base LR would have had;
    * ``None``: plain ``optimizer.add_param_group(group)``.

    Any other scheduler raises ``TypeError``.  Only public attributes are changed; the current
    LRs are recomputed with one ``last_epoch -= 1; step()`` pair, which does not advance the schedule.
    Returns the added group (``optimizer.param_groups[-1]``).

    >>> w0, w1 = torch.zeros(1, requires_grad=True), torch.zeros(1, requires_grad=True)
    >>> opt = torch.optim.SGD([w0], lr=0.1)
    >>> sched = build_scheduler(opt, "linear", total_steps=10)
    >>> for _ in range(4):
    ...     opt.step()
    ...     sched.step()
    >>> g = add_param_group(opt, {"params": [w1], "lr": 0.01}, sched)
    >>> round(g["lr"], 6), g["initial_lr"], round(opt.param_groups[0]["lr"], 6)   # 60 % of each base LR
    (0.006, 0.01, 0.06)
    """
    with _errors_named("add_param_group"):
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}")
        if not isinstance(group, dict) or "params" not in group:
            raise TypeError(f"group must be a dict with 'params' (and optionally 'lr', ...), got {group!r}")
        if scheduler is None:
            optimizer.add_param_group(group)
            return optimizer.param_groups[-1]
        if not isinstance(scheduler, (LRSchedule, lrs.OneCycleLR, lrs.ReduceLROnPlateau)):
            raise TypeError(
                f"scheduler {type(scheduler).__name__} is not supported; give the LRSchedule, OneCycleLR or "
                "ReduceLROnPlateau of build_scheduler, or None"
            )
        if scheduler.optimizer is not optimizer:
            raise ValueError("scheduler does not drive this optimizer (scheduler.optimizer is another object)")
        base = group.get("lr", optimizer.defaults.get("lr"))
        if isinstance(base, torch.Tensor):
            base = float(base)
        _check_number(base, "group['lr'] (or the optimizer's default lr)", minimum=0.0)
        base = float(cast(float, base))
        if isinstance(scheduler, LRSchedule):
            _add_to_lambda_schedule(optimizer, scheduler, group, base)
        elif isinstance(scheduler, lrs.OneCycleLR):
            _add_to_one_cycle(optimizer, scheduler, group, base)
        else:
            _add_to_plateau(optimizer, scheduler, group, base)
        return optimizer.param_groups[-1]


def _add_to_lambda_schedule(optimizer: torch.optim.Optimizer, scheduler: LRSchedule, group: dict[str, Any],
                            base: float) -> None:
    if len(scheduler.lr_lambdas) != len(optimizer.param_groups):
        raise ValueError(
            f"the scheduler has {len(scheduler.lr_lambdas)} factors for {len(optimizer.param_groups)} param "
            "groups: a group was added without add_param_group"
        )
    factor = scheduler.lr_lambdas[0].with_base(base)
    group["lr"] = group["initial_lr"] = base
    optimizer.add_param_group(group)
    scheduler.lr_lambdas.append(factor)
    scheduler.base_lrs.append(base)
    _resync(scheduler)


def _add_to_one_cycle(optimizer: torch.optim.Optimizer, scheduler: lrs.OneCycleLR, group: dict[str, Any],
                      base: float) -> None:
    g0 = optimizer.param_groups[0]
    if not float(g0["max_lr"]) > 0:
        raise ValueError("param_groups[0]['max_lr'] is 0: the new group's OneCycle LRs cannot be derived")
    group["max_lr"] = base
    group["initial_lr"] = base * float(g0["initial_lr"]) / float(g0["max_lr"])
    group["min_lr"] = base * float(g0["min_lr"]) / float(g0["max_lr"])
    group.update({k: g0[k] for k in ("base_momentum", "max_momentum") if k in g0})
    group["lr"] = group["initial_lr"]
    optimizer.add_param_group(group)
    scheduler.base_lrs.append(group["initial_lr"])
    _resync(scheduler)


def _add_to_plateau(optimizer: torch.optim.Optimizer, scheduler: lrs.ReduceLROnPlateau, group: dict[str, Any],
                    base: float) -> None:
    g0 = optimizer.param_groups[0]
    if "initial_lr" not in g0:
        raise ValueError(
            "param_groups[0] has no 'initial_lr', so the reduction so far is unknown; set each group's "
            "initial_lr to its starting LR when building the ReduceLROnPlateau (build_scheduler does)"
        )
    base0 = float(g0["initial_lr"])
    reduction = float(g0["lr"]) / base0 if base0 > 0 else 1.0
    default_min = getattr(scheduler, "default_min_lr", None)
    if default_min is not None or len(set(scheduler.min_lrs)) == 1:
        min_lr = default_min if default_min is not None else scheduler.min_lrs[0]
    else:
        min_lr = scheduler.min_lrs[0] * base / base0 if base0 > 0 else scheduler.min_lrs[0]
    group["initial_lr"] = base
    group["lr"] = max(base * reduction, float(min_lr))  # the scheduler never goes below min_lr
    optimizer.add_param_group(group)
    scheduler.min_lrs.append(min_lr)


def replan_schedule(
    scheduler: Any, total_steps: int, *, restart: float | None = None, restart_warmup: int = 0
) -> bool:
    r"""Change the length of a running schedule from the current update on (e.g. resuming with more epochs).

    The updates already taken keep their LRs.  With :math:`t_0` = ``scheduler.last_epoch`` (the
    update about to run) and :math:`T'` = ``total_steps``, the rest of the curve has the
    schedule's shape, starts at the current factor :math:`f(t_0)` and reaches the end value
    :math:`f_\text{end}` at :math:`T'`, e.g. cosine
    :math:`f(t) = f_\text{end} + (f(t_0) - f_\text{end})(1 + \cos(\pi (t - t_0) / (T' - t_0))) / 2`,
    linear and polynomial likewise (:math:`f_\text{end}` = ``min_lr`` / base LR,
    ``end_factor``, 0).  During the warm-up, the warm-up continues and the main phase spans
    :math:`W .. T'` (then :math:`T'` must exceed ``warmup_steps``).  ``total_steps <=``
    :math:`t_0` stops the anneal: the schedule jumps to its floor at once, for the current update.

    A schedule whose anneal is already over stays at its floor, unless ``restart`` is given: then
    it restarts (a warm restart, Loshchilov & Hutter 2017, SGDR) with a linear warm-up over
    ``restart_warmup`` updates :math:`R` from the floor to ``restart`` :math:`\times` the peak
    (the annealed part at update :math:`t_0 + i < t_0 + R` is ``restart`` :math:`(i + 1)/(R + 1)`),
    then the same anneal from there to the floor at :math:`T'`.  Returns True when it restarted.

    ``constant`` and ``step`` have nothing to change (and ``ReduceLROnPlateau``, which follows a
    metric); ``multistep`` (absolute milestones) and ``onecycle`` cannot be re-planned
    (``ValueError``); other schedulers raise ``TypeError``.

    >>> opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    >>> sched = build_scheduler(opt, "linear", total_steps=4)
    >>> for _ in range(2):
    ...     opt.step()
    ...     sched.step()
    >>> opt.param_groups[0]["lr"]                 # halfway down
    0.5
    >>> replan_schedule(sched, 7)                 # 5 more updates to reach 0 instead of 2
    False
    >>> seen = []
    >>> for _ in range(6):
    ...     opt.step()
    ...     sched.step()
    ...     seen.append(round(opt.param_groups[0]["lr"], 2))
    >>> seen
    [0.4, 0.3, 0.2, 0.1, 0.0, 0.0]
    >>> replan_schedule(sched, 14, restart=0.5, restart_warmup=1)   # ended at 0: up to 0.5, down again
    True
    >>> seen = [round(opt.param_groups[0]["lr"], 2)]
    >>> for _ in range(6):
    ...     opt.step()
    ...     sched.step()
    ...     seen.append(round(opt.param_groups[0]["lr"], 2))
    >>> seen
    [0.25, 0.5, 0.4, 0.3, 0.2, 0.1, 0.0]
    """
    with _errors_named("replan_schedule"):
        _check_int(total_steps, "total_steps", minimum=1)
        if restart is not None:
            _check_number(restart, "restart", minimum=0.0)
            if not restart > 0:
                raise ValueError("restart must be > 0 (a fraction of the peak LR), got 0")
        _check_int(restart_warmup, "restart_warmup", minimum=0)
        if isinstance(scheduler, LRSchedule):
            name = scheduler.name
            if name == "multistep":
                raise ValueError(
                    "schedule 'multistep' cannot be re-planned: its milestones are absolute update counts; "
                    "build a new schedule with the milestones you want"
                )
            if name not in _ANNEALED:
                return False
            t0 = scheduler.last_epoch
            restarted = scheduler.lr_lambdas[0].ended(t0) and restart is not None and total_steps > t0
            if restarted and restart_warmup >= total_steps - t0:
                raise ValueError(f"restart_warmup={restart_warmup} must be shorter than the {total_steps - t0} "
                                 f"updates left until total_steps={total_steps}")
            for factor in scheduler.lr_lambdas:
                factor.replan(t0, total_steps, restart, restart_warmup)
            _resync(scheduler)
            return restarted
        if isinstance(scheduler, lrs.OneCycleLR):
            raise ValueError(
                "schedule 'onecycle' cannot be re-planned: its phases are fixed fractions of the whole cycle; "
                "build a new schedule"
            )
        if isinstance(scheduler, lrs.ReduceLROnPlateau):
            return False
        raise TypeError(
            f"scheduler must be the LRSchedule of build_scheduler (or OneCycleLR / ReduceLROnPlateau), "
            f"got {type(scheduler).__name__}"
        )


def scale_lr(optimizer: torch.optim.Optimizer, scheduler: Any, factor: float) -> None:
    """Multiply every param group's base learning rate by ``factor`` while the schedule runs: the current LR
    and everything the schedule will give scale with it, its shape continues (e.g. a lower LR after
    the loss diverged). Works for :class:`LRSchedule`, ``OneCycleLR``, ``ReduceLROnPlateau`` and no
    scheduler; the schedule's absolute floors (cosine ``min_lr``, plateau ``min_lr``) stay.

    >>> opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    >>> sched = build_scheduler(opt, "linear", total_steps=4)
    >>> opt.step(); sched.step()
    >>> scale_lr(opt, sched, 0.1)
    >>> round(opt.param_groups[0]["lr"], 6), opt.param_groups[0]["initial_lr"]   # 75 % of the new base 0.1
    (0.075, 0.1)
    """
    with _errors_named("scale_lr"):
        _check_number(factor, "factor", minimum=0.0)
        for i, g in enumerate(optimizer.param_groups):
            for key in ("initial_lr", "max_lr", "min_lr") if isinstance(scheduler, lrs.OneCycleLR) else ("initial_lr",):
                if key in g:
                    g[key] = float(g[key]) * factor
            if isinstance(scheduler, LRSchedule):
                scheduler.base_lrs[i] = float(scheduler.base_lrs[i]) * factor
                scheduler.lr_lambdas[i].base_lr = float(scheduler.lr_lambdas[i].base_lr) * factor
            elif isinstance(scheduler, lrs.OneCycleLR):
                scheduler.base_lrs[i] = float(g["initial_lr"])
            else:
                g["lr"] = float(g["lr"]) * factor
        if isinstance(scheduler, (LRSchedule, lrs.OneCycleLR)):
            _resync(scheduler)


def scaled_lr(base_lr: float, batch_size: int, base_batch_size: int = 256) -> float:
    """Scale a learning rate linearly with the batch size: ``base_lr * batch_size / base_batch_size``.

    The linear scaling rule of Goyal et al. 2017 ("Accurate, Large Minibatch SGD",
    https://arxiv.org/abs/1706.02677): tuned at ``base_batch_size``, use this LR at ``batch_size``
    (pair it with a few epochs of warm-up for large batches).

    >>> scaled_lr(0.1, 1024)
    0.4
    >>> scaled_lr(3e-4, 64, base_batch_size=32)
    0.0006
    """
    if isinstance(base_lr, bool) or not isinstance(base_lr, (int, float)) or not math.isfinite(base_lr) or base_lr <= 0:
        raise ValueError(f"scaled_lr: base_lr must be a finite number > 0, got {base_lr!r}")
    for value, arg in ((batch_size, "batch_size"), (base_batch_size, "base_batch_size")):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"scaled_lr: {arg} must be an integer >= 1, got {value!r}")
    return float(base_lr) * batch_size / base_batch_size
