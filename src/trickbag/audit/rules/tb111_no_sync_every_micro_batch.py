"""TB111 no-sync-every-micro-batch: Every backward of a DDP loop runs under ``model.no_sync()``.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

from collections.abc import Iterator

from trickbag.audit._flow import (
    BACKWARD,
    STEP,
    FileModel,
)
from trickbag.audit._query import loops_of, train_loop
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []



@rule("TB111", "no-sync-every-micro-batch",
      fix="use no_sync() on all micro-batches but the last one before optimizer.step()")
def no_sync_every_micro_batch(file: FileModel) -> Iterator[Hit]:
    """Every backward of a DDP loop runs under ``model.no_sync()``.

    ``no_sync()`` skips the gradient all-reduce.  It belongs on the micro-batches *before* the last
    one of an accumulated update; if every backward runs under it, the processes never average their
    gradients and the replicas drift apart.

    Wrong::

        for i, (x, y) in enumerate(loader):
            with model.no_sync():
                (loss_fn(model(x), y) / accum).backward()
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()

    Right::

        for i, (x, y) in enumerate(loader):
            last = (i + 1) % accum == 0
            with model.no_sync() if not last else contextlib.nullcontext():
                (loss_fn(model(x), y) / accum).backward()
            if last:
                optimizer.step()
                optimizer.zero_grad()
    """
    for _fm, loop in loops_of(file):
        if not any(s.kind == STEP and train_loop(s) is loop for s in loop.events):
            continue
        backs = [b for b in loop.events if b.kind == BACKWARD]
        ctxs = [b.in_context("no_sync") for b in backs]
        if ctxs and ctxs[0] is not None and all(c is not None for c in ctxs):
            yield Hit(ctxs[0], "every backward() runs under no_sync(): the gradients are "
                                                      "never all-reduced across processes")
