"""Catch a NaN/Inf loss or gradient in the update where it appears; skip that update or stop the run.

A single non-finite value poisons the weights, the optimizer moments and every later step, and
the run then trains on NaN for hours. :class:`NonFiniteGuard`, a part of the trainer
(``Trainer(nonfinite="skip")``), looks at every optimizer update before it is applied (right after
AFTER_BACKWARD) and vetoes it (``state.veto_update(...)``; the trainer
then zeroes the gradients and does not step the optimizer or the LR schedule). The forward passes
of a vetoed update have already moved the model's buffers (BatchNorm running statistics, which a
NaN batch turns into NaN/inf for good): the guard copies the buffers before each update and puts
them back on a veto, so a skipped update leaves the model exactly as it was.

Buffers count too: a forward pass that turned a BatchNorm running variance into inf (a huge
learning rate does that before the loss goes NaN) vetoes the update like a NaN gradient, so the
buffers a checkpoint saves stay finite.

Cost: one host synchronisation per update. Loss finiteness is or-ed on the device over the
update's micro-batches (no sync); gradient and buffer finiteness are the largest ``|v|`` from
one ``torch._foreach_norm(tensors, inf)`` call each (an inf-norm cannot overflow, and NaN
propagates through it); the three flags reach the host in one ``.tolist()``.

With SAM the second pass (at the perturbed weights) is checked the same way: a veto there makes
the trainer leave the optimizer's step (SAM puts the unperturbed weights back), and the buffers
of the first pass are restored as for any skipped update.

With fp16 mixed precision the :class:`torch.amp.GradScaler` already handles overflowing
gradients (it skips the step and lowers the scale); those skips are normal, are counted by the
trainer in ``state.skipped_steps`` and are not errors, so in fp16 the guard checks the loss and the
buffers, not the gradients.
"""

from __future__ import annotations

import sys
from typing import Any, Literal, TextIO

import torch

from trickbag.plugin.state import State, StopReason
from trickbag.train.sharded import is_sharded, to_local

__all__ = ["NonFiniteGuard"]

_SHOWN = 5  # skipped updates reported one by one; later ones are only counted


def _any_nonfinite(tensors: list[torch.Tensor], device: torch.device) -> torch.Tensor:
    """A 0-d bool tensor on ``device``: True if any element is NaN or infinite (no host sync)."""
    groups: dict[tuple[torch.device, torch.dtype], list[torch.Tensor]] = {}
    for t in tensors:
        local = to_local(t)  # FSDP: this process's shards
        groups.setdefault((local.device, local.dtype), []).append(local)
    found = torch.zeros((), device=device)
    for (dev, _), group in groups.items():
        # GradScaler's fused check, one kernel per device and dtype (an inf-norm reduction is ~25x slower on the
        # CPU, benchmarks/compile_gap.py); "unscaling" by 1.0 leaves every value as it was
        flag = torch.zeros(1, device=dev)
        torch._amp_foreach_non_finite_check_and_unscale_(group, flag, torch.ones(1, device=dev))
        found = found + flag.to(device).squeeze(0)
    return found > 0


