"""TB102 scheduler-per-micro-batch: The LR scheduler is stepped on every micro-batch of a gradient-accumulation loop.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trickbag.audit._ast import call_name, dotted, walk
from trickbag.audit._flow import (
    SCHED,
    FileModel,
)
from trickbag.audit._loop_facts import _managed, micro_batch_events
from trickbag.audit._query import short_name
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []



def _prepared(file: FileModel, name: str) -> bool:
    """``name`` was passed through ``accelerator.prepare(...)`` (assigned from it, or handed to it)."""
    table = file.memo("prepared", lambda: {
        d for n in file.nodes if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
        and call_name(n.value) == "prepare" for t in n.targets for e in walk(t) if (d := dotted(e))} | {
        d for n in file.nodes if isinstance(n, ast.Call) and call_name(n) == "prepare" for a in n.args
        if (d := dotted(a))})
    return name in table or short_name(name) in {short_name(x) for x in table}


def _sure_unprepared(file: FileModel) -> str:
    """High when the file prepares its objects itself (and left this one out), low when that is done elsewhere."""
    return "high" if any(isinstance(n, ast.Call) and call_name(n) == "prepare" for n in file.nodes) else "low"


@rule("TB102", "scheduler-per-micro-batch",
      fix="move scheduler.step() into the update branch, right after optimizer.step()")
def scheduler_per_micro_batch(file: FileModel) -> Iterator[Hit]:
    """The LR scheduler is stepped on every micro-batch of a gradient-accumulation loop.

    With accumulation over ``k`` micro-batches the optimizer updates once every ``k`` batches, but a
    scheduler stepped per batch advances ``k`` times per update: the warm-up ends ``k`` times too
    early and the decay finishes when a ``1/k`` of the training is done.

    Wrong::

        for i, (x, y) in enumerate(loader):
            loss = loss_fn(model(x), y) / accum
            loss.backward()
            scheduler.step()
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()

    Right::

        for i, (x, y) in enumerate(loader):
            loss = loss_fn(model(x), y) / accum
            loss.backward()
            if (i + 1) % accum == 0:
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
    """
    for e in micro_batch_events(file, SCHED):
        if not _managed(e):
            yield Hit(e.node, f"{e.recv}.step() runs on every micro-batch, the optimizer once per "
                              f"accumulated update")
        elif not _prepared(file, e.recv or ""):  # accelerate steps a prepared scheduler with the optimizer
            yield Hit(e.node, f"{e.recv}.step() runs on every micro-batch of accelerator.accumulate(): it was "
                              f"not passed to accelerator.prepare()", confidence=_sure_unprepared(file))
