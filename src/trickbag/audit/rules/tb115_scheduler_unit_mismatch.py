"""TB115 scheduler-unit-mismatch: A schedule counted in epochs is stepped every batch, or one counted in batches
is stepped once per epoch.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trickbag.audit._ast import call_name, dotted, name_tokens, walk
from trickbag.audit._flow import BACKWARD, CALL, SCHED, Event, FileModel, Loop
from trickbag.audit._query import at_level, is_data_loop, short_name
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []

#: schedulers whose length is given by these keywords / positional arguments (index after the optimizer)
_LENGTH_ARGS = {
    "StepLR": ("step_size", 0), "MultiStepLR": ("milestones", 0), "CosineAnnealingLR": ("T_max", 0),
    "CosineAnnealingWarmRestarts": ("T_0", 0), "LinearLR": ("total_iters", 2), "PolynomialLR": ("total_iters", 0),
    "ConstantLR": ("total_iters", 1), "OneCycleLR": ("total_steps", 1),
    "get_linear_schedule_with_warmup": ("num_training_steps", 1),
    "get_cosine_schedule_with_warmup": ("num_training_steps", 1),
    "get_polynomial_decay_schedule_with_warmup": ("num_training_steps", 1),
    "get_cosine_with_hard_restarts_schedule_with_warmup": ("num_training_steps", 1),
}
_STEP_WORDS = {"steps", "step", "iters", "iterations", "iter", "batches", "updates", "loader", "dataloader", "dl"}
_EPOCH_WORDS = {"epoch", "epochs"}


def _words(node: ast.AST | None) -> tuple[set[str], set[str]]:
    """(name tokens, called functions) of an expression."""
    if node is None:
        return set(), set()
    words = {t for n in walk(node) if isinstance(n, (ast.Name, ast.Attribute))
             for t in name_tokens(str(dotted(n) or getattr(n, "attr", "")).split(".")[-1])}
    return words, {call_name(n) for n in walk(node) if isinstance(n, ast.Call)}


def _unit(call: ast.Call) -> str:
    """'epoch' when the schedule's length is counted in epochs (``T_max=args.epochs``), 'step' when in batches
    or updates (``epochs * len(loader)``, ``OneCycleLR(..., steps_per_epoch=...)``), '' when unclear."""
    name = (dotted(call.func) or "").split(".")[-1]
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    if name == "OneCycleLR":
        if "steps_per_epoch" in kw:
            return "step"
        total = kw.get("total_steps", call.args[2] if len(call.args) > 2 else None)
        if total is None:
            return ""
        words, calls = _words(total)  # ``total_steps=max_epoch``: a horizon in epochs under a step-named keyword
        return "epoch" if words & _EPOCH_WORDS and not (words & _STEP_WORDS or "len" in calls) else "step"
    key, index = _LENGTH_ARGS[name]
    value = kw.get(key)
    if value is None and len(call.args) > index + 1:
        value = call.args[index + 1]
    words, calls = _words(value)
    if {"step", "size"} <= words or key == "step_size":
        words = words - {"step"}  # ``step_size=args.step_size`` / ``test_step``: StepLR's own word echoed, no unit
    if key == "milestones":
        words = words - {"step", "steps"}  # ``cfg.TRAIN.LR_STEP``: the decay points MultiStepLR is named for, no unit
    if words & _STEP_WORDS or "len" in calls:
        return "" if words & _EPOCH_WORDS and not ("len" in calls or words & _STEP_WORDS - {"step"}) else "step"
    return "epoch" if words & _EPOCH_WORDS else ""


def _schedulers(file: FileModel) -> dict[str, tuple[ast.Call, str]]:
    """short name -> (constructor call, unit) of the schedulers this file builds with a length; the unit is '' when
    not known (a bare number) or when the name is built more than once in different units."""
    out: dict[str, tuple[ast.Call, str]] = {}
    for n in file.nodes:
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and len(n.targets) == 1:
            name = (dotted(n.value.func) or "").split(".")[-1]
            target = dotted(n.targets[0])
            if name in _LENGTH_ARGS and target:
                unit = _unit(n.value)
                out.setdefault(short_name(target), (n.value, unit))
                if out[short_name(target)][1] != unit:
                    # built twice in different units, or once with a length of no known unit (``if args.lradj ==
                    # 'COS': CosineAnnealingLR(T_max=20) else: OneCycleLR(steps_per_epoch=...)``): which one a
                    # step belongs to depends on branches, unclear
                    out[short_name(target)] = (n.value, "")
    return out


def _data_loop(loops: tuple[Loop, ...]) -> Loop | None:
    return next((lp for lp in reversed(loops) if is_data_loop(lp)), None)


def _batch_loop(loop: Loop) -> bool:
    """A loop over the data (``for x, y in loader``) or one that runs a backward on every iteration (``for i, data
    in enumerate(t)`` with ``t = tqdm(loader)``: the iterable's name says nothing, the backward says batches)."""
    return is_data_loop(loop) or any(e.kind == BACKWARD and at_level(e, loop) for e in loop.events)


def _stepped_at(ev: Event) -> str:
    """'batch' when the step is inside a loop over the batches, 'epoch' when it is in a loop that holds a batch
    loop but outside it; '' otherwise."""
    if ev.loops and _data_loop(ev.loops) is None and any("epoch" in t.lower() for t in ev.loops[-1].targets) \
            and _batch_loop(ev.loops[-1]):
        return "epoch"  # ``for _iepoch in range(args.epochs):`` with one full-batch backward per pass
    if ev.loops and not is_data_loop(ev.loops[-1]) and any(
            t.lower() in ("epoch", "epochs", "ep", "i_epoch", "epoch_idx", "epoch_id") for t in ev.loops[-1].targets):
        return "epoch" if any(_batch_loop(lp) for lp in ev.fm.loops if lp.parent is ev.loops[-1]) \
            or _calls_a_trainer(ev) else ""  # the epoch loop itself, nested in a loop over folds or seeds
    if _data_loop(ev.loops) is not None or (ev.loops and _batch_loop(ev.loops[-1])):
        return "batch"
    if ev.loops and any(_batch_loop(lp) for lp in ev.fm.loops if lp.parent is ev.loops[-1]):
        return "epoch"
    return ""


def _calls_a_trainer(ev: Event) -> bool:
    """The epoch loop the step is in calls a helper of the file that back-propagates (``train(args, bags, ...)``): its
    batches run in that helper, once per pass of the epoch loop."""
    loop = ev.loops[-1]
    return any(e.kind == CALL and BACKWARD in e.kinds() and at_level(e, loop) for e in loop.events)


def _position(ev: Event) -> str | None:
    """The unit of the position a step call passes (``scheduler.step(epoch)``, ``step(epoch=self.current_epoch)``,
    ``step(global_step)``): 'epoch', 'step', '' when unclear; None when the call passes none (or a metric, for
    ``ReduceLROnPlateau``-like steps, which have no length here)."""
    call = ev.node
    if not isinstance(call, ast.Call):
        return None
    arg = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "epoch"), None)
    if arg is None:
        return None
    words, calls = _words(arg)
    if any(isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Mult, ast.Div, ast.FloorDiv)) for n in walk(arg)) \
            or "len" in calls:
        return ""  # ``epoch + i / iters``, ``epoch * len(loader) + i``: a fraction or a conversion
    if words & _EPOCH_WORDS and not words & _STEP_WORDS:
        return "epoch"
    if words & (_STEP_WORDS - {"loader", "dataloader", "dl", "batches"}) and not words & _EPOCH_WORDS:
        return "step"
    return ""


