"""TB102 scheduler-per-micro-batch: The LR scheduler is stepped on every micro-batch of a gradient-accumulation loop.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trickbag.audit._ast import call_name, dotted, name_tokens, walk
from trickbag.audit._flow import (
    SCHED,
    FileModel,
)
from trickbag.audit._loop_facts import framework_accumulates, micro_batch_events
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


_HORIZON_KW = {"num_training_steps", "total_steps", "t_max", "total_iters", "max_steps", "num_steps", "t_total",
               "total_num_steps", "max_iters"}
_BATCH_WORDS = {"batches", "loader", "dataloader", "dl", "iters", "iterations"}
_ACCUM_WORDS = {"accum", "accumulation", "acc", "accumulate", "grad_acc", "accum_iter", "update_freq"}


def _horizon_values(file: FileModel) -> Iterator[ast.AST]:
    """Expressions that set a schedule's length: a scheduler keyword such as ``num_training_steps=`` or
    ``T_max=``, or a name like ``max_step`` / ``total_steps`` / ``num_training_steps`` assigned in the file."""
    for n in file.nodes:
        if isinstance(n, ast.Call):
            yield from (k.value for k in n.keywords if k.arg and k.arg.lower() in _HORIZON_KW)
        elif isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None:
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            words = {t for tg in targets for t in name_tokens((dotted(tg) or "").split(".")[-1])}
            if words & {"max", "total", "num", "training"} and words & {"step", "steps", "iters", "iterations"}:
                yield n.value


def _horizon_unit(file: FileModel) -> str:
    """'micro' when every schedule length this file computes counts batches (``epochs * len(loader)``,
    ``num_batches``) and none divides by the accumulation count; 'update' when one divides by it; '' unknown."""
    def find() -> str:
        units = set()
        for v in _horizon_values(file):
            words = {t for n in walk(v) if isinstance(n, (ast.Name, ast.Attribute)) for t in name_tokens(
                str(dotted(n) or getattr(n, "attr", "")).split(".")[-1])}
            calls = {call_name(n) for n in walk(v) if isinstance(n, ast.Call)}
            divided = any(isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Div, ast.FloorDiv)) and {
                t for m in walk(n.right) if isinstance(m, (ast.Name, ast.Attribute))
                for t in name_tokens(str(dotted(m) or getattr(m, "attr", "")).split(".")[-1])} & _ACCUM_WORDS
                for n in walk(v))
            if divided or words & _ACCUM_WORDS:
                units.add("update")
            elif words & _BATCH_WORDS or "len" in calls:
                units.add("micro")
        return "micro" if units == {"micro"} else ("update" if "update" in units else "")
    return file.memo("tb102_horizon", find)


@rule("TB102", "scheduler-per-micro-batch",
      fix="move scheduler.step() into the update branch, right after optimizer.step()")
def scheduler_per_micro_batch(file: FileModel) -> Iterator[Hit]:
    """The LR scheduler is stepped on every micro-batch of a gradient-accumulation loop.

    With accumulation over ``k`` micro-batches the optimizer updates once every ``k`` batches, but a
    scheduler stepped per batch advances ``k`` times per update: the warm-up ends ``k`` times too
    early and the decay finishes when a ``1/k`` of the training is done.  When the file counts the schedule's
    length in batches too (``max_step = epochs * len(loader)``, no division by the accumulation count), the
    schedule still spans the run: the finding is uncertain (``--all``).  A helper that back-propagates each
    micro-batch and steps under its own count (``self._backprop_step(loss)``) makes its loop an accumulation loop;
    a scheduler run under ``if self._backprop_step(loss):`` runs only when it stepped, and one under a test of the
    epoch changing (``if self.old_epoch != epoch:``) once per epoch.

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
        if not framework_accumulates(e):
            unit = _horizon_unit(file)
            why = " (uncertain: the schedule's horizon is counted in batches here, the unit it is stepped in)" \
                if unit == "micro" else ""
            yield Hit(e.node, f"{e.recv}.step() runs on every micro-batch, the optimizer once per "
                              f"accumulated update{why}", confidence="low" if why else "high")
        elif not _prepared(file, e.recv or ""):  # accelerate steps a prepared scheduler with the optimizer
            yield Hit(e.node, f"{e.recv}.step() runs on every micro-batch of accelerator.accumulate(): it was "
                              f"not passed to accelerator.prepare()", confidence=_sure_unprepared(file))