class NonFiniteGuard:
    """Veto updates whose loss, gradients or buffers are not finite; ``"skip"`` them or ``"stop"`` the run.

    The trainer calls it at fixed points of the loop: :meth:`start` (fit start), :meth:`before_batch`,
    :meth:`watch_loss` (after LOSS), :meth:`vetoes` (after AFTER_BACKWARD, before clipping).

    Args:
        policy: ``"skip"``: skip the update, count it, and stop after ``max_in_row`` skipped
            updates in a row (a finite update resets the count); ``"stop"``: skip it and stop the
            run at once. Either way the run stops inside the epoch, so the checkpoint written then
            (``last.pt``) holds the last good weights at the exact position; the stop reason is
            :attr:`StopReason.NONFINITE` and its detail names the update.
        max_in_row: consecutive skipped updates tolerated by ``"skip"``.
        out: where skipped updates are reported (the first few); None for silence.

    Counters (checkpointed): :attr:`skipped` (total), :attr:`in_row`, :attr:`last_update` (1-based
    index of the last bad update); ``state.nonfinite_skipped`` mirrors :attr:`skipped`.

    >>> import torch
    >>> from torch.utils.data import DataLoader, TensorDataset
    >>> from trickbag.train.trainer import Trainer
    >>> x, y = torch.randn(32, 3), torch.randint(0, 2, (32,))
    >>> x[8] = float("nan")  # one poisoned sample in the second batch of 8
    >>> model = torch.nn.Linear(3, 2)
    >>> t = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), DataLoader(TensorDataset(x, y), batch_size=8),
    ...             nonfinite="skip", max_nonfinite=3, device="cpu")
    >>> s = t.fit()
    >>> (s.nonfinite_skipped, t.guard.last_update, s.step, bool(torch.isfinite(t.model.weight).all()))
    (1, 2, 3, True)
    """

    def __init__(self, policy: Literal["skip", "stop"] = "skip", max_in_row: int = 5,
                 out: TextIO | None = sys.stderr) -> None:
        if policy not in ("skip", "stop"):
            raise ValueError(f"policy must be 'skip' or 'stop', got {policy!r}")
        if isinstance(max_in_row, bool) or not isinstance(max_in_row, int) or max_in_row < 1:
            raise ValueError(f"max_in_row must be an int >= 1, got {max_in_row!r}")
        self.policy = policy
        self.max_in_row = max_in_row
        self.out = out
        self.skipped = 0
        self.in_row = 0
        self.last_update: int | None = None
        self._loss_bad: torch.Tensor | None = None
        self._buffers: list[torch.Tensor] = []
        self._float_buffers: list[torch.Tensor] = []
        self._saved: list[torch.Tensor] = []
        self._saved_valid = False  # the copy holds the buffers from before this update's forwards
        self._sharded = False  # an FSDP2 model (set at start)
        self._restore_in_closure = False

    def start(self, state: State) -> None:
        """Fit start: find the model's buffers (restored on a veto)."""
        self._loss_bad = None
        self._buffers = [b for b in state.model.buffers()]
        self._float_buffers = [b for b in self._buffers if b.is_floating_point()]
        self._saved = [b.detach().clone() for b in self._buffers]
        self._saved_valid = False
        self._sharded = is_sharded(state.model)  # FSDP: the flags are agreed over the shards at every check
        state.nonfinite_skipped = self.skipped

    def before_batch(self) -> None:
        """Copy the buffers once per update, before its first forward."""
        if self._saved_valid or not self._buffers:
            return
        torch._foreach_copy_(self._saved, self._buffers)  # no host sync; buffers are small
        self._saved_valid = True

    def watch_loss(self, loss: torch.Tensor | None) -> None:
        """Or the finiteness of one micro-batch's final loss into the update's flag (no sync)."""
        if loss is None:
            return
        bad = ~torch.isfinite(loss.detach()).all()
        self._loss_bad = bad if self._loss_bad is None else (self._loss_bad | bad)

    def forget_losses(self) -> None:
        """The update is being redone (``train.micro_batch_size=auto``): its losses so far no longer count."""
        self._loss_bad = None

    def _flags(self, state: State) -> tuple[bool, bool]:
        device = state.device
        loss_bad = self._loss_bad if self._loss_bad is not None else torch.zeros((), dtype=torch.bool, device=device)
        self._loss_bad = None
        grad_bad = torch.zeros((), dtype=torch.bool, device=loss_bad.device)
        if not state.scaler.is_enabled():  # fp16: inf gradients are the GradScaler's business
            grads = [p.grad for g in state.optimizer.param_groups for p in g["params"] if p.grad is not None]
            if grads:
                grad_bad = _any_nonfinite(grads, loss_bad.device)
        if self._float_buffers:
            grad_bad = grad_bad | _any_nonfinite(self._float_buffers, loss_bad.device)
        flags = torch.stack([loss_bad, grad_bad])
        if self._sharded:
            flags = flags.to(torch.int32)
            torch.distributed.all_reduce(flags, op=torch.distributed.ReduceOp.MAX)
        bad_loss, bad_rest = flags.tolist()  # the one host sync
        return bool(bad_loss), bool(bad_rest)

    def vetoes(self, state: State) -> bool:
        """Check the update about to be applied; on a bad one set ``state.step_skipped``, put the
        buffers back, count it, maybe stop the run, and return True."""
        if state.closure_pass:  # SAM's second pass, at the perturbed weights: checked the same way
            restore = self._restore_in_closure
        else:
            restore, self._saved_valid = self._saved_valid, False
            self._restore_in_closure = restore  # the copy still holds the buffers from before the update
        bad_loss, bad_rest = self._flags(state)
        if not (bad_loss or bad_rest):
            self.in_row = 0
            return False
        state.veto_update("non-finite")
        if restore:
            torch._foreach_copy_(self._buffers, self._saved)
        self.skipped += 1
        self.in_row += 1
        self.last_update = state.step + 1
        state.nonfinite_skipped = self.skipped
        self._report(state, "loss and gradients" if bad_loss and bad_rest else ("loss" if bad_loss else "gradients"))
        return True

    def _report(self, state: State, what: str) -> None:
        where = f"update {self.last_update} (epoch {state.epoch + 1}, batch {state.batch_idx + 1})"
        if state.closure_pass:
            where += " in SAM's second pass"
        if self.policy == "stop":
            state.stop(StopReason.NONFINITE, f"{what} at {where}; stopped by train.nonfinite=stop")
        elif self.in_row >= self.max_in_row:
            state.stop(StopReason.NONFINITE, f"{what} in {self.in_row} updates in a row (last at {where}); "
                                             f"stopped by train.max_nonfinite={self.max_in_row}")
        if self.out is not None and state.dist.is_main and self.skipped <= _SHOWN:
            more = " (further skips are only counted)" if self.skipped == _SHOWN else ""
            print(f"trickbag: non-finite {what} at {where}: update skipped{more}", file=self.out, flush=True)

    def state_dict(self) -> dict[str, Any]:
        return {"skipped": self.skipped, "in_row": self.in_row, "last_update": self.last_update}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.skipped = int(state_dict["skipped"])
        self.in_row = int(state_dict["in_row"])
        self.last_update = state_dict.get("last_update")
