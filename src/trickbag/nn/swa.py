"""Stochastic weight averaging (SWA): an equal average of weights, with BatchNorm statistics recomputed."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel
from torch.optim.swa_utils import update_bn as _torch_update_bn

from trickbag.nn._weights import LiveLists, TensorLists, copy_tensors, swapped_tensors
from trickbag.nn.freeze import EvalOnlyTrain, has_frozen_stats
from trickbag.nn.loading import unwrap

__all__ = ["SWA"]

_BatchNorm = nn.modules.batchnorm._BatchNorm


class SWA:
    """Keep the equal (arithmetic) average of a model's weights over the calls of :meth:`update`.

    Source: Izmailov et al. 2018, "Averaging Weights Leads to Wider Optima and Better
    Generalization" (https://arxiv.org/abs/1803.05407): run SGD at a constant or cyclic LR
    (e.g. :class:`torch.optim.swa_utils.SWALR`, which stays with the caller) and average the
    weights it visits, ``w_swa = (1 / n) * sum_i w_i``; then recompute the BatchNorm statistics
    for the averaged weights with one pass over the training data (:meth:`update_bn`).

    **Average.** :meth:`update` adds the model's current parameters to the running mean
    ``w_swa <- w_swa + (w - w_swa) / (n + 1)`` (``torch.optim.swa_utils.AveragedModel``; the
    first call copies) and copies the model's buffers; the BatchNorm statistics are then stale
    (:attr:`bn_stale`) until :meth:`update_bn` recomputes them.

    **BatchNorm statistics.** :meth:`update_bn` runs ``torch.optim.swa_utils.update_bn`` on the
    averaged copy under :func:`torch.random.fork_rng` (the caller's random stream, e.g. dropout
    or augmentation draws, is not disturbed).  BatchNorm layers kept in eval mode on purpose,
    such as those frozen by :func:`trickbag.nn.freeze` with ``freeze_bn_stats=True`` (as the live
    model has them at the last :meth:`update`), keep their statistics.

    **Wrappers.** DDP / DataParallel (``.module``) and ``torch.compile`` (``._orig_mod``) are
    unwrapped, at construction and in :meth:`update`, :meth:`swapped`, :meth:`copy_to`.

    Args:
        model: the live model; it is deep-copied (``swa.module``: eval mode, ``requires_grad=False``).

    >>> model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
    >>> swa = SWA(model)
    >>> for shift in (1.0, 3.0):
    ...     with torch.no_grad():
    ...         _ = model[0].bias.fill_(shift)
    ...     swa.update(model)
    >>> swa.module[0].bias.tolist()             # the mean of the two snapshots
    [2.0, 2.0]
    >>> swa.n_averaged, swa.bn_stale
    (2, True)
    >>> swa.update_bn([torch.randn(8, 2, generator=torch.Generator().manual_seed(0))])
    >>> swa.bn_stale
    False
    >>> with swa.swapped(model):
    ...     torch.equal(model[0].bias, swa.module[0].bias)
    True
    >>> model[0].bias.tolist()                  # the raw weights are back
    [3.0, 3.0]
    """

    def __init__(self, model: nn.Module) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        source = unwrap(model)
        self._averaged = AveragedModel(source)
        self.module: nn.Module = self._averaged.module
        self.module.eval()
        self.module.requires_grad_(False)
        for p in self.module.parameters():
            p.grad = None
        self._bn_stale = False
        self._lists = TensorLists(self.module)
        self._live = LiveLists(self._lists, "SWA")
        self._live.get(source)

    # -- state -----------------------------------------------------------------------------

    @property
    def n_averaged(self) -> int:
        """Number of :meth:`update` calls averaged so far."""
        return int(self._averaged.n_averaged)

    @property
    def bn_stale(self) -> bool:
        """True when weights were averaged since the BatchNorm statistics were last recomputed."""
        return self._bn_stale

    # -- public API ------------------------------------------------------------------------

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        """Add ``model``'s current parameters to the average, copy its buffers; mark BN statistics stale."""
        source = unwrap(model)
        self._live.get(source)  # same parameter/buffer names and shapes as the averaged copy
        self._averaged.update_parameters(source)
        self._sync_frozen_stats(source)
        self._bn_stale = True

    def _sync_frozen_stats(self, source: nn.Module) -> None:
        """Mirror which normalisation layers have frozen statistics (:func:`trickbag.nn.freeze`) in the live model."""
        for live, avg in zip(source.modules(), self.module.modules()):
            frozen, avg_frozen = has_frozen_stats(live), has_frozen_stats(avg)
            if frozen and not avg_frozen:
                avg.train = EvalOnlyTrain(avg)  # type: ignore[method-assign]
            elif avg_frozen and not frozen:
                del avg.train
        self.module.eval()

    def update_bn(self, loader: Iterable[Any], *, device: torch.device | str | None = None) -> None:
        """Recompute the averaged copy's BatchNorm running statistics with one pass over ``loader``.

        ``loader`` yields input tensors or ``(input, ...)`` tuples (only the first item is used),
        moved to ``device`` when it is given.  Runs under :func:`torch.random.fork_rng` and
        ``torch.no_grad()``; BatchNorm layers that stay in eval mode after ``module.train()``
        (statistics frozen) keep their running mean, variance and batch count.
        """
        m = self.module
        m.train()
        kept = [
            (b, [t.clone() for t in (b.running_mean, b.running_var, b.num_batches_tracked)])
            for b in m.modules()
            if isinstance(b, _BatchNorm) and not b.training and b.running_mean is not None
            and b.running_var is not None and b.num_batches_tracked is not None
        ]
        devices = {t.device.index or 0 for t in self._lists.all() if t.device.type == "cuda"}
        if device is not None and torch.device(device).type == "cuda":
            devices.add(torch.device(device).index or 0)
        try:
            with torch.random.fork_rng(devices=sorted(devices)), torch.no_grad():
                _torch_update_bn(loader, m, device=device)  # type: ignore[arg-type]
                for b, saved in kept:
                    for t, s in zip((b.running_mean, b.running_var, b.num_batches_tracked), saved):
                        t.copy_(s)  # type: ignore[union-attr]
        finally:
            m.eval()
        self._bn_stale = False

    @torch.no_grad()
    def copy_to(self, model: nn.Module) -> None:
        """Copy the averaged parameters and buffers into ``model`` in place (``Tensor.copy_``)."""
        copy_tensors(self._live.get(model).all(), self._lists.all())

    @contextmanager
    def swapped(self, model: nn.Module) -> Iterator[nn.Module]:
        """Context manager: ``model`` holds the averaged weights (parameters and buffers) inside, its own after.

        Same contract as :meth:`trickbag.nn.EMA.swapped`: copies in place, the raw tensors are
        restored bit for bit on exit, even when the block raises.  Yields ``model``.
        """
        with swapped_tensors(self._live.get(model).all(), self._lists.all()):
            yield model

    def state_dict(self) -> dict[str, Any]:
        """Averaged weights (``"module"``), ``"n_averaged"`` and ``"bn_stale"``."""
        return {"module": self.module.state_dict(), "n_averaged": self.n_averaged, "bn_stale": self._bn_stale}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved; later updates continue the same average."""
        missing = [k for k in ("module", "n_averaged", "bn_stale") if k not in state_dict]
        if missing:
            raise ValueError(f"SWA state_dict lacks {missing}; expected the output of SWA.state_dict()")
        self.module.load_state_dict(state_dict["module"])
        self._averaged.n_averaged.fill_(int(state_dict["n_averaged"]))
        self._bn_stale = bool(state_dict["bn_stale"])

    def __repr__(self) -> str:
        return f"SWA(n_averaged={self.n_averaged}, bn_stale={self._bn_stale})"
