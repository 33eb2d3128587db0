"""LR range test (Smith 2017, "Cyclical Learning Rates for Training Neural Networks", section 3.3).

Train for ``steps`` optimizer updates while the learning rate grows exponentially from ``start`` to
``end`` (``lr_i = start * (end / start) ** (i / (steps - 1))``), record the loss of every batch,
smooth it with a bias-corrected exponential moving average

    a_i = beta * a_{i-1} + (1 - beta) * loss_i,      smoothed_i = a_i / (1 - beta ** (i + 1)),

stop as soon as the smoothed loss exceeds ``diverge`` times its minimum (or a loss is not finite),
and put the model, the optimizer and torch's RNG back exactly as they were. The suggested LR follows
one of two rules, reported with the result:

* ``steepest``: the LR where the smoothed loss falls fastest against ``log10(lr)`` (the most negative
  ``np.gradient``), looking only at the part of the curve before its minimum;
* ``min10``: the LR of the smoothed minimum divided by 10 (the loss still falls there, well short
  of divergence).

The smoothing lags the raw loss by about ``beta / (1 - beta)`` steps, which shifts the curve towards
larger LRs; the default ``beta = 0.9`` keeps that lag at ~10 steps (``0.98``, common elsewhere, lags
~50 steps, 1.75 decades of a 200-step sweep over 7 decades).
"""

from __future__ import annotations

import copy
import dataclasses
import math
from pathlib import Path
from typing import Any, Callable, Iterable, Literal, Optional, Sequence

import numpy as np

from trickbag.experiments import ExperimentError

__all__ = ["LRFindResult", "lr_find", "smooth_losses", "suggest_lr", "plot_lr_find", "lr_find_recipe"]

Rule = Literal["steepest", "min10"]
RULES = ("steepest", "min10")
RULE_TEXT = {
    "steepest": "steepest descent of the smoothed loss against log10(lr), before its minimum",
    "min10": "lr at the minimum of the smoothed loss / 10",
}


def smooth_losses(losses: Sequence[float], beta: float = 0.9) -> list[float]:
    """Bias-corrected exponential moving average of ``losses`` (Adam's correction, Kingma & Ba 2015).

    ``smoothed_i = a_i / (1 - beta^(i+1))`` with ``a_i = beta a_{i-1} + (1 - beta) loss_i``, ``a_{-1} = 0``;
    the first value equals the first loss, and a constant sequence stays constant.

    >>> smooth_losses([2.0, 2.0, 2.0], beta=0.9)
    [2.0, 2.0, 2.0]
    >>> [round(v, 4) for v in smooth_losses([1.0, 0.0], beta=0.5)]
    [1.0, 0.3333]
    """
    if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not 0.0 <= beta < 1.0:
        raise ValueError(f"beta must be a number in [0, 1), got {beta!r}")
    out, avg = [], 0.0
    for i, loss in enumerate(losses):
        avg = beta * avg + (1.0 - beta) * float(loss)
        out.append(avg / (1.0 - beta ** (i + 1)))
    return out


def suggest_lr(lrs: Sequence[float], smoothed: Sequence[float], rule: Rule = "steepest") -> tuple[float, str]:
    """The suggested LR of a range test and the rule actually used (``steepest`` falls back to ``min10``).

    Args:
        lrs: increasing learning rates, one per step.
        smoothed: smoothed loss at each LR (same length).
        rule: ``"steepest"`` or ``"min10"`` (see the module docstring).

    Returns:
        ``(lr, rule_used)``. ``steepest`` needs at least 3 points before the minimum and a falling
        curve; otherwise ``min10`` is used and returned as the rule.

    >>> lrs = [1e-3, 1e-2, 1e-1, 1.0, 10.0]
    >>> suggest_lr(lrs, [1.0, 0.9, 0.3, 0.2, 5.0])  # central differences per decade: -0.1, -0.35, -0.35, -0.1
    (0.01, 'steepest')
    >>> suggest_lr(lrs, [1.0, 0.9, 0.3, 0.2, 5.0], "min10")
    (0.1, 'min10')
    """
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    x = np.asarray(lrs, dtype=np.float64)
    y = np.asarray(smoothed, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape or x.size == 0:
        raise ValueError(f"lrs and smoothed must be 1-D and of equal, non-zero length; got {x.shape} and {y.shape}")
    if np.any(x <= 0) or np.any(np.diff(x) <= 0):
        raise ValueError("lrs must be positive and strictly increasing")
    finite = np.isfinite(y)
    if not finite.any():
        raise ValueError("smoothed holds no finite loss")
    i_min = int(np.nanargmin(np.where(finite, y, np.nan)))
    if rule == "steepest" and i_min >= 2:
        grad = np.gradient(y[: i_min + 1], np.log10(x[: i_min + 1]))
        k = int(np.argmin(grad))
        if grad[k] < 0:
            return float(x[k]), "steepest"
    return float(x[i_min] / 10.0), "min10"


@dataclasses.dataclass
class LRFindResult:
    """Record of an LR range test."""

    lrs: list[float]  #: LR of each step (group 0)
    losses: list[float]  #: raw batch loss at each step
    smoothed: list[float]  #: bias-corrected EMA of the losses
    suggestion: float  #: suggested LR
    rule: str  #: rule used for the suggestion ("steepest" or "min10")
    stop_reason: Optional[str]  #: why the sweep ended early, None if it ran all steps

    @property
    def rule_text(self) -> str:
        return RULE_TEXT[self.rule]

    @property
    def min_lr(self) -> float:
        """LR at the minimum of the smoothed loss."""
        return self.lrs[int(np.nanargmin(np.asarray(self.smoothed, dtype=np.float64)))]


def _move(obj: Any, device: Any) -> Any:
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_move(o, device) for o in obj)
    return obj


