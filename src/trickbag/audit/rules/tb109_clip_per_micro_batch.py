"""TB109 clip-per-micro-batch: Gradients are clipped on every micro-batch of a gradient-accumulation loop.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

from collections.abc import Iterator

from trickbag.audit._flow import (
    CALL,
    CLIP,
    FileModel,
)
from trickbag.audit._loop_facts import helper_name, micro_batch_events
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []



@rule("TB109", "clip-per-micro-batch", fix="clip once per update, in the update branch right before optimizer.step()")
def clip_per_micro_batch(file: FileModel) -> Iterator[Hit]:
    """Gradients are clipped on every micro-batch of a gradient-accumulation loop.

    Clipping a partial sum of gradients is not clipping the update: each micro-batch's clip rescales
    what was accumulated so far, so the final gradient depends on the order of the micro-batches and
    its norm is not bounded by ``max_norm``.  Clip once, on the full gradient, before the step.  The update test
    may compare a count kept modulo the accumulation count (``state.acc_step = state.acc_step % k``, then
    ``if state.acc_step == 0:``).

    Wrong::

        for i, (x, y) in enumerate(loader):
            (loss_fn(model(x), y) / accum).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()

    Right::

        for i, (x, y) in enumerate(loader):
            (loss_fn(model(x), y) / accum).backward()
            if (i + 1) % accum == 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                optimizer.zero_grad()
    """
    for c in micro_batch_events(file, CLIP):
        where = f" (in {helper_name(c)}())" if c.kind == CALL else ""
        yield Hit(c.node, f"gradients are clipped{where} on every micro-batch instead of once per update")
