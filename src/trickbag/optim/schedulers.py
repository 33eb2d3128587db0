"""Learning-rate schedules with optional linear warm-up, built from ``torch.optim.lr_scheduler``."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.optim import lr_scheduler as lrs

__all__ = ["SCHEDULERS", "build_scheduler", "scaled_lr"]

SCHEDULERS: tuple[str, ...] = (
    "constant",
    "step",
    "multistep",
    "cosine",
    "onecycle",
    "linear",
    "polynomial",
    "plateau",
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
    "plateau": frozenset(
        {"mode", "factor", "patience", "threshold", "threshold_mode", "cooldown", "min_lr", "eps"}
    ),
}
_NEEDS_TOTAL = frozenset({"cosine", "onecycle", "linear", "polynomial"})


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

    * warm-up (:math:`t < W`): :math:`\eta\,(s + (1 - s)\,t / W)` (``LinearLR`` + ``SequentialLR``;
      Goyal et al. 2017).  ``warmup_start_factor`` defaults to :math:`1/(W+1)`, so the first LR is
      :math:`\eta/(W+1) > 0` and the LR reaches :math:`\eta` exactly when warm-up ends;
    * ``constant``: :math:`\eta`;
    * ``step`` (``step_size``, ``gamma=0.1``): :math:`\eta\,\gamma^{\lfloor u / \text{step\_size}\rfloor}`;
      ``step_size`` counts updates after warm-up;
    * ``multistep`` (``milestones``, ``gamma=0.1``): :math:`\eta\,\gamma^{\#\{m \le t\}}`; milestones
      are *absolute* update counts and must be greater than ``warmup_steps``;
    * ``cosine`` (``min_lr=0``, an absolute LR shared by all groups; Loshchilov & Hutter 2017):
      :math:`\text{min\_lr} + (\eta - \text{min\_lr})(1 + \cos(\pi u / L)) / 2`, equal to
      :math:`\eta` right after warm-up and to ``min_lr`` after ``total_steps`` updates
      (``CosineAnnealingLR``; stepping past ``total_steps`` makes it rise again);
    * ``linear`` (``end_factor=0``): :math:`\eta\,(1 + (\text{end\_factor} - 1)\,u / L)`;
    * ``polynomial`` (``power=1``): :math:`\eta\,(1 - u / L)^{\text{power}}`;
    * ``onecycle`` (Smith & Topin 2019, ``OneCycleLR`` with ``max_lr`` = each group's LR): has its
      own warm-up (``pct_start``), so ``warmup_steps`` must be 0.  Momentum is cycled only if the
      optimizer already uses momentum or Adam betas (``cycle_momentum`` overrides this);
    * ``plateau``: ``ReduceLROnPlateau``; step it with the monitored metric,
      ``scheduler.step(val_loss)``.  It cannot be combined with warm-up.

    Each param group keeps its own base LR (two groups with LRs 0.1 and 0.01 follow the same
    curve, in proportion; with ``cosine`` both end at the shared absolute ``min_lr``).

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
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"build_scheduler: optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}")
    if not isinstance(name, str) or name not in SCHEDULERS:
        raise ValueError(f"build_scheduler: unknown schedule name {name!r}; allowed: {', '.join(SCHEDULERS)}")
    unknown = set(kwargs) - _OPTIONS[name]
    if unknown:
        allowed = ", ".join(sorted(_OPTIONS[name])) or "none"
        raise TypeError(
            f"build_scheduler: unexpected option(s) {sorted(unknown)} for schedule {name!r}; allowed options: {allowed}"
        )
    if total_steps is not None:
        _check_int(total_steps, "total_steps", minimum=1)
    elif name in _NEEDS_TOTAL:
        raise ValueError(f"build_scheduler: schedule {name!r} needs total_steps= (the number of optimizer updates)")
    _check_int(warmup_steps, "warmup_steps", minimum=0)
    if warmup_start_factor is None:
        warmup_start_factor = 1.0 / (warmup_steps + 1)
    elif (
        isinstance(warmup_start_factor, bool)
        or not isinstance(warmup_start_factor, (int, float))
        or not 0.0 < warmup_start_factor <= 1.0
    ):
        raise ValueError(
            "build_scheduler: warmup_start_factor must be in (0, 1] (a fraction of the base LR; "
            f"0 would make the first update use LR 0), got {warmup_start_factor!r}"
        )
    if warmup_steps and total_steps is not None and warmup_steps >= total_steps:
        raise ValueError(
            f"build_scheduler: warmup_steps={warmup_steps} must be smaller than total_steps={total_steps}"
        )
    if warmup_steps and name in ("plateau", "onecycle"):
        hint = "use pct_start= for its own warm-up" if name == "onecycle" else "build the warm-up separately"
        raise ValueError(f"build_scheduler: schedule {name!r} cannot be combined with warmup_steps={warmup_steps}; {hint}")

    main_steps = None if total_steps is None else total_steps - warmup_steps
    main = _build_main(optimizer, name, main_steps, warmup_steps, dict(kwargs))
    if not warmup_steps:
        return main
    warmup = lrs.LinearLR(optimizer, start_factor=float(warmup_start_factor), end_factor=1.0, total_iters=warmup_steps)
    return lrs.SequentialLR(optimizer, schedulers=[warmup, main], milestones=[warmup_steps])


def _build_main(
    optimizer: torch.optim.Optimizer, name: str, steps: int | None, warmup_steps: int, kw: dict[str, Any]
) -> Any:
    if name == "constant":
        return lrs.ConstantLR(optimizer, factor=1.0, total_iters=0)
    if name == "step":
        if "step_size" not in kw:
            raise ValueError("build_scheduler: schedule 'step' needs step_size= (updates between LR decays)")
        _check_int(kw["step_size"], "step_size", minimum=1)
        return lrs.StepLR(optimizer, step_size=kw["step_size"], gamma=_gamma(kw))
    if name == "multistep":
        milestones = kw.get("milestones")
        if milestones is None:
            raise ValueError("build_scheduler: schedule 'multistep' needs milestones= (a list of update counts)")
        milestones = list(milestones)
        for m in milestones:
            _check_int(m, "milestones[...]", minimum=warmup_steps + 1)
        if milestones != sorted(milestones):
            raise ValueError(f"build_scheduler: milestones must be increasing, got {milestones}")
        return lrs.MultiStepLR(optimizer, milestones=[m - warmup_steps for m in milestones], gamma=_gamma(kw))
    if name == "cosine":
        min_lr = kw.get("min_lr", 0.0)
        _check_number(min_lr, "min_lr", minimum=0.0)
        for i, group in enumerate(optimizer.param_groups):
            if float(group["lr"]) < min_lr:
                raise ValueError(
                    f"build_scheduler: min_lr={min_lr} is above param_groups[{i}]['lr']={float(group['lr'])}; "
                    "the cosine would raise that group's LR. Use a min_lr no larger than every group's LR"
                )
        return lrs.CosineAnnealingLR(optimizer, T_max=steps, eta_min=float(min_lr))
    if name == "linear":
        end_factor = kw.get("end_factor", 0.0)
        _check_number(end_factor, "end_factor", minimum=0.0, maximum=1.0)
        return lrs.LinearLR(optimizer, start_factor=1.0, end_factor=float(end_factor), total_iters=steps)
    if name == "polynomial":
        power = kw.get("power", 1.0)
        _check_number(power, "power", minimum=0.0)
        return lrs.PolynomialLR(optimizer, total_iters=steps, power=float(power))
    if name == "onecycle":
        if "pct_start" in kw:
            _check_number(kw["pct_start"], "pct_start", minimum=0.0, maximum=1.0)
            kw["pct_start"] = float(kw["pct_start"])
        if kw.get("cycle_momentum") is None:
            kw["cycle_momentum"] = "betas" in optimizer.defaults or any(
                float(g.get("momentum", 0.0) or 0.0) > 0 for g in optimizer.param_groups
            )
        max_lr = [float(g["lr"]) for g in optimizer.param_groups]
        return lrs.OneCycleLR(optimizer, max_lr=max_lr, total_steps=steps, **kw)
    # plateau
    return lrs.ReduceLROnPlateau(optimizer, **kw)


def _gamma(kw: dict[str, Any]) -> float:
    gamma = kw.get("gamma", 0.1)
    _check_number(gamma, "gamma", minimum=0.0)
    return float(gamma)


def _check_int(value: Any, name: str, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"build_scheduler: {name} must be an integer >= {minimum}, got {value!r}")


def _check_number(value: Any, name: str, *, minimum: float, maximum: float = math.inf) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not minimum <= value <= maximum
    ):
        allowed = f">= {minimum}" if maximum == math.inf else f"in [{minimum}, {maximum}]"
        raise ValueError(f"build_scheduler: {name} must be a number {allowed}, got {value!r}")


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