def lr_find(
    model: Any,
    optimizer: Any,
    loader: Iterable,
    loss_fn: Optional[Callable[[Any, Any], Any]] = None,
    *,
    steps: int = 200,
    start: float = 1e-6,
    end: float = 10.0,
    beta: float = 0.9,
    diverge: float = 4.0,
    rule: Rule = "steepest",
) -> LRFindResult:
    """Run an LR range test on ``model`` with ``optimizer``; the model and optimizer are restored afterwards.

    Every param group gets ``lr_i`` times its share of the first group's LR (``initial_lr`` when a
    scheduler set one), so per-group LR ratios survive. The loader is cycled if it is shorter than
    ``steps``. An optimizer with ``takes_closure = True`` (SAM) is stepped with a closure.

    Args:
        model: a ``torch.nn.Module`` taking ``x`` of a batch ``(x, y)``.
        optimizer: a ``torch.optim.Optimizer`` over the model's parameters.
        loader: iterable of ``(x, y)`` batches.
        loss_fn: ``loss_fn(output, y) -> scalar``; default cross-entropy.
        steps: optimizer updates (>= 2).
        start, end: first and last LR, ``0 < start < end``.
        beta: smoothing factor of the loss EMA, in [0, 1).
        diverge: stop when the smoothed loss exceeds ``diverge`` x its minimum (> 1).
        rule: suggestion rule, ``"steepest"`` or ``"min10"``.

    >>> import torch
    >>> from torch.utils.data import DataLoader, TensorDataset
    >>> g = torch.Generator().manual_seed(0)
    >>> x = torch.randn(64, 3, generator=g); y = (x[:, 0] > 0).long()
    >>> model = torch.nn.Linear(3, 2); opt = torch.optim.SGD(model.parameters(), lr=0.1)
    >>> before = model.weight.detach().clone()
    >>> res = lr_find(model, opt, DataLoader(TensorDataset(x, y), batch_size=64), steps=60, start=1e-4, end=100)
    >>> res.rule in ("steepest", "min10"), torch.equal(model.weight, before), opt.param_groups[0]["lr"]
    (True, True, 0.1)
    """
    import torch
    import torch.nn.functional as F

    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 2:
        raise ValueError(f"steps must be an integer >= 2, got {steps!r}")
    if not (isinstance(start, (int, float)) and isinstance(end, (int, float)) and 0 < start < end):
        raise ValueError(f"need 0 < start < end for the LR sweep, got start={start!r}, end={end!r}")
    if isinstance(diverge, bool) or not isinstance(diverge, (int, float)) or not diverge > 1:
        raise ValueError(f"diverge must be a number > 1 (times the best smoothed loss), got {diverge!r}")
    if not 0.0 <= beta < 1.0:
        raise ValueError(f"beta must be a number in [0, 1), got {beta!r}")
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    loss_fn = loss_fn or F.cross_entropy
    params = list(model.parameters())
    device = params[0].device if params else torch.device("cpu")
    base = [float(g.get("initial_lr", g["lr"])) for g in optimizer.param_groups]
    ratios = [b / base[0] if base[0] > 0 else 1.0 for b in base]
    takes_closure = bool(getattr(optimizer, "takes_closure", False))

    saved_model = copy.deepcopy(model.state_dict())
    saved_opt = copy.deepcopy(optimizer.state_dict())
    saved_rng = torch.get_rng_state()
    was_training = model.training
    lrs: list[float] = []
    losses: list[float] = []
    smoothed: list[float] = []
    stop_reason: Optional[str] = None
    try:
        model.train()
        batches = iter(loader)
        avg, best = 0.0, math.inf
        factor = (end / start) ** (1.0 / (steps - 1))
        for i in range(steps):
            lr = start * factor**i
            for g, r in zip(optimizer.param_groups, ratios):
                g["lr"] = lr * r
            try:
                batch = next(batches)
            except StopIteration:
                batches = iter(loader)
                try:
                    batch = next(batches)
                except StopIteration:
                    raise ValueError("loader yields no batches") from None
            x, y = _move(batch, device)[:2]

            def closure() -> Any:
                optimizer.zero_grad(set_to_none=True)
                out = loss_fn(model(x), y)
                out.backward()
                return out

            loss = closure()
            if takes_closure:
                optimizer.step(closure)
            else:
                optimizer.step()
            value = float(loss.detach())
            lrs.append(lr)
            losses.append(value)
            if not math.isfinite(value):
                smoothed.append(math.inf)
                stop_reason = f"loss not finite at lr {lr:.3g}"
                break
            avg = beta * avg + (1.0 - beta) * value
            s = avg / (1.0 - beta ** (i + 1))
            smoothed.append(s)
            best = min(best, s)
            if s > diverge * best:
                stop_reason = f"smoothed loss above {diverge:g}x its minimum"
                break
    finally:
        model.load_state_dict(saved_model)
        optimizer.load_state_dict(saved_opt)
        optimizer.zero_grad(set_to_none=True)
        torch.set_rng_state(saved_rng)
        model.train(was_training)
    suggestion, used = suggest_lr(lrs, smoothed, rule)
    return LRFindResult(lrs, losses, smoothed, suggestion, used, stop_reason)


