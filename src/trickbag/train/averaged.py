"""Optimizers that train one set of weights and are evaluated at another (schedule-free AdamW/SGD, Defazio et
al. 2024): they switch the model's parameters with ``optimizer.train()`` / ``optimizer.eval()``. The trainer
evaluates, checkpoints and finishes in ``eval`` mode and trains in ``train`` mode; BatchNorm statistics, gathered
during training at the training weights, are recalibrated at the evaluated weights first
(:func:`recalibrate_batchnorm`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from trickbag import runtime
from trickbag.nn import unwrap

__all__ = ["has_modes", "recalibrate_batchnorm", "CALIBRATION_BATCHES", "ScheduleFreeModes"]

#: training batches BatchNorm statistics are recalibrated on (the first ones of the training set, in order)
CALIBRATION_BATCHES = 20


def has_modes(optimizer: Any) -> bool:
    """Whether ``optimizer`` switches the model between training and evaluated weights (schedule-free)."""
    return callable(getattr(optimizer, "train", None)) and callable(getattr(optimizer, "eval", None)) \
        and not isinstance(optimizer, torch.nn.Module)


def _calibration_inputs(loader: Any, batches: int) -> Iterator[Any]:
    """The inputs of the first ``batches`` training batches in index order, read from the loader's dataset (so the
    sampler, its position and the workers are not touched); a loader without a dataset: its first batches."""
    ds, size, collate = getattr(loader, "dataset", None), getattr(loader, "batch_size", None), \
        getattr(loader, "collate_fn", None)
    if ds is None or not size or collate is None:
        for i, batch in enumerate(loader):
            if i >= batches:
                return
            yield batch[0]
        return
    n = min(len(ds), batches * size)
    for start in range(0, n, size):
        idx = list(range(start, min(n, start + size)))
        gather = getattr(ds, "__getitems__", None)
        yield collate(gather(idx) if gather is not None else [ds[i] for i in idx])[0]


def recalibrate_batchnorm(model: torch.nn.Module, loader: Any, device: torch.device,
                          batches: int = CALIBRATION_BATCHES) -> int:
    """Recompute every BatchNorm layer's running statistics as a plain average over the first ``batches``
    training batches at the model's current weights (train-mode forward passes without gradients). The random
    state is put back after, so the run draws what it would have drawn. Returns the number of layers."""
    bns = [m for m in model.modules()
           if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.track_running_stats]
    if not bns:
        return 0
    rng, was_training, momenta = runtime.get_rng_state(), model.training, [m.momentum for m in bns]
    try:
        for m in bns:
            m.reset_running_stats()
            m.momentum = None  # cumulative average over the calibration batches
        model.train()
        with torch.no_grad():
            for x in _calibration_inputs(loader, batches):
                model(runtime.move_to(x, device))  # noqa: TB201 (train mode on purpose: BatchNorm statistics)
    finally:
        for m, momentum in zip(bns, momenta):
            m.momentum = momentum
        model.train(was_training)
        runtime.set_rng_state(rng)
    return len(bns)


class ScheduleFreeModes:
    """The mode of a schedule-free optimizer during :meth:`Trainer.fit`: ``train`` while training (:meth:`start`),
    ``eval`` after it (:meth:`finish`, BatchNorm recalibrated), and ``eval`` for a block that evaluates or stores
    the weights (:meth:`evaluated`). Reads the optimizer, model and loader from ``state`` (a
    :class:`~trickbag.plugin.state.State`) when called: a trick may have replaced the optimizer at set-up."""

    def __init__(self, state: Any) -> None:
        self.state = state
        self.active = False  # the optimizer is in train mode: the model holds the training weights
        self._recalibrated_at = -1  # the update at which BatchNorm statistics were last recalibrated

    def start(self) -> None:
        """At fit start: a schedule-free optimizer trains at the training weights."""
        if has_modes(self.state.optimizer):
            self.state.optimizer.train()
            self.active = True

    def finish(self) -> None:
        """At fit end: the model leaves at the evaluated weights, BatchNorm recalibrated for them."""
        if self.active:
            s = self.state
            s.optimizer.eval()
            self.active = False
            recalibrate_batchnorm(unwrap(s.model), s.train_loader, s.device)

    @contextlib.contextmanager
    def evaluated(self, *, recalibrate: bool) -> Iterator[None]:
        """While training with a schedule-free optimizer: the evaluated weights for the block (BatchNorm
        statistics recalibrated for them when asked), the training weights again after. Otherwise nothing."""
        if not self.active:
            yield
            return
        s = self.state
        opt = s.optimizer
        opt.eval()
        try:
            if recalibrate and self._recalibrated_at != s.step:
                recalibrate_batchnorm(unwrap(s.model), s.train_loader, s.device)
                self._recalibrated_at = s.step
            yield
        finally:
            opt.train()
