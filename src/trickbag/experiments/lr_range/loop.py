"""The LR range test in a hand-written loop: :func:`lr_find` on any model, optimizer and loader."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from trickbag.experiments.lr_range.range_test import RULES, LRFindResult, RangeTest, Rule, set_group_lrs

__all__ = ["lr_find"]


def _cycle(loader: Iterable) -> Iterator[Any]:
    """The loader's batches, started again whenever it runs out."""
    while True:
        empty = True
        for batch in loader:
            empty = False
            yield batch
        if empty:
            raise ValueError("loader yields no batches")


@contextlib.contextmanager
def _restored(model: Any, optimizer: Any) -> Iterator[None]:
    """Put the model's weights, buffers and mode, the optimizer and torch's RNG back on exit."""
    import torch

    saved_model = copy.deepcopy(model.state_dict())
    saved_opt = copy.deepcopy(optimizer.state_dict())
    saved_rng = torch.get_rng_state()
    was_training = model.training
    try:
        yield
    finally:
        model.load_state_dict(saved_model)
        optimizer.load_state_dict(saved_opt)
        optimizer.zero_grad(set_to_none=True)
        torch.set_rng_state(saved_rng)
        model.train(was_training)


def _update(model: Any, optimizer: Any, loss_fn: Callable, x: Any, y: Any) -> float:
    """One optimizer update on ``(x, y)`` (with a closure for an optimizer that takes one); its loss."""

    def closure() -> Any:
        optimizer.zero_grad(set_to_none=True)
        out = loss_fn(model(x), y)
        out.backward()
        return out

    loss = closure()
    if getattr(optimizer, "takes_closure", False):
        optimizer.step(closure)
    else:
        optimizer.step()
    return float(loss.detach())


def lr_find(
    model: Any,
    optimizer: Any,
    loader: Iterable,
    loss_fn: Callable[[Any, Any], Any] | None = None,
    *,
    steps: int = 200,
    start: float = 1e-6,
    end: float = 10.0,
    beta: float = 0.9,
    diverge: float = 4.0,
    rule: Rule = "valley",
) -> LRFindResult:
    """Run an LR range test (Smith 2017, section 3.3) on ``model`` with ``optimizer``; both are restored afterwards.

    The LR grows exponentially from ``start`` to ``end`` over ``steps`` updates
    (:class:`~trickbag.experiments.lr_range.RangeTest`); every param group gets that LR times its
    share of the first group's LR (``initial_lr`` when a scheduler set one), so per-group LR ratios
    survive. The loader is cycled if it is shorter than ``steps``. An optimizer with
    ``takes_closure = True`` (SAM) is stepped with a closure. Afterwards the model's weights,
    buffers and mode, the optimizer and torch's RNG are put back exactly as they were.

    Args:
        model: a ``torch.nn.Module`` taking ``x`` of a batch ``(x, y)``.
        optimizer: a ``torch.optim.Optimizer`` over the model's parameters.
        loader: iterable of ``(x, y)`` batches.
        loss_fn: ``loss_fn(output, y) -> scalar``; default cross-entropy.
        steps: optimizer updates (>= 2).
        start, end: first and last LR, ``0 < start < end``.
        beta: smoothing factor of the loss EMA, in [0, 1).
        diverge: stop when the smoothed loss exceeds ``diverge`` x its minimum (> 1).
        rule: suggestion rule, ``"valley"`` (default), ``"steepest"`` or ``"min10"`` (:func:`suggest_lr`).

    >>> import torch
    >>> from torch.utils.data import DataLoader, TensorDataset
    >>> g = torch.Generator().manual_seed(0)
    >>> x = torch.randn(64, 3, generator=g); y = (x[:, 0] > 0).long()
    >>> model = torch.nn.Linear(3, 2); opt = torch.optim.SGD(model.parameters(), lr=0.1)
    >>> before = model.weight.detach().clone()
    >>> res = lr_find(model, opt, DataLoader(TensorDataset(x, y), batch_size=64), steps=60, start=1e-4, end=100)
    >>> res.rule in ("valley", "min10"), torch.equal(model.weight, before), opt.param_groups[0]["lr"]
    (True, True, 0.1)
    """
    import torch
    import torch.nn.functional as F

    from trickbag.runtime import move_to

    test = RangeTest(steps, start, end, beta, diverge)
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    loss_fn = loss_fn or F.cross_entropy
    params = list(model.parameters())
    device = params[0].device if params else torch.device("cpu")
    bases: list[float] = []
    with _restored(model, optimizer):
        model.train()
        batches = _cycle(loader)
        while not test.done:
            lr = test.next_lr
            set_group_lrs(optimizer.param_groups, lr, bases)
            x, y = move_to(next(batches), device)[:2]
            test.record(lr, _update(model, optimizer, loss_fn, x, y))
    return test.result(rule)