def _counted_by_its_loop(ev: Event, built: ast.Call) -> bool:
    """The loop the step runs in iterates ``range(n)`` for a name ``n`` (not named for epochs) the schedule's length
    is made of (``for step in range(median_num_iter)`` with ``T_max=median_num_iter * epochs``; the backward sits in
    a loop over tasks inside it): the length is counted in that loop's iterations, the unit the scheduler steps
    in."""
    it = ev.loops[-1].iter if ev.loops else None
    while isinstance(it, ast.Call) and call_name(it) in ("enumerate", "tqdm", "trange") and it.args:
        it = it.args[0]
    if not (isinstance(it, ast.Call) and call_name(it) in ("range", "trange") and it.args):
        return False
    counted = {n for n in _full_names([it.args[-1 if len(it.args) < 3 else 1]])
               if not set(name_tokens(n.split(".")[-1])) & _EPOCH_WORDS}  # ``range(epochs)`` counts epochs
    return bool(counted & _full_names([*built.args[1:], *(k.value for k in built.keywords)]))


def _full_names(exprs: list[ast.AST]) -> set[str]:
    """The whole dotted names in ``exprs`` (``args.iters``, not also its prefix ``args``), calls' names left out."""
    names = {d for e in exprs for n in walk(e) if isinstance(n, (ast.Name, ast.Attribute)) and (d := dotted(n))}
    called = {dotted(n.func) for e in exprs for n in walk(e) if isinstance(n, ast.Call)}
    return {d for d in names - called if not any(o.startswith(d + ".") for o in names)}


