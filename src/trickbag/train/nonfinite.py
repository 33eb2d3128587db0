"""Catch a NaN/Inf loss or gradient in the update where it appears; skip that update or stop the run.

A single non-finite value poisons the weights, the optimizer moments and every later step, and
the run then trains on NaN for hours. :class:`NonFiniteGuard` looks at every optimizer update
before it is applied (AFTER_BACKWARD) and vetoes it (``state.step_skipped = True``; the trainer
then zeroes the gradients and does not step the optimizer or the LR schedule). The forward passes
of a vetoed update have already moved the model's buffers (BatchNorm running statistics, which a
NaN batch turns into NaN/inf for good): the guard copies the buffers before each update and puts
them back on a veto, so a skipped update leaves the model exactly as it was.

Cost: one host synchronisation per update. Loss finiteness is or-ed on the device over the
update's micro-batches (at LOSS, no sync); gradient finiteness is the largest ``|g|`` over all
gradients from one ``torch._foreach_norm(grads, inf)`` call (an inf-norm cannot overflow, and
NaN propagates through it); both flags reach the host in one ``.tolist()``.

With SAM the second pass (at the perturbed weights) is checked the same way: a veto there makes
the trainer leave the optimizer's step (SAM puts the unperturbed weights back), and the buffers
of the first pass are restored as for any skipped update.

With fp16 mixed precision the :class:`torch.amp.GradScaler` already handles overflowing
gradients (it skips the step and lowers the scale); those skips are normal, are counted by the
trainer in ``state.skipped_steps`` and are not errors, so in fp16 the guard checks the loss only.
"""

from __future__ import annotations

import sys
from typing import Any, Literal, Optional, TextIO

import torch

from trickbag.train.plugin import Plugin
from trickbag.train.state import State

__all__ = ["NonFiniteGuard", "STOP_PREFIX"]

#: every stop reason the guard gives starts with this
STOP_PREFIX = "non-finite"

_SHOWN = 5  # skipped updates reported one by one; later ones are only counted


def _grad_flag(grads: list[torch.Tensor], device: torch.device) -> torch.Tensor:
    """A 0-d bool tensor on ``device``: True if any gradient element is NaN or infinite (no host sync)."""
    norms = torch._foreach_norm(grads, float("inf"))
    if len({(n.dtype, n.device) for n in norms}) > 1:
        norms = [n.float().to(device) for n in norms]
    return ~torch.isfinite(torch.stack(norms).max()).to(device)


