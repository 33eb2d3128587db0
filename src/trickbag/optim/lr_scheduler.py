"""Learning-rate schedules with optional linear warm-up, and changes to a running schedule.

The schedules themselves are the modules of :mod:`trickbag.optim.schedules`, one each (its options, its
curve, its recipe keys, its rule on resume); this module builds them and changes them while they run.
The per-update schedules (``constant``, ``step``, ``multistep``, ``cosine``, ``linear``,
``polynomial``, ``wsd``, each with an optional linear warm-up) are one class, :class:`LRSchedule`, a
``torch.optim.lr_scheduler.LambdaLR`` whose per-group factor is a small picklable object (the schedule
module's :class:`~trickbag.optim.schedules.base.Factor`), so ``state_dict()`` / ``load_state_dict()``
round-trip and the schedule can be extended (:func:`add_param_group`) or re-planned
(:func:`replan_schedule`) through public attributes only. ``onecycle`` is torch's ``OneCycleLR`` held at
its final LR after the end (:class:`ClampedOneCycleLR`), ``plateau`` is torch's ``ReduceLROnPlateau``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, cast

import torch
from torch.optim import lr_scheduler as lrs

from trickbag.optim.schedules import NAMES, SCHEDULES
from trickbag.optim.schedules.base import Factor
from trickbag.optim.schedules.base import check_int as _check_int
from trickbag.optim.schedules.base import check_number as _check_number
from trickbag.optim.schedules.clamped import ClampedOneCycleLR
from trickbag.optim.schedules.wsd import WSD_SHAPES

__all__ = [
    "scale_lr",
    "SCHEDULERS",
    "WSD_SHAPES",
    "ClampedOneCycleLR",
    "LRSchedule",
    "add_param_group",
    "build_scheduler",
    "replan_schedule",
    "scaled_lr",
]

#: the schedule names, in the order of :data:`trickbag.optim.schedules.MODULES`
SCHEDULERS: tuple[str, ...] = NAMES
#: the names :class:`LRSchedule` takes: those with a per-group factor
_LAMBDA_NAMES = tuple(name for name, s in SCHEDULES.items() if s.factor is not None)


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
    schedule = SCHEDULES[name]
    unknown = set(kwargs) - schedule.keywords
    if unknown:
        allowed = ", ".join(sorted(schedule.keywords)) or "none"
        raise TypeError(f"unexpected option(s) {sorted(unknown)} for schedule {name!r}; allowed options: {allowed}")
    if total_steps is not None:
        _check_int(total_steps, "total_steps", minimum=1)
    elif schedule.needs_total:
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
    if warmup_steps and schedule.no_warmup:
        raise ValueError(f"schedule {name!r} cannot be combined with warmup_steps={warmup_steps}; "
                         f"{schedule.no_warmup}")
    return float(warmup_start_factor)


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

    lr_lambdas: list[Factor]  # type: ignore[assignment]  # LambdaLR types them as plain callables

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
            factor = cast("type[Factor]", SCHEDULES[name].factor)
            plan = factor.plan(dict(options), warmup_steps)
            bases = _base_lrs(optimizer)
            factor.check_groups(plan, bases)
        super().__init__(optimizer, [factor(name=name, base_lr=b, warmup_steps=warmup_steps, warmup_start=start,
                                            total_steps=total_steps, **plan) for b in bases], last_epoch)

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
        build = cast("Callable[[Any, int | None, dict[str, Any]], lrs.LRScheduler]", SCHEDULES[name].build)
        return build(optimizer, total_steps, dict(kwargs))


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
            schedule = SCHEDULES[scheduler.name]
            if schedule.resume == "refuse":
                raise ValueError(f"schedule {schedule.name!r} cannot be re-planned: {schedule.refuse_why}")
            if schedule.resume != "replan":
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
            raise ValueError(f"schedule 'onecycle' cannot be re-planned: {SCHEDULES['onecycle'].refuse_why}")
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