@rule("TB115", "scheduler-unit-mismatch",
      fix="step the scheduler in the unit its length is counted in (or count the length in the unit you step in)")
def scheduler_unit_mismatch(file: FileModel) -> Iterator[Hit]:
    """A schedule counted in epochs is stepped every batch, or one counted in batches is stepped once per epoch.

    ``CosineAnnealingLR(opt, T_max=epochs)`` stepped inside the batch loop finishes its cosine after ``epochs``
    batches and then oscillates; ``MultiStepLR(milestones=[30, 60])`` stepped per batch decays in the first
    epoch.  The mirror case, ``get_cosine_schedule_with_warmup(opt, warmup, epochs * len(loader))`` or
    ``OneCycleLR(..., steps_per_epoch=len(loader))`` stepped once per epoch, never leaves the warm-up.  The
    unit of the length is read from its expression (``epochs`` vs ``len(loader)``, ``total_steps``; a
    ``OneCycleLR(total_steps=max_epoch)`` is counted in epochs whatever its keyword says); a length with no unit
    in its names (a bare number, or ``step_size=args.step_size``, StepLR's keyword echoed) is not judged, nor a
    scheduler the file builds more than once with lengths in different units (or one of them unknown): which
    construction a step belongs to depends on branches.  A step given its position (``scheduler.step(epoch)``,
    ``step(epoch=self.current_epoch)``, ``step(global_step)``) is judged by the unit of that position, wherever it
    runs: an epoch number set on a schedule counted in batches (a per-step OneCycleLR whose Lightning
    ``lr_scheduler_step`` hook passes ``self.current_epoch``) is reported, an epoch-length schedule set to the epoch
    inside the batch loop is right, and a position converted in place (``epoch + i / len(loader)``) is not judged.
    A loop over epochs that back-propagates the whole data once per pass (``for _iepoch in range(args.epochs):``,
    no data loop inside) steps once per epoch.  A step in a loop over ``range(n)`` where ``n`` (not an epoch count) is
    part of the length (``T_max=median_num_iter * epochs`` stepped in ``for step in range(median_num_iter)``, its
    backward in a loop over tasks inside) is in the length's unit.

    Wrong::

        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
        for epoch in range(args.epochs):
            for x, y in loader:
                optimizer.zero_grad()
                loss_fn(model(x), y).backward()
                optimizer.step()
                scheduler.step()

    Right::

        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
        for epoch in range(args.epochs):
            for x, y in loader:
                optimizer.zero_grad()
                loss_fn(model(x), y).backward()
                optimizer.step()
            scheduler.step()
    """
    scheds = _schedulers(file)
    if not scheds:
        return
    for fm in file.functions:
        for ev in fm.kind_events(SCHED):
            built = scheds.get(short_name(ev.recv or ""))
            if built is None and fm.name == "lr_scheduler_step" and len(scheds) == 1:
                built = next(iter(scheds.values()))  # Lightning hands the configured scheduler to its hook
            if built is None or not built[1]:
                continue
            position = _position(ev)
            if position is not None:  # ``scheduler.step(epoch)``: the argument sets the position, not the count
                if position and position != built[1]:
                    yield Hit(ev.node, f"{ev.recv}.step() is given a position counted in {position}s, but its "
                                       f"length is counted in {built[1]}s (line {built[0].lineno}): the schedule "
                                       f"is set to the wrong point")
                continue
            at = _stepped_at(ev)
            if built[1] == "epoch" and at == "batch":
                yield Hit(ev.node, f"{ev.recv}.step() runs every batch, but its length is counted in epochs "
                                   f"(line {built[0].lineno}): the schedule ends after that many batches")
            elif built[1] == "step" and at == "epoch" and not _counted_by_its_loop(ev, built[0]):
                yield Hit(ev.node, f"{ev.recv}.step() runs once per epoch, but its length is counted in batches "
                                   f"(line {built[0].lineno}): the schedule barely moves")