class NonFiniteGuard(Plugin):
    """Veto updates whose loss or gradients are not finite; ``"skip"`` them or ``"stop"`` the run.

    Args:
        policy: ``"skip"``: skip the update, count it, and stop after ``max_in_row`` skipped
            updates in a row (a finite update resets the count); ``"stop"``: skip it and stop the
            run at once. Either way the run stops inside the epoch, so the checkpoint written at
            the end (``last.pt``) holds the last good weights at the exact position; the stop
            reason starts with :data:`STOP_PREFIX` and names the update.
        max_in_row: consecutive skipped updates tolerated by ``"skip"``.
        out: where skipped updates are reported (the first few); None for silence.

    Counters (checkpointed): :attr:`skipped` (total), :attr:`in_row`, :attr:`last_update` (1-based
    index of the last bad update); ``state.extra["nonfinite_skipped"]`` mirrors :attr:`skipped`.

    >>> import torch
    >>> from torch.utils.data import DataLoader, TensorDataset
    >>> from trickbag.train.trainer import Trainer
    >>> x, y = torch.randn(32, 3), torch.randint(0, 2, (32,))
    >>> x[8] = float("nan")  # one poisoned sample in the second batch of 8
    >>> guard = NonFiniteGuard("skip", max_in_row=3, out=None)
    >>> model = torch.nn.Linear(3, 2)
    >>> t = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1),
    ...             DataLoader(TensorDataset(x, y), batch_size=8), plugins=[guard], device="cpu")
    >>> s = t.fit()
    >>> (guard.skipped, guard.last_update, s.step, bool(torch.isfinite(t.model.weight).all()))
    (1, 2, 3, True)
    """

    name = "nonfinite"

    def __init__(self, policy: Literal["skip", "stop"] = "skip", max_in_row: int = 5,
                 out: Optional[TextIO] = sys.stderr) -> None:
        if policy not in ("skip", "stop"):
            raise ValueError(f"policy must be 'skip' or 'stop', got {policy!r}")
        if isinstance(max_in_row, bool) or not isinstance(max_in_row, int) or max_in_row < 1:
            raise ValueError(f"max_in_row must be an int >= 1, got {max_in_row!r}")
        self.policy = policy
        self.max_in_row = max_in_row
        self.out = out
        self.skipped = 0
        self.in_row = 0
        self.last_update: Optional[int] = None
        self._loss_bad: Optional[torch.Tensor] = None
        self._buffers: list[torch.Tensor] = []
        self._saved: list[torch.Tensor] = []
        self._saved_valid = False  # the copy holds the buffers from before this update's forwards
        self._restore_in_closure = False

    def on_batch_start(self, state: State) -> None:
        if self._saved_valid or not self._buffers:
            return
        torch._foreach_copy_(self._saved, self._buffers)  # no host sync; buffers are small
        self._saved_valid = True

    def on_loss(self, state: State) -> None:
        if state.loss is None:
            return
        bad = ~torch.isfinite(state.loss.detach()).all()
        self._loss_bad = bad if self._loss_bad is None else (self._loss_bad | bad)

    def on_after_backward(self, state: State) -> None:
        if state.closure_pass:  # SAM's second pass, at the perturbed weights: checked the same way
            restore = self._restore_in_closure
        else:
            restore, self._saved_valid = self._saved_valid, False
            self._restore_in_closure = restore  # the copy still holds the buffers from before the update
        device = state.device
        loss_bad = self._loss_bad if self._loss_bad is not None else torch.zeros((), dtype=torch.bool, device=device)
        self._loss_bad = None
        grad_bad = torch.zeros((), dtype=torch.bool, device=loss_bad.device)
        if not state.scaler.is_enabled():  # fp16: inf gradients are the GradScaler's business
            grads = [p.grad for g in state.optimizer.param_groups for p in g["params"] if p.grad is not None]
            if grads:
                grad_bad = _grad_flag(grads, loss_bad.device)
        bad_loss, bad_grads = torch.stack([loss_bad, grad_bad]).tolist()  # the one host sync
        if not (bad_loss or bad_grads):
            self.in_row = 0
            return
        state.step_skipped = True
        if restore:
            torch._foreach_copy_(self._buffers, self._saved)
        self.skipped += 1
        self.in_row += 1
        self.last_update = state.step + 1
        state.extra["nonfinite_skipped"] = self.skipped
        what = "loss and gradients" if bad_loss and bad_grads else ("loss" if bad_loss else "gradients")
        where = f"update {self.last_update} (epoch {state.epoch + 1}, batch {state.batch_idx + 1})"
        if state.closure_pass:
            where += " in SAM's second pass"
        if self.policy == "stop":
            state.stop(f"{STOP_PREFIX} {what} at {where}; stopped by train.nonfinite=stop")
        elif self.in_row >= self.max_in_row:
            state.stop(
                f"{STOP_PREFIX} {what} in {self.in_row} updates in a row (last at {where}); "
                f"stopped by train.max_nonfinite={self.max_in_row}"
            )
        if self.out is not None and state.dist.is_main and self.skipped <= _SHOWN:
            more = " (further skips are only counted)" if self.skipped == _SHOWN else ""
            print(f"trickbag: non-finite {what} at {where}: update skipped{more}", file=self.out, flush=True)

    def on_fit_start(self, state: State) -> None:
        self._loss_bad = None
        self._buffers = [b for b in state.model.buffers()]
        self._saved = [b.detach().clone() for b in self._buffers]
        self._saved_valid = False
        if self.skipped:
            state.extra["nonfinite_skipped"] = self.skipped

    def state_dict(self) -> dict[str, Any]:
        return {"skipped": self.skipped, "in_row": self.in_row, "last_update": self.last_update}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.skipped = int(state_dict["skipped"])
        self.in_row = int(state_dict["in_row"])
        self.last_update = state_dict.get("last_update")
