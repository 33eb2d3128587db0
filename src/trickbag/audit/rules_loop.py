"""Lint rules on the order of the calls in a training loop: scheduler, zero_grad, loss division,
clipping and the GradScaler, EMA, autocast and DDP ``no_sync`` (codes TB1xx)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from trickbag.audit import _roles as R
from trickbag.audit._ast import call_name, dotted, name_tokens
from trickbag.audit._flow import (
    BACKWARD,
    CALL,
    CLIP,
    EMA_UPDATE,
    SCALE,
    SCALER_UPDATE,
    SCHED,
    STEP,
    UNSCALE,
    ZERO,
    Event,
    FileModel,
)
from trickbag.audit._query import at_level, loops_of, scaled_loss, short_name, stepish, train_loop
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []


def _managed(ev: Event) -> bool:
    """``ev`` is in a loop whose accumulation a framework runs (``accelerator.accumulate``)."""
    return any((acc := ev.fm.accumulation(lp)) is not None and acc.managed for lp in ev.loops)


def _prepared(file: FileModel, name: str) -> bool:
    """``name`` was passed through ``accelerator.prepare(...)`` (assigned from it, or handed to it)."""
    table = file.memo("prepared", lambda: {
        d for n in file.nodes if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
        and call_name(n.value) == "prepare" for t in n.targets for e in ast.walk(t) if (d := dotted(e))} | {
        d for n in file.nodes if isinstance(n, ast.Call) and call_name(n) == "prepare" for a in n.args
        if (d := dotted(a))})
    return name in table or short_name(name) in {short_name(x) for x in table}


def _sure_unprepared(file: FileModel) -> str:
    """High when the file prepares its objects itself (and left this one out), low when that is done elsewhere."""
    return "high" if any(isinstance(n, ast.Call) and call_name(n) == "prepare" for n in file.nodes) else "low"


def _micro(ev: Event, depth: int = 0) -> bool:
    """Is ``ev`` run once per micro-batch of a gradient-accumulation loop?  Also for an event of a local
    helper (outside any loop or accumulation test of the helper) that a micro-batch calls, following
    helpers of helpers two levels up: ``self.micro_step(x, y)`` with ``zero_grad()`` inside."""
    for lp in ev.loops:
        acc = ev.fm.accumulation(lp)
        if acc is not None and acc.is_micro(ev):
            return True
    if ev.loops or depth >= 2 or any(g.accum for g in ev.guards) or ev.fm.node is ev.fm.file.tree:
        return False
    return any(_micro(site, depth + 1) for site in ev.fm.call_sites())


#: the work of a training step besides clipping and zeroing
_STEP_WORK = {BACKWARD, STEP, SCALE, SCALER_UPDATE, UNSCALE, SCHED}


def _pure_call(e: Event, kind: str) -> bool:
    """A call of a local helper that does ``kind`` (clipping, zeroing) and none of the rest of a step
    (``clip(model, 1.0)``, ``self._reset()``): checked, and reported, where it is called."""
    return e.kind == CALL and kind in e.kinds() and not e.kinds() & _STEP_WORK


def _pure_helper(fm) -> bool:
    """A local helper called from the file that does none of the rest of a step (see :func:`_pure_call`)."""
    return bool(fm.call_sites()) and not fm.file.summary(fm).kinds & _STEP_WORK


def _helper_name(e: Event) -> str:
    return dotted(e.node.func) or e.extra["helper"].name


def _counter_guarded(ev: Event, loop) -> bool:
    """``if epoch > 0: scheduler.step()`` at the top of a loop runs after the previous iteration."""
    for g in ev.rel_guards(loop):
        for n in ast.walk(g.node.test):
            if isinstance(n, ast.Compare) and any(isinstance(o, (ast.Gt, ast.GtE, ast.NotEq)) for o in n.ops):
                if {dotted(x) for x in [n.left, *n.comparators]} & loop.targets:
                    return True
    return False


@rule("TB101", "scheduler-before-step",
      fix="call scheduler.step() after optimizer.step() (per-epoch schedulers: after the epoch's training)")
def scheduler_before_step(file: FileModel) -> Iterator[Hit]:
    """The LR scheduler is stepped before the optimizer in the same loop iteration.

    Since PyTorch 1.1 ``scheduler.step()`` belongs after ``optimizer.step()``.  Stepping it first
    skips the first value of the schedule (the warm-up starts one step late, a per-epoch decay
    happens one epoch early) and PyTorch warns about it.  A cheat-sheet classic: ``scheduler.step()``
    as the first line of the epoch loop, before the epoch is trained.  A step function without a
    loop of its own counts as one iteration (Lightning's manual optimisation:
    ``self.manual_backward(loss); sch.step(); opt.step()`` in ``training_step``).

    Wrong::

        for epoch in range(epochs):
            scheduler.step()
            for x, y in loader:
                optimizer.zero_grad()
                loss_fn(model(x), y).backward()
                optimizer.step()

    Right::

        for epoch in range(epochs):
            for x, y in loader:
                optimizer.zero_grad()
                loss_fn(model(x), y).backward()
                optimizer.step()
            scheduler.step()
    """
    for _fm, loop in loops_of(file):
        for e in loop.events:
            if e.kind != SCHED or e.node.args or not at_level(e, loop) or _micro(e) or _counter_guarded(e, loop):
                continue
            if _before_its_step(file, e, loop.events):
                yield Hit(e.node, f"{e.recv}.step() runs before the optimizer step of the same iteration")
    for fm in file.functions:
        yield from _scheduler_first_in_step_function(file, fm)


def _before_its_step(file: FileModel, e: Event, events: list[Event]) -> bool:
    """Does the scheduler step ``e`` run before every step (of its optimizer) among ``events``?"""
    steps = [s for s in events if stepish(s) and not s.exclusive(e)]
    own = _scheduler_optimizer(file, e.recv or "")
    if own and any(s.kind == STEP and s.recv == own for s in steps):
        steps = [s for s in steps if s.kind == STEP and s.recv == own]
    return bool(steps) and all(s.order > e.order for s in steps)


def _scheduler_first_in_step_function(file: FileModel, fm) -> Iterator[Hit]:
    """A step function without a loop of its own (Lightning's manual optimisation in ``training_step``:
    ``self.manual_backward(loss); sch.step(); opt.step()``): its body is one iteration."""
    flat = [e for e in fm.events if not e.loops]
    if not any(BACKWARD in e.kinds() for e in flat):
        return
    for e in flat:
        if e.kind != SCHED or e.node.args or _micro(e) or _after_first_guarded(e):
            continue
        if _before_its_step(file, e, flat):
            yield Hit(e.node, f"{e.recv}.step() runs before the optimizer step of the same training step")


def _after_first_guarded(ev: Event) -> bool:
    """``if batch_idx > 0: sch.step()`` (or ``!= 0``): stepped for the previous step, on purpose."""
    return any(isinstance(n, ast.Compare) and any(isinstance(o, (ast.Gt, ast.GtE, ast.NotEq)) for o in n.ops)
               for g in ev.guards for n in ast.walk(g.node.test))


_SCHED_WORDS = {"sched", "scheduler", "lr", "schedule", "warmup"}
_OPT_WORDS = {"opt", "optim", "optimizer", "optimiser"}


def _scheduler_optimizer(file: FileModel, sched: str) -> str | None:
    """The optimizer a scheduler drives: from its constructor (``LambdaLR(opt_g, ...)``), or from the
    names (``sched_g`` goes with ``opt_g``)."""
    built = file.memo("scheduler_optimizers", lambda: _find_scheduler_optimizers(file))
    if sched in built:
        return built[sched]
    suffix = set(name_tokens(sched.split(".")[-1])) - _SCHED_WORDS
    if not suffix:
        return None
    steps = {e.recv for fm in file.functions for e in fm.kind_events(STEP) if e.recv}
    matches = [o for o in steps if set(name_tokens(o.split(".")[-1])) - _OPT_WORDS == suffix]
    return matches[0] if len(matches) == 1 else None


def _find_scheduler_optimizers(file: FileModel) -> dict[str, str]:
    out = {}
    for fm in file.functions:
        for a in fm.assigns:
            if a.op is None and len(a.names) == 1 and isinstance(a.value, ast.Call) and \
                    R.role_by_constructor(a.value, file.imports, file.class_names) == R.SCHEDULER:
                first = a.value.args[0] if a.value.args else next(
                    (k.value for k in a.value.keywords if k.arg == "optimizer"), None)
                if dotted(first):
                    out[a.names[0]] = dotted(first)
    return out


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
    for fm in file.functions:
        for e in fm.kind_events(SCHED):
            if not _micro(e):
                continue
            if not _managed(e):
                yield Hit(e.node, f"{e.recv}.step() runs on every micro-batch, the optimizer once per "
                                  f"accumulated update")
            elif not _prepared(file, e.recv or ""):  # accelerate steps a prepared scheduler with the optimizer
                yield Hit(e.node, f"{e.recv}.step() runs on every micro-batch of accelerator.accumulate(): it was "
                                  f"not passed to accelerator.prepare()", confidence=_sure_unprepared(file))


def _zero_between(fm, s: Event) -> Iterator[Event]:
    backs = [b for b in fm.events if b.kind == BACKWARD and b.order < s.order and not b.exclusive(s)
             and b.loops[:len(s.loops)] == s.loops]
    if not backs:
        return
    b = backs[-1]
    opts = {x.recv for x in fm.kind_events(STEP)}
    for z in fm.kind_events(ZERO):
        if not (b.order < z.order < s.order) or z.exclusive(s) or z.exclusive(b) or z.loops != s.loops:
            continue
        if z.recv == s.recv or z.recv is None or (fm.role(z.recv) == R.MODEL and len(opts) == 1):
            yield z


@rule("TB103", "zero-grad-misplaced",
      fix="zero the gradients after optimizer.step() (in the update branch), never between backward and step")
def zero_grad_misplaced(file: FileModel) -> Iterator[Hit]:
    """``zero_grad()`` erases gradients that the next optimizer step needs.

    Inside a gradient-accumulation loop, ``optimizer.zero_grad()`` on every micro-batch throws away
    the micro-batches accumulated so far: the update sees only the last one (the "accumulation"
    does nothing but lower the learning rate).  Between ``backward()`` and ``step()`` it zeroes the
    gradients the step was about to use.  In a loop without accumulation, zeroing at the top of the
    iteration is correct.

    A local helper that only zeroes the gradients (``self._reset()`` setting ``p.grad = None`` in a loop over
    the parameters) counts where it is called, and is reported at that call when it runs on every micro-batch.

    Wrong::

        for i, (x, y) in enumerate(loader):
            optimizer.zero_grad()
            loss = loss_fn(model(x), y) / accum
            loss.backward()
            if (i + 1) % accum == 0:
                optimizer.step()

    Right::

        for i, (x, y) in enumerate(loader):
            loss = loss_fn(model(x), y) / accum
            loss.backward()
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
    """
    for fm in file.functions:
        for z in fm.events:
            if z.kind == ZERO and not _pure_helper(fm) and not _managed(z) \
                    and (_micro(z) or _step_fn_accumulates(fm, z)):
                yield Hit(z.node, "zero_grad() on every micro-batch discards the gradients being accumulated")
            elif _pure_call(z, ZERO) and _micro(z) and not _managed(z):
                yield Hit(z.node, f"{_helper_name(z)}() zeroes the gradients on every micro-batch: it discards "
                                  f"the gradients being accumulated")
        for s in fm.kind_events(STEP):
            for z in _zero_between(fm, s):
                yield Hit(z.node, "zero_grad() between backward() and step() zeroes the gradients the step uses")


def _step_fn_accumulates(fm, z: Event) -> bool:
    """A per-batch step function (no loop of its own) that zeroes, runs the backward, then steps only under an
    accumulation test on one of its parameters: ``if (idx + 1) % self.accum == 0: opt.step()``."""
    if z.loops or any(g.accum for g in z.guards) or fm.node is fm.file.tree:
        return False
    params = {a.arg for a in fm.node.args.posonlyargs + fm.node.args.args + fm.node.args.kwonlyargs}
    steps = [s for s in fm.kind_events(STEP) if not s.loops and s.order > z.order]
    backs = [b for b in fm.kind_events(BACKWARD) if not b.loops and z.order < b.order
             and not any(g.accum for g in b.guards)]
    if not steps or not backs:
        return False

    def on_param(s: Event) -> bool:
        return any(g.accum and {n.id for n in ast.walk(g.node.test) if isinstance(n, ast.Name)} & params
                   for g in s.guards)
    return all(on_param(s) for s in steps)


def _optimizer_models(file: FileModel) -> dict[str, set[str]]:
    """optimizer name -> short names of the models whose ``.parameters()`` it was built from."""
    return file.memo("optimizer_models", lambda: _find_optimizer_models(file))


def _find_optimizer_models(file: FileModel) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for fm in file.functions:
        for a in fm.assigns:
            if a.value is None or a.op is not None or len(a.names) != 1 or \
                    R.role_by_constructor(a.value, file.imports, file.class_names) != R.OPTIMIZER:
                continue
            out[a.names[0]] = {short_name(dotted(n.func.value)) for n in ast.walk(a.value) if isinstance(n, ast.Call)
                               and call_name(n) in ("parameters", "named_parameters")
                               and isinstance(n.func, ast.Attribute) and dotted(n.func.value)}
    return out


def _zero_for(fm, z: Event, step: Event, several: bool) -> bool:
    """Does the zeroing ``z`` clear the gradients that ``step`` applies?"""
    if z.kind != ZERO or not several or z.recv is None or z.recv == step.recv:
        return True
    owners = _optimizer_models(fm.file).get(step.recv or "")
    return fm.role(z.recv) == R.MODEL and (not owners or short_name(z.recv) in owners)


def _zeroes(fm, loop, step: Event) -> bool:
    several = len({e.recv for e in loop.events if e.kind == STEP}) > 1
    if any(ZERO in e.kinds() and _zero_for(fm, e, step, several) for e in loop.events):
        return True
    names = list(loop.nested_defs) + list(step.extra.get("closure", []))
    helpers = [_helper_named(fm, name) for name in names]
    return any(h is not None and ZERO in fm.file.summary(h).kinds for h in helpers)


def _helper_named(fm, name: str):
    scope = fm
    while scope is not None:
        if name in scope.nested:
            return scope.nested[name]
        scope = scope.parent
    return fm.file.top.get(name)


@rule("TB104", "grads-never-zeroed",
      fix="call optimizer.zero_grad() once per update (at the top of the iteration, or after step())")
def grads_never_zeroed(file: FileModel) -> Iterator[Hit]:
    """A loop steps the optimizer but never zeroes the gradients.

    ``backward()`` adds into ``.grad``; without ``zero_grad()`` every step uses the sum of all the
    gradients since the start of training, which grows without bound (a hidden, ever-increasing
    learning rate on a stale direction).  Each optimizer counts on its own (zeroing one does not zero
    another's parameters); distributed autograd (``dist_autograd.backward(context_id, ...)``) keeps its
    gradients in the RPC context, with nothing to zero.

    A step function returned by a factory (``step = make_step(model, opt)``, ``make_step`` returning its
    nested ``def step``) is checked where it is called.

    Wrong::

        for x, y in loader:
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()

    Right::

        for x, y in loader:
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
    """
    seen = set()
    for fm in file.functions:
        for s in fm.kind_events(STEP):
            loop = train_loop(s)
            if loop is None:
                yield from _never_zeroed_helper(fm, s)
            elif id(loop) not in seen and not _zeroes(fm, loop, s) and not _distributed_autograd(loop):
                seen.add(id(loop))
                yield Hit(s.node, "the loop steps the optimizer but never zeroes the gradients: "
                                  "backward() keeps adding into .grad")


def _distributed_autograd(loop) -> bool:
    """The loop's backward is ``dist_autograd.backward(context_id, ...)``: gradients live in the RPC context."""
    backs = [e for e in loop.events if e.kind == BACKWARD]
    return bool(backs) and all(e.extra.get("distributed") for e in backs)


def _never_zeroed_helper(fm, s: Event) -> Iterator[Hit]:
    """A ``train_step()`` helper with backward + step, or an ``optimizer_step()`` helper called from a
    loop that runs the backward, with no zero_grad in the helper nor in its callers' loops."""
    if any(ZERO in e.kinds() for e in fm.events):
        return
    sites = [c for c in fm.call_sites() if c.loops]
    trains = bool(fm.kind_events(BACKWARD)) or all(train_loop(c) is c.loops[-1] for c in sites)
    if sites and trains and all(not _zeroes(c.fm, c.loops[-1], s) for c in sites):
        yield Hit(s.node, f"{fm.name}() steps the optimizer and its callers' loop never zeroes the gradients")


@rule("TB105", "accumulated-loss-not-divided",
      fix="divide the loss by the number of accumulated micro-batches before backward()")
def accumulated_loss_not_divided(file: FileModel) -> Iterator[Hit]:
    """The loss of a gradient-accumulation micro-batch is not divided by the accumulation count.

    Summing the gradients of ``k`` micro-batches gives ``k`` times the gradient of their mean: the
    effective learning rate is multiplied by ``k`` (and so is what gradient clipping sees).  Divide
    each micro-batch loss by ``k`` so that ``k`` micro-batches equal one big batch.
    A step function that splits its batch itself (``for cx, cy in zip(x.chunk(n), y.chunk(n))``, or
    ``for _ in range(accum)``, with ``optimizer.step()`` after that loop) accumulates over ``n`` too.

    Wrong::

        for i, (x, y) in enumerate(loader):
            loss = loss_fn(model(x), y)
            loss.backward()
            if (i + 1) % accum_steps == 0:
                optimizer.step()
                optimizer.zero_grad()

    Right::

        for i, (x, y) in enumerate(loader):
            loss = loss_fn(model(x), y) / accum_steps
            loss.backward()
            if (i + 1) % accum_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
    """
    for fm, loop in loops_of(file):
        acc = fm.accumulation(loop)
        if acc is None or acc.managed:  # accelerator.backward divides the loss itself
            continue
        scope = acc.inner or acc.loop
        for b in scope.events:
            if b.kind != BACKWARD or (acc.inner is None and not at_level(b, loop)):
                continue
            if scaled_loss(fm, b.extra.get("loss"), b.order, acc.counter) is False:
                yield Hit(b.node, "the micro-batch loss is not divided by the accumulation count: the update "
                                  "is the sum of the gradients, not their mean")


_SELF_UNSCALING = re.compile(r"accelerator|fabric|trainer|engine")


def _unscales_itself(c: Event) -> bool:
    """``accelerator.clip_grad_norm_(...)`` / ``fabric.clip_gradients(...)`` unscale the gradients before clipping."""
    return c.kind == CLIP and bool(c.recv) and bool(_SELF_UNSCALING.search(c.recv.split(".")[-1].lower()))


def _scaler_in_use(fm, c: Event) -> bool:
    loop = train_loop(c)
    for e in fm.events:
        if e.exclusive(c) or (loop is not None and loop not in e.loops):
            continue
        if e.kind in (SCALE, SCALER_UPDATE) or (e.kind == STEP and e.extra.get("scaler")):
            return True
    return False


@rule("TB106", "clip-before-unscale",
      fix="call scaler.unscale_(optimizer) right before clipping")
def clip_before_unscale(file: FileModel) -> Iterator[Hit]:
    """Gradients are clipped while a GradScaler is in use, without ``scaler.unscale_()`` first.

    Under ``GradScaler`` the gradients are multiplied by the loss scale (65536 at the start).
    Clipping them to a max norm of 1.0 before ``unscale_`` clips the *scaled* norm: the true
    gradient is cut to about 1/65536 of the intended norm, and the threshold changes whenever
    the scale does.  The finding is static and advisory: lint cannot know whether the scaler is
    enabled.  With ``GradScaler(enabled=False)`` (or ``enabled=use_amp`` on a run without AMP) the
    scale is 1, so the clip is harmless in that run and the runtime audit, which sees the real
    scale, reports nothing; the order is still wrong the day the scaler is switched on.

    Clipping done by a local helper (``clip(model, 1.0)`` whose body calls ``clip_grad_norm_``) counts where the
    helper is called, and is reported at that call.

    Wrong::

        scaler.scale(loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()

    Right::

        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
    """
    for fm in file.functions:
        for c in fm.events:
            if not (c.kind == CLIP or _pure_call(c, CLIP)) or not _scaler_in_use(fm, c) or _unscales_itself(c):
                continue
            loop = train_loop(c)
            unscaled = [u for u in fm.events if UNSCALE in u.kinds() and u.order < c.order and not u.exclusive(c)
                        and (loop is None or loop in u.loops)]
            if not unscaled:
                where = f" (in {_helper_name(c)}())" if c.kind == CALL else ""
                yield Hit(c.node, f"gradients are clipped{where} while still multiplied by the GradScaler's loss "
                                  f"scale")


def _other_object(e: Event, name: str, names: set[str]) -> bool:
    """``e`` acts directly on another object than ``name``, one of ``names`` or both made by their own
    constructor: ``scalerD.update()`` does not update ``scalerG`` (a helper's call, or an alias, may)."""
    if e.kind == CALL or e.recv is None or e.recv == name:
        return False
    return e.recv in names or (_constructed(e.fm, e.recv) and _constructed(e.fm, name))


def _constructed(fm, name: str) -> bool:
    """``name = GradScaler()`` (or any object constructor) in this function or an enclosing one."""
    scope = fm
    while scope is not None:
        if name in scope.roles:
            return scope.roles[name] != R.NOT_AN_OBJECT
        scope = scope.parent
    return False


@rule("TB107", "scaler-step-without-update", fix="call scaler.update() once after every scaler.step(optimizer)")
def scaler_step_without_update(file: FileModel) -> Iterator[Hit]:
    """``scaler.step(optimizer)`` is called but ``scaler.update()`` never is.

    The loss scale only adapts in ``update()``: without it the scale never grows back after an
    overflow and never shrinks on one — every step with inf/NaN gradients is skipped forever.

    Each scaler counts on its own: with two (``scaler_d``, ``scaler_g``), updating one does not update the
    other.

    Wrong::

        for x, y in loader:
            optimizer.zero_grad()
            with torch.autocast("cuda"):
                loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)

    Right::

        for x, y in loader:
            optimizer.zero_grad()
            with torch.autocast("cuda"):
                loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
    """
    for fm in file.functions:
        scalers = {s.extra["scaler"] for s in fm.kind_events(STEP) if s.extra.get("scaler")}
        for s in fm.kind_events(STEP):
            if not s.extra.get("scaler"):
                continue
            loop = train_loop(s)
            updates = [u for u in fm.events if SCALER_UPDATE in u.kinds() and (loop is None or loop in u.loops)
                       and not _other_object(u, s.extra["scaler"], scalers)]
            if not updates:
                yield Hit(s.node, f"{s.extra['scaler']}.step() without {s.extra['scaler']}.update(): "
                                  f"the loss scale never adapts")


@rule("TB108", "ema-misplaced", fix="update the EMA / SWA model right after optimizer.step(), once per update")
def ema_misplaced(file: FileModel) -> Iterator[Hit]:
    """The EMA / SWA average is updated per micro-batch or before the optimizer step.

    An average of the weights must be taken after each real update.  Per micro-batch, the average
    sees the same weights ``k`` times (its decay is effectively ``decay**k``); before the step, it
    always lags one update and misses the last one.
    The update may be ``ema.update(model)``, ``swa_model.update_parameters(model)``, a helper named like
    one called with the model (``update_ema(ema_model, model)``, ``moving_average(ema, model, decay)``)
    or a local helper that blends one model's parameters into another's (``lerp_``, ``mul_`` + ``add_``).

    Wrong::

        for i, (x, y) in enumerate(loader):
            (loss_fn(model(x), y) / accum).backward()
            ema.update(model)
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()

    Right::

        for i, (x, y) in enumerate(loader):
            (loss_fn(model(x), y) / accum).backward()
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
                ema.update(model)
    """
    for fm in file.functions:
        for e in fm.kind_events(EMA_UPDATE):
            loop = train_loop(e)
            if _micro(e):
                yield Hit(e.node, "the weight average is updated on every micro-batch, not once per update")
            elif loop is not None and at_level(e, loop):
                steps = [s for s in loop.events if stepish(s) and not s.exclusive(e)]
                if steps and all(s.order > e.order for s in steps):
                    yield Hit(e.node, "the weight average is updated before the optimizer step of the iteration")


@rule("TB109", "clip-per-micro-batch", fix="clip once per update, in the update branch right before optimizer.step()")
def clip_per_micro_batch(file: FileModel) -> Iterator[Hit]:
    """Gradients are clipped on every micro-batch of a gradient-accumulation loop.

    Clipping a partial sum of gradients is not clipping the update: each micro-batch's clip rescales
    what was accumulated so far, so the final gradient depends on the order of the micro-batches and
    its norm is not bounded by ``max_norm``.  Clip once, on the full gradient, before the step.

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
    for fm in file.functions:
        for c in fm.kind_events(CLIP):
            if _micro(c):
                yield Hit(c.node, "gradients are clipped on every micro-batch instead of once per update")


@rule("TB110", "backward-in-autocast", fix="close the autocast block after the loss; call backward() outside it")
def backward_in_autocast(file: FileModel) -> Iterator[Hit]:
    """``backward()`` is called inside an ``autocast`` block.

    Autocast should wrap the forward pass and the loss only.  The backward pass runs in the dtypes
    the forward chose; running it under autocast is not recommended by PyTorch and can pick
    different (lower-precision) kernels for ops recorded in the backward.

    Wrong::

        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()

    Right::

        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
    """
    for fm in file.functions:
        for b in fm.kind_events(BACKWARD):
            if b.in_context("autocast") is not None:
                yield Hit(b.node, "backward() runs inside autocast; autocast should cover forward + loss only")


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
        if backs and all(b.in_context("no_sync") is not None for b in backs):
            yield Hit(backs[0].in_context("no_sync"), "every backward() runs under no_sync(): the gradients are "
                                                      "never all-reduced across processes")


def _scaled_by_scaler(fm, expr, before: int, depth: int = 0) -> bool:
    if isinstance(expr, ast.Call) and call_name(expr) == "scale":
        return True
    name = dotted(expr)
    if name is None or depth > 3:
        return False
    return any(a.value is not None and _scaled_by_scaler(fm, a.value, a.order, depth + 1)
               for a in fm.last_assignments(name, before))


@rule("TB112", "scaler-bypassed", fix="with a GradScaler: scaler.scale(loss).backward(), then scaler.step(optimizer)")
def scaler_bypassed(file: FileModel) -> Iterator[Hit]:
    """The GradScaler is used for half of the job only.

    ``scaler.scale(loss).backward()`` followed by a plain ``optimizer.step()`` applies gradients
    that are still multiplied by the loss scale (65536x too large, and steps with inf gradients are
    not skipped).  A plain ``optimizer.step()`` after ``scaler.step(optimizer)`` on the same path steps it
    twice on the same gradients (the AMP and non-AMP updates merged by mistake).  A plain
    ``loss.backward()`` followed by ``scaler.step(optimizer)`` divides
    unscaled gradients by the scale: the model barely moves.

    Wrong::

        scaler.scale(loss).backward()
        optimizer.step()
        scaler.update()

    Right::

        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    """
    for fm in file.functions:
        backs = fm.kind_events(BACKWARD)
        for s in fm.kind_events(STEP):
            loop = train_loop(s)
            mine = [b for b in backs if b.order < s.order and not b.exclusive(s) and (loop is None or loop in b.loops)]
            scaled = [b for b in mine if _scaled_by_scaler(fm, b.extra.get("loss"), b.order)]
            twice = _scaler_stepped_before(fm, s, loop)
            if not s.extra.get("scaler") and twice is not None:
                yield Hit(s.node, f"{s.recv}.step() after {twice}.step({s.recv}) steps the optimizer a second time "
                                  f"on the same gradients")
            elif not s.extra.get("scaler") and scaled and not _scaler_step_near(fm, s, loop):
                yield Hit(s.node, f"{s.recv}.step() applies gradients still multiplied by the loss scale; "
                                  f"use scaler.step({s.recv})")
            elif s.extra.get("scaler") and mine and not scaled:
                yield Hit(mine[-1].node, "backward() of an unscaled loss, then scaler.step(): the step divides "
                                         "these gradients by the loss scale")


def _scaler_stepped_before(fm, s: Event, loop) -> str | None:
    """The scaler whose ``scaler.step(opt)`` already ran before the plain ``opt.step()`` ``s`` on the same path
    (in the same iteration): the optimizer steps twice per update."""
    for x in fm.events:
        if x.kind == STEP and x.extra.get("scaler") and x.recv == s.recv and x.order < s.order \
                and not x.exclusive(s) and (loop is None or loop in x.loops):
            return x.extra["scaler"]
    return None


def _scaler_step_near(fm, s: Event, loop) -> bool:
    return any(x.kind == STEP and x.extra.get("scaler") and not x.exclusive(s) and (loop is None or loop in x.loops)
               and x.recv in (s.recv, None) for x in fm.events)