def plot_lr_find(result: LRFindResult, path: str | Path) -> Path:
    """Loss (raw and smoothed) against LR on a log axis, with the suggestion and the minimum marked."""

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from trickbag._files import atomic_save_figure

    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(result.lrs, result.losses, color="C0", alpha=0.3, lw=1, label="loss")
    sm = [s if math.isfinite(s) else np.nan for s in result.smoothed]
    ax.plot(result.lrs, sm, color="C0", lw=2, label="smoothed loss")
    ax.axvline(result.suggestion, color="C3", ls="--", label=f"suggested {result.suggestion:.2g} ({result.rule})")
    ax.axvline(result.min_lr, color="C7", ls=":", label=f"minimum at {result.min_lr:.2g}")
    ax.set_xscale("log")
    finite = [v for v in sm if not math.isnan(v)]
    if finite:  # keep the diverging tail from squashing the interesting part
        lo, hi = min(finite), max(finite[0], min(finite) * 4)
        ax.set_ylim(lo - 0.05 * (hi - lo), hi + 0.1 * (hi - lo))
    ax.set_xlabel("learning rate")
    ax.set_ylabel("training loss")
    ax.set_title("LR range test")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return atomic_save_figure(fig, path)


def lr_find_recipe(
    recipe: str,
    overrides: Sequence[str] = (),
    *,
    steps: int = 200,
    start: float = 1e-6,
    end: float = 10.0,
    beta: float = 0.9,
    diverge: float = 4.0,
    rule: Rule = "steepest",
    out: Optional[str | Path] = None,
) -> tuple[LRFindResult, list[Path]]:
    """Range test on the model, optimizer, loss and training data a recipe builds; writes PNG + CSV.

    Plug-ins acting on loop events (e.g. mixup at BATCH_START) do not run during the test; the
    recipe's loss function and optimizer (including a SAM wrapper) do.
    """
    from trickbag.config import load_recipe
    from trickbag._files import atomic_write_text
    from trickbag.experiments.report import csv_text

    if not 0 < start < end:
        raise ExperimentError(f"--start must be below --end (both > 0), got --start {start:g} --end {end:g}")
    if not 0.0 <= beta < 1.0:
        raise ExperimentError(f"--beta must be in [0, 1), got {beta:g}")
    if not diverge > 1.0:
        raise ExperimentError(f"--diverge must be > 1 (times the best smoothed loss), got {diverge:g}")
    if steps < 2:
        raise ExperimentError(f"--steps must be >= 2, got {steps}")
    r = load_recipe(recipe, list(overrides))
    from trickbag.train.build import build

    _, ctx = build(r)
    try:
        res = lr_find(ctx.model, ctx.optimizer, ctx.train_loader, ctx.loss_fn, steps=steps, start=start, end=end,
                      beta=beta, diverge=diverge, rule=rule)
    except ValueError as exc:  # e.g. the very first loss is not finite
        raise ExperimentError(f"lr-find on recipe {r.name!r}: {exc}") from None
    out_dir = Path(out) if out is not None else Path(r.run.dir) / f"lr-find-{r.name}"
    if out_dir.exists() and not out_dir.is_dir():
        raise ExperimentError(f"--out {str(out_dir)!r} is a file; give a folder")
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = [[i, lr, loss, s] for i, (lr, loss, s) in enumerate(zip(res.lrs, res.losses, res.smoothed))]
    csv_path = out_dir / "lr_find.csv"
    atomic_write_text(csv_path, csv_text(["step", "lr", "loss", "smoothed"], rows))
    png = plot_lr_find(res, out_dir / "lr_find.png")
    return res, [png, csv_path]
