"""The data-flow model the lint rules query: for every function (and the module body) of a file, the
training events (backward, optimizer/scheduler/scaler steps, zero_grad, clipping, EMA updates,
forwards, train/eval switches, calls of local helpers) in execution order, each with the loops,
``if`` branches and ``with`` contexts around it.  Built once per file, read by every rule."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import cast

from trickbag.audit import _roles as R
from trickbag.audit._ast import (
    Imports,
    call_name,
    calls_in_order,
    child_nodes,
    const_value,
    dotted,
    name_tokens,
    receiver,
    walk,
    walk_no_defs,
)
from trickbag.audit._events import (
    BACKWARD,
    CALL,
    CLIP,
    EMA_UPDATE,
    EVAL,
    FORWARD,
    SCALE,
    SCALER_UPDATE,
    SCHED,
    STEP,
    TRAIN,
    TRAIN_CALL,
    UNSCALE,
    ZERO,
    classify,
)
from trickbag.audit._project import in_test_folder, is_test_path, test_script

__all__ = ["FileModel", "FunctionModel", "Event", "Loop", "Guard", "Assignment", "Accumulation", "steps_like",
           "backward_like",
           "BACKWARD", "STEP", "ZERO", "SCHED", "SCALE", "UNSCALE", "SCALER_UPDATE", "CLIP", "EMA_UPDATE",
           "FORWARD", "EVAL", "TRAIN", "CALL", "TRAIN_CALL"]

_ACCUM_WORDS = re.compile(r"accum|sync_grad|grad(ient)?_acc|should_step|do_step|should_update|do_update|is_update|"
                          r"update_step|is_last|last_micro|boundary|optim_step|step_now|take_step|micro")
_NOT_ACCUM_WORDS = {"log", "logging", "print", "eval", "val", "valid", "save", "ckpt", "checkpoint", "display",
                    "report", "plot", "vis", "sample", "test", "warmup", "swa"}
_GRAD_OFF = {"no_grad", "inference_mode"}
#: objects whose ``train()`` runs a training (not a mode switch of a module)
_TRAINER_LIKE = re.compile(r"trainer|runner|engine|solver|experiment|pipeline")


def _terminates(body: list[ast.stmt]) -> bool:
    """The statements always leave the function: the last one is a ``return`` or ``raise`` (or an ``if`` whose two
    branches both do)."""
    if not body:
        return False
    last = body[-1]
    if isinstance(last, (ast.Return, ast.Raise)):
        return True
    return isinstance(last, ast.If) and _terminates(last.body) and _terminates(last.orelse)


def _returned_before(first: Event, later: Event) -> bool:
    """``first`` sits in a branch of an ``if`` outside any loop whose branch always returns (or raises), and ``later``
    comes after that ``if``: a run that reaches ``first`` leaves the function before ``later`` (one model's training
    loop per branch, each ending in ``return``)."""
    for g in first.guards:
        if g.depth or later.under(g) or any(h.node is g.node for h in later.guards):
            continue
        if _terminates(g.node.body if g.branch else g.node.orelse) \
                and getattr(later.node, "lineno", 0) > (g.node.end_lineno or g.node.lineno):
            return True
    return False


@dataclass(eq=False)
class Guard:
    """One branch of an ``if`` around an event: ``branch`` is True in the body, False in ``else``."""

    node: ast.If
    branch: bool
    depth: int  # number of loops around the ``if``
    accum: bool  # the test looks like an accumulation counter (``(i + 1) % k == 0``, ``sync_gradients``)
    _cond: tuple[str, bool] | None = field(default=None, repr=False)

    def condition(self) -> tuple[str, bool]:
        """The test, normalised (see :meth:`normalised`) and dumped, and the branch this guard is: two ``if``
        statements with the same test take the same branch."""
        if self._cond is None:
            test, branch = self.normalised()
            self._cond = (ast.dump(test), branch)
        return self._cond

    def normalised(self) -> tuple[ast.AST, bool]:
        """(test, branch) with ``x is not None`` read as ``x`` and ``not x`` / ``x is None`` as ``x`` in the other
        branch: ``else`` of ``if scaler is not None`` is ``(scaler, False)``."""
        test, branch = self.node.test, self.branch
        while True:
            if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                test, branch = test.operand, not branch
            elif isinstance(test, ast.Compare) and len(test.ops) == 1 \
                    and isinstance(test.ops[0], (ast.Is, ast.IsNot)) \
                    and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None:
                flip = isinstance(test.ops[0], ast.Is)
                test, branch = test.left, branch != flip
            else:
                return test, branch

    def same_test(self, other: Guard) -> bool:
        """Another ``if`` at the same loop depth with this one's test (no call in it: a call may answer differently)."""
        return other.node is not self.node and self.condition()[0] == other.condition()[0] \
            and not any(isinstance(n, ast.Call) for n in walk(self.node.test))


@dataclass(eq=False)
class Loop:
    """A ``for``/``while`` loop with every event inside it (nested loops included), in order."""

    node: ast.AST
    parent: Loop | None
    depth: int
    events: list[Event] = field(default_factory=list)
    nested_defs: list[str] = field(default_factory=list)

    @property
    def targets(self) -> set[str]:
        gens = getattr(self.node, "generators", None)  # a comprehension: every ``for`` of it
        targets = [g.target for g in gens] if gens else [getattr(self.node, "target", None)]
        return {n.id for t in targets if t is not None for n in walk(t) if isinstance(n, ast.Name)}

    @property
    def iter(self) -> ast.AST | None:
        """What the loop iterates over (None for a ``while`` loop)."""
        gens = getattr(self.node, "generators", None)
        return gens[0].iter if gens else getattr(self.node, "iter", None)

    def contains(self, other: Loop | None) -> bool:
        while other is not None:
            if other is self:
                return True
            other = other.parent
        return False


@dataclass(eq=False)
class Event:
    """A training event: ``kind`` (BACKWARD, STEP, ...), the call node, the object it acts on."""

    kind: str
    node: ast.AST
    recv: str | None
    guards: tuple[Guard, ...]
    loops: tuple[Loop, ...]
    contexts: tuple[tuple[str, ast.AST], ...]
    order: int
    fm: FunctionModel
    extra: dict = field(default_factory=dict)

    @property
    def loop(self) -> Loop | None:
        return self.loops[-1] if self.loops else None

    def in_context(self, kind: str) -> ast.AST | None:
        for k, node in self.contexts:
            if k == kind:
                return node
        return None

    @property
    def grad_disabled(self) -> bool:
        return self.fm.grad_disabled or any(k == "nograd" for k, _ in self.contexts)

    def rel_guards(self, loop: Loop | None) -> tuple[Guard, ...]:
        depth = loop.depth if loop is not None else 0
        return tuple(g for g in self.guards if g.depth >= depth)

    def under(self, guard: Guard) -> bool:
        return any(g.node is guard.node and g.branch == guard.branch for g in self.guards)

    def exclusive(self, other: Event) -> bool:
        """True when the two events sit in different branches of one ``if`` (never both run), or in opposite
        branches of two ``if`` statements of one iteration with the same test, none of whose names is assigned
        between them (``if scaler is not None: scaler.scale(loss).backward()`` ... ``if scaler is None:
        optimizer.step()``)."""
        for g in self.guards:
            for h in other.guards:
                if g.node is h.node:
                    if g.branch != h.branch:
                        return True
                elif g.same_test(h) and g.condition()[1] != h.condition()[1] and not self._reassigned(other, g, h):
                    return True
        return _returned_before(self, other) or _returned_before(other, self)

    def _reassigned(self, other: Event, g: Guard, h: Guard) -> bool:
        """Are the two ``if`` statements in different iterations of a loop, or is a name of their test assigned
        between them (or in a loop around one of them only)?"""
        common = min(g.depth, h.depth)
        if self.loops[:common] != other.loops[:common]:
            return True
        names = {d for n in walk(g.node.test) if isinstance(n, (ast.Name, ast.Attribute)) and (d := dotted(n))}
        lines = [g.node.lineno, h.node.lineno] + [getattr(lp.node, "lineno", 0) for lp in self.loops[common:g.depth]] \
            + [getattr(lp.node, "lineno", 0) for lp in other.loops[common:h.depth]]
        lo, hi = min(lines), max(lines)
        return any(set(a.names) & names and lo <= getattr(a.node, "lineno", 0) <= hi for a in self.fm.assigns)

    def kinds(self) -> set[str]:
        """Its kind, and for a call of a local helper every kind the helper runs when given these arguments."""
        if self.kind == CALL:
            return {self.kind} | self.fm.file.summary(self.extra["helper"], 0, self.constants()).kinds
        return {self.kind}

    def constants(self) -> frozenset | None:
        """For a call of a local helper, the (parameter, constant) pairs it passes to parameters the helper
        compares to constants (``set_mode("eval", ...)`` -> ``{("mode", "eval")}``); None when there are none."""
        if "constants" not in self.extra:
            helper, call = self.extra.get("helper"), self.node
            found = None
            if helper is not None and isinstance(call, ast.Call) and self.fm.file.tested_params(helper):
                tested = self.fm.file.tested_params(helper)
                args = helper.node.args  # a def: only defs are helpers
                params = [a.arg for a in args.posonlyargs + args.args]
                if helper.cls is not None and isinstance(call.func, ast.Attribute) and params:
                    params = params[1:]
                pairs = list(zip(params, call.args)) + [(k.arg, k.value) for k in call.keywords if k.arg]
                found = frozenset((p, a.value) for p, a in pairs if p in tested and isinstance(a, ast.Constant)
                                  and isinstance(a.value, (str, int, bool))) or None
            self.extra["constants"] = found
        return self.extra["constants"]


@dataclass(eq=False)
class Assignment:
    """``names = value`` (or ``name op= value`` when ``op`` is set) at a point of a function."""

    names: list[str]
    value: ast.AST | None
    node: ast.AST
    order: int
    loops: tuple[Loop, ...]
    op: ast.operator | None = None
    contexts: tuple[tuple[str, ast.AST], ...] = ()

    @property
    def is_append(self) -> bool:
        return isinstance(self.node, ast.Call)


@dataclass
class Summary:
    """What a local helper does, seen from its callers."""

    kinds: set[str]
    last_mode: Event | None
    mode_recvs: set[str]


@dataclass(eq=False)
class Accumulation:
    """Gradient accumulation in a loop: micro-batches are its iterations (guarded-step shape) or the
    iterations of an inner loop (nested shape), and the update happens under ``guard`` / after ``inner``
    / inside the helpers ``updates`` that test the count themselves (``self.maybe_step(i)``)."""

    loop: Loop
    guard: Guard | None
    inner: Loop | None
    counter: set[str]
    updates: tuple[Event, ...] = ()
    #: a framework runs the accumulation (``with accelerator.accumulate(model):``): its prepared optimizer skips
    #: ``step()`` / ``zero_grad()`` on the micro-batches and ``accelerator.backward`` divides the loss; what runs
    #: outside those objects (an EMA, clipping, an unprepared scheduler) still runs on every micro-batch unless
    #: it tests ``accelerator.sync_gradients``
    managed: bool = False

    def is_micro(self, ev: Event) -> bool:
        if self.inner is not None:
            return self.inner in ev.loops
        if self.loop not in ev.loops:
            return False
        if self.guard is None:  # ``if self._backprop_step(loss): scheduler.step()``: run when the helper stepped
            tests = [u.node for u in self.updates]
            return ev not in self.updates and not any(
                g.accum or any(t in walk_no_defs(g.node.test) for t in tests) for g in ev.rel_guards(self.loop))
        if ev.under(self.guard):
            return False
        if any(g.node is self.guard.node for g in ev.guards):
            return True  # the other branch of the update test
        return not any(g.accum for g in ev.rel_guards(self.loop))


def guard_is_accum(test: ast.AST) -> bool:
    """True for an ``if`` test that looks like an accumulation boundary."""
    for n in walk_no_defs(test):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod):
            words: set[str] = set()
            for m in walk_no_defs(n.right):
                if isinstance(m, (ast.Name, ast.Attribute)):
                    words.update(name_tokens(dotted(m) or ""))
            if not words & _NOT_ACCUM_WORDS:
                return True
        if isinstance(n, (ast.Name, ast.Attribute)):
            name = (dotted(n) or "").lower()
            if _ACCUM_WORDS.search(name) and not set(name_tokens(name)) & _NOT_ACCUM_WORDS:
                return True
    return False


def _ends_with_continue(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], ast.Continue)


class FunctionModel:
    """The events, loops and assignments of one function (or of the module body)."""

    def __init__(self, node: ast.AST, file: FileModel, cls: ast.ClassDef | None,
                 parent: FunctionModel | None) -> None:
        self.node, self.file, self.cls, self.parent = node, file, cls, parent
        self.name = getattr(node, "name", "<module>")
        self.events: list[Event] = []
        self.loops: list[Loop] = []
        self.assigns: list[Assignment] = []
        self.nested: dict[str, FunctionModel] = {}
        self.roles: dict[str, str] = {}
        self._grad_disabled: bool | None = None
        self._accum: dict[int, Accumulation | None] = {}
        self._nodes: list[ast.AST] | None = None
        self._call_assigns: dict[str, list[ast.Call]] | None = None

    @property
    def grad_disabled(self) -> bool:
        """Decorated with ``no_grad`` / ``inference_mode``, or with a decorator that wraps one (the project's
        own ``@smart_inference_mode()``: named so, or a function of this file whose body uses one)."""
        if self._grad_disabled is None:
            self._grad_disabled = any(_decorator_kind(d, self.file) == "nograd"
                                      for d in getattr(self.node, "decorator_list", []))
        return self._grad_disabled

    # ------------------------------------------------------------------ roles
    def body(self) -> list[ast.stmt]:
        if isinstance(self.node, ast.Module):
            return [s for s in self.node.body if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                    ast.ClassDef))]
        return self.node.body  # type: ignore[attr-defined]  # a def: FunctionModels are made for defs and the module

    @property
    def nodes(self) -> list[ast.AST]:
        """Every node of the body (nested functions, classes and lambdas excluded), computed once."""
        if self._nodes is None:
            self._nodes = [n for stmt in self.body() for n in walk_no_defs(stmt)]
        return self._nodes

    def collect_roles(self) -> None:
        args = getattr(self.node, "args", None)
        if args is not None:
            for a in args.posonlyargs + args.args + args.kwonlyargs:
                role = R.annotation_role(a.annotation)
                if role:
                    self.roles[a.arg] = role
        for a, default in _defaults(self.node):
            role = R.role_by_constructor(default, self.file.imports, self.file.class_names)
            if role:
                self.roles[a.arg] = role
        for n in self.nodes:
            if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None:
                role = R.role_by_constructor(n.value, self.file.imports, self.file.class_names) \
                    or (R.NOT_AN_OBJECT if _plain_data(n.value) else None)
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                for t in targets:
                    if role and (d := dotted(t)) and (role != R.NOT_AN_OBJECT or d not in self.roles):
                        self.roles[d] = role

    def role(self, name: str | None) -> str | None:
        """The role of a dotted name here: local constructor, class attribute, module, or the name."""
        if not name:
            return None
        scope: FunctionModel | None = self
        while scope is not None:
            if name in scope.roles:
                return scope.roles[name]
            scope = scope.parent
        if name.startswith("self.") and self.cls is not None:
            role = self.file.class_roles.get(self.cls.name, {}).get(name)
            if role:
                return role
        if name in self.file.module.roles:
            return self.file.module.roles[name]
        if name.split(".")[-1].replace("[]", "") in self.file.module.roles:
            return self.file.module.roles[name.split(".")[-1].replace("[]", "")]
        return R.role_by_name(name) or (R.MODEL if name in self.file.optimized() else None)

    # ------------------------------------------------------------------ queries
    def kind_events(self, *kinds: str) -> list[Event]:
        return [e for e in self.events if e.kind in kinds]

    def accumulation(self, loop: Loop) -> Accumulation | None:
        """How ``loop`` accumulates gradients (None when each iteration is one update)."""
        key = id(loop)
        if key not in self._accum and any(e.kind == STEP and e.extra.get("closure") for e in loop.events):
            self._accum[key] = None  # ``optimizer.step(closure)``: the closure recomputes the gradients every step
        if key not in self._accum:
            acc = _managed_accumulation(self, loop) or _guarded_accumulation(self, loop) \
                or _nested_accumulation(self, loop) or _helper_accumulation(self, loop) \
                or _split_batch_accumulation(self, loop)
            self._accum[key] = None if acc is not None and (_input_gradients(self, acc.inner or acc.loop)
                                                            or _gradients_consumed(acc.inner or acc.loop)) else acc
        return self._accum[key]

    def call_assignments(self) -> dict[str, list[ast.Call]]:
        """``name = f(...)`` statements of the body: name -> the calls assigned to it (computed once)."""
        if self._call_assigns is None:
            self._call_assigns = {}
            for n in self.nodes:
                if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) \
                        and isinstance(n.value, ast.Call):
                    self._call_assigns.setdefault(n.targets[0].id, []).append(n.value)
        return self._call_assigns

    def call_sites(self) -> list[Event]:
        """The calls of this function from the file (as a local helper)."""
        return self.file.memo("call_sites", self.file.call_table).get(id(self), [])

    def last_assignments(self, name: str, before: int) -> list[Assignment]:
        return [a for a in self.assigns if name in a.names and a.order < before and not a.is_append]


def _plain_data(value: ast.AST) -> bool:
    """A literal (dict, list, string, number) or ``dict(...)``: whatever the name, not a model."""
    if isinstance(value, (ast.Dict, ast.List, ast.Tuple, ast.Set, ast.Constant, ast.JoinedStr, ast.ListComp,
                          ast.DictComp, ast.SetComp)):
        return True
    return isinstance(value, ast.Call) and call_name(value) in ("dict", "OrderedDict", "list", "str", "defaultdict")


def _decorator_kind(dec: ast.AST, file: FileModel) -> str | None:
    name = file.imports.qualname(dec).split(".")[-1]
    if name in _GRAD_OFF or any(g in name for g in _GRAD_OFF):
        return "nograd"
    local = file.top.get(name)
    if local is not None and any((isinstance(n, ast.Name) and n.id in _GRAD_OFF)
                                 or (isinstance(n, ast.Attribute) and n.attr in _GRAD_OFF)
                                 for n in walk(local.node)):
        return "nograd"
    return None


def _is_batch_loop(fm: FunctionModel, loop: Loop) -> bool:
    return any(BACKWARD in e.kinds() for e in loop.events)


def steps_like(e: Event) -> bool:
    """An optimizer step, or a call of a local helper that steps without a backward of its own
    (``optimizer_step(optimizer, scheduler)``, ``self._update()``)."""
    if e.kind == STEP:
        return True
    return e.kind == CALL and STEP in e.kinds() and BACKWARD not in e.kinds()


def backward_like(e: Event) -> bool:
    """A backward, or a call of a local helper that runs one without stepping (``self.micro_step(x, y)``)."""
    if e.kind == BACKWARD:
        return True
    return e.kind == CALL and BACKWARD in e.kinds() and STEP not in e.kinds()


def _own_events(fm: FunctionModel, loop: Loop, test) -> list[Event]:
    """Events passing ``test`` in ``loop`` that do not belong to a nested loop with its own backward."""
    out = []
    for e in loop.events:
        if not test(e):
            continue
        inner = e.loops[e.loops.index(loop) + 1:]
        if not any(_is_batch_loop(fm, lp) for lp in inner):
            out.append(e)
    return out


def _managed_accumulation(fm: FunctionModel, loop: Loop) -> Accumulation | None:
    """Each iteration runs its backward inside ``with accelerator.accumulate(model):``."""
    backs = _own_events(fm, loop, backward_like)
    if backs and all(b.in_context("accumulate") is not None for b in backs):
        return Accumulation(loop, None, None, set(), managed=True)
    return None


def _guarded_accumulation(fm: FunctionModel, loop: Loop) -> Accumulation | None:
    steps, backs = _own_events(fm, loop, steps_like), _own_events(fm, loop, backward_like)
    if not steps or not backs:
        return None
    guards = []
    for s in steps:
        accum = [g for g in s.rel_guards(loop) if g.accum]
        if not accum:
            return None
        guards.append(accum[-1])
    g = guards[0]
    if not all(s.under(g) for s in steps):
        return None
    micro = [b for b in backs if not b.under(g)]
    inside = [b for b in backs if b.under(g)]
    if not micro:
        return None
    if inside and not any(any(h.node is g.node and h.branch != g.branch for h in b.guards) for b in micro):
        return None
    return Accumulation(loop, g, None, _counter(g))


_COUNT_NAME = re.compile(r"accum|grad(ient)?_acc")


def _counter(g: Guard) -> set[str]:
    """The names of the accumulation count in an update test (``k`` in ``(i + 1) % k == 0``)."""
    counter: set[str] = set()
    for n in walk_no_defs(g.node.test):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod):
            counter |= {d for m in walk_no_defs(n.right) if (d := dotted(m))}
        elif isinstance(n, (ast.Name, ast.Attribute)) and _COUNT_NAME.search((name := dotted(n) or "").lower()):
            counter.add(name)
    # ``self.accum``, not ``self`` (every ``self.model(x)`` would look divided)
    return {c for c in counter if c not in ("self", "cls") and not any(o.startswith(c + ".") for o in counter)}


def made_to_require_grad(fm: FunctionModel) -> set[str]:
    """Names the function itself makes require gradients (an input to differentiate or optimise, not a given
    latent): ``delta.requires_grad = True``, ``delta.requires_grad_()``, ``delta = torch.zeros(...,
    requires_grad=True)`` / ``Variable(d, requires_grad=True)``."""
    wanting: set[str | None] = set()
    for n in fm.nodes:
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr == "requires_grad"
                                             for t in n.targets) and const_value(n.value) is True:
            wanting |= {dotted(t.value) for t in n.targets if isinstance(t, ast.Attribute)}
        elif isinstance(n, ast.Call) and call_name(n) == "requires_grad_" and isinstance(n.func, ast.Attribute) \
                and (not n.args or const_value(n.args[0]) is True):
            wanting.add(dotted(n.func.value))
        elif isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and any(
                k.arg == "requires_grad" and const_value(k.value) is True for k in n.value.keywords):
            wanting |= {dotted(t) for t in n.targets}
    return {w for w in wanting if w}


def _input_gradients(fm: FunctionModel, loop: Loop) -> bool:
    """The loop's backward is for the gradient of an input, not of the parameters: it reads ``x.grad`` of a tensor
    this function made to require gradients (:func:`made_to_require_grad`): the steps of an adversarial attack (PGD)
    or of an input optimisation, each one a fresh gradient of the input, not micro-batches of an update."""
    wanting = made_to_require_grad(fm)
    return bool(wanting) and any(isinstance(n, ast.Attribute) and n.attr == "grad" and dotted(n.value) in wanting
                                 for n in walk_no_defs(loop.node))


def _gradients_consumed(loop: Loop) -> bool:
    """Each backward's gradients are read out in the loop itself (``G[:, k].copy_(p.grad.view(-1))``,
    ``grads.append(p.grad.clone())``): per-task or per-sample gradients (GEM, a Fisher estimate), each one used on its
    own, not micro-batches summed into one update."""
    for n in walk_no_defs(loop.node):
        if isinstance(n, ast.Call):
            values = [*n.args, *(k.value for k in n.keywords)]
        elif isinstance(n, ast.Assign) and not any(isinstance(t, ast.Attribute) and t.attr == "grad"
                                                   for t in n.targets):
            values = [n.value]
        else:
            continue
        if any(isinstance(x, ast.Attribute) and x.attr == "grad" for v in values for x in walk_no_defs(v)):
            return True
    return False


def _nested_accumulation(fm: FunctionModel, loop: Loop) -> Accumulation | None:
    steps = [s for s in loop.events if steps_like(s) and s.loop is loop]
    if not steps:
        return None
    for e in loop.events:
        inner = e.loops[e.loops.index(loop) + 1] if len(e.loops) > e.loops.index(loop) + 1 else None
        if inner is None or not backward_like(e):
            continue
        if any(steps_like(x) for x in inner.events):
            continue
        if any(s.order > e.order for s in steps):
            counter: set[str] = set()
            it = inner.iter
            if isinstance(it, ast.Call) and call_name(it) == "range" and it.args:
                counter = {d for a in it.args if (d := dotted(a))}
            return Accumulation(loop, None, inner, counter)
    return None


_MICRO_WORDS = re.compile(r"accum|micro|chunk|split|shard|^mbs?$|^n_?mb$")
_SPLIT_CALLS = {"chunk", "split", "tensor_split", "array_split"}


def _split_batch_accumulation(fm: FunctionModel, loop: Loop) -> Accumulation | None:
    """One step over a batch split into micro-batches by a loop of the step function itself:
    ``for cx, cy in zip(x.chunk(n), y.chunk(n)): loss_fn(model(cx), cy).backward()`` (or ``for k in
    range(accum): ...``), then ``optimizer.step()`` after the loop, outside any loop.  The loop must
    iterate over chunks / splits / an accumulation count, and the function must not rescale ``.grad``."""
    if loop.parent is not None or loop.iter is None or not any(backward_like(e) for e in loop.events) \
            or any(steps_like(e) for e in loop.events):
        return None
    last = max(e.order for e in loop.events)
    if not any(steps_like(s) and not s.loops and s.order > last for s in fm.events):
        return None
    counter = _micro_iteration(fm, loop.iter)
    if counter is None or rescales_grads(fm):
        return None
    return Accumulation(loop, None, loop, counter)


def _micro_iteration(fm: FunctionModel, it: ast.AST) -> set[str] | None:
    """The micro-batch count of a loop's iterable (``n`` in ``x.chunk(n)``, ``accum`` in ``range(accum)``),
    an empty set when it iterates over split batches without one, None when it is not micro-batches."""
    calls = [n for n in walk_no_defs(it) if isinstance(n, ast.Call)]
    names = {d for n in walk_no_defs(it) if isinstance(n, (ast.Name, ast.Attribute)) and (d := dotted(n))}
    for name in list(names):  # ``chunks = x.split(bs)`` before the loop
        for a in fm.assigns:
            if name in a.names and isinstance(a.value, ast.Call) and call_name(a.value) in _SPLIT_CALLS:
                calls.append(a.value)
    micro = any(call_name(c) in _SPLIT_CALLS for c in calls) or \
        any(_MICRO_WORDS.search(t) for n in names for t in name_tokens(n.split(".")[-1])) or \
        any(_MICRO_WORDS.search(n.split(".")[-1].lower()) for n in names)
    if not micro:
        return None
    counter = {d for c in calls if call_name(c) in _SPLIT_CALLS | {"range"} for a in c.args if (d := dotted(a))}
    return {c for c in counter if c not in ("self", "cls")}


def rescales_grads(fm: FunctionModel) -> bool:
    """``p.grad /= n``, ``p.grad.div_(n)``, ``p.grad.mul_(1 / n)``: the sum is averaged after the fact."""
    for n in fm.nodes:
        if isinstance(n, ast.AugAssign) and isinstance(n.op, (ast.Div, ast.Mult)) and \
                (dotted(n.target) or "").endswith(".grad"):
            return True
        if isinstance(n, ast.Call) and call_name(n) in ("div_", "mul_", "_foreach_div_", "_foreach_mul_") and \
                any(isinstance(m, ast.Attribute) and m.attr == "grad" for m in walk_no_defs(n)):
            return True
    return False


def _helper_accumulation(fm: FunctionModel, loop: Loop) -> Accumulation | None:
    """``self.maybe_step(i)`` called on every iteration, the helper testing ``(i + 1) % k == 0`` itself (or one helper
    that back-propagates the micro-batch and steps under its own accumulation counter)."""
    steps, backs = _own_events(fm, loop, steps_like), _own_events(fm, loop, backward_like)
    if not steps and not backs:  # ``self._backprop_step(loss)``: one helper back-propagates, steps when its count says
        steps = backs = _own_events(fm, loop, lambda e: e.kind == CALL and {BACKWARD, STEP} <= e.kinds())
    if not steps or not backs or not all(s.kind == CALL for s in steps):
        return None
    counter: set[str] = set()
    for s in steps:
        inner = [e for e in s.extra["helper"].events if e.kind == STEP]
        guards = [next((g for g in e.guards if g.accum), None) for e in inner]
        if not inner or None in guards or any(e.loops for e in inner):
            return None
        for g in guards:
            if g is not None:  # None in guards returned above
                counter |= _counter(g)
    if any(g.accum for s in steps for g in s.rel_guards(loop)):
        return None
    return Accumulation(loop, None, None, counter, tuple(steps))


def returned_nested(factory: FunctionModel) -> FunctionModel | None:
    """The nested function a factory returns by name (``def make_step(...): def step(...): ...; return step``)."""
    for n in factory.nodes:
        if isinstance(n, ast.Return) and isinstance(n.value, ast.Name) and n.value.id in factory.nested:
            return factory.nested[n.value.id]
    return None


_BLOCKS = (ast.stmt, ast.excepthandler, getattr(ast, "match_case", ast.excepthandler))


class FileModel:
    """Every function model of one parsed file, plus module-wide tables (imports, classes, roles)."""

    def __init__(self, tree: ast.Module, path: str = "<string>", torch_support: str | None = None) -> None:
        self.tree = tree
        self.path = path
        #: which torch the project supports (:data:`trickbag.audit._project.OLD_TORCH` / ``NEW_TORCH``), None: unknown
        self.torch_support = torch_support
        self.nodes: list[ast.AST] = list(walk(tree))
        self._memo: dict[str, object] = {}
        self.imports = Imports(self.nodes)
        #: the file is a test module (``test_*.py``, or in a ``tests/`` folder and importing pytest / unittest)
        self.test_file = is_test_path(path) or test_script(path) or (in_test_folder(path) and any(
            m.split(".")[0] in ("pytest", "unittest") for m in self.imports.alias.values()))
        self.classes = {n.name: n for n in self.nodes if isinstance(n, ast.ClassDef)}
        self.class_names = set(self.classes)
        self.functions: list[FunctionModel] = []
        self.module = self._add(tree, None, None)
        self.top: dict[str, FunctionModel] = {}
        self.methods: dict[tuple[str, str], FunctionModel] = {}
        self._make_children(tree, None, self.module, False)
        self.class_roles = self._class_roles()
        for fm in self.functions:
            fm.collect_roles()
        for fm in self.functions:
            _Walker(fm).run()
        self._summaries: dict[tuple[int, frozenset | None], Summary] = {}

    def _add(self, node: ast.AST, cls: ast.ClassDef | None, parent: FunctionModel | None) -> FunctionModel:
        fm = FunctionModel(node, self, cls, parent)
        self.functions.append(fm)
        return fm

    def _make_children(self, node: ast.AST, cls: ast.ClassDef | None, parent: FunctionModel,
                       in_class: bool) -> None:
        """Every function and method of the tree, in source order (iterative: deep expressions are fine)."""
        todo = [(child, cls, parent, in_class) for child in reversed(list(child_nodes(node)))
                if isinstance(child, _BLOCKS)]
        while todo:
            child, cls, parent, in_class = todo.pop()
            nxt: tuple = (cls, parent, in_class)
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                fm = self._add(child, cls, parent if parent is not self.module and not in_class else None)
                if in_class and cls is not None:
                    self.methods[(cls.name, child.name)] = fm
                elif parent is self.module:
                    self.top[child.name] = fm
                else:
                    parent.nested[child.name] = fm
                nxt = (cls, fm, False)
            elif isinstance(child, ast.ClassDef):
                nxt = (child, parent, True)
            elif isinstance(child, ast.Lambda):
                continue
            # definitions are statements: only statement bodies are walked (expressions hold no ``def``)
            todo.extend((c, *nxt) for c in reversed(list(child_nodes(child))) if isinstance(c, _BLOCKS))

    def _class_roles(self) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        for cls in self.classes.values():
            roles = out.setdefault(cls.name, {})
            for n in walk(cls):
                if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None:
                    role = R.role_by_constructor(n.value, self.imports, self.class_names)
                    for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                        name = dotted(t)
                        if role and name and name.startswith("self."):
                            roles[name] = role
        return out

    def resolve(self, call: ast.Call, fm: FunctionModel) -> FunctionModel | None:
        """The local function a call runs: a nested or module-level def, or ``self.method``."""
        func = call.func
        if isinstance(func, ast.Name):
            scope: FunctionModel | None = fm
            while scope is not None:
                if func.id in scope.nested:
                    return scope.nested[func.id]
                scope = scope.parent
            return self.top.get(func.id) or self._factory_product(func.id, fm)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self" \
                and fm.cls is not None:
            return self.methods.get((fm.cls.name, func.attr)) or self._inherited_method(fm.cls.name, func.attr)
        if isinstance(func, ast.Attribute):
            return self._other_object_method(func, fm)
        return None

    def _inherited_method(self, cls_name: str, name: str) -> FunctionModel | None:
        """``self.name()`` in a class of this file that does not define ``name``: the method of its nearest base
        class of this file that does, else of the one subclass of this file that does (a base class's
        ``run_all_evals`` calling ``self.evaluate_mt`` that only ``EncDecEvaluator`` defines)."""
        bases = cast("dict[str, list[str]]", self.memo("file_bases", lambda: {
            c: [b for b in ((dotted(x) or "").split(".")[-1] for x in node.bases) if b in self.classes]
            for c, node in self.classes.items()}))
        seen, todo = {cls_name}, list(bases.get(cls_name, []))
        while todo:
            base = todo.pop(0)
            if base in seen:
                continue
            seen.add(base)
            if (base, name) in self.methods:
                return self.methods[(base, name)]
            todo += bases.get(base, [])
        subs = [c for c, bs in bases.items() if cls_name in bs and (c, name) in self.methods]
        return self.methods[(subs[0], name)] if len(subs) == 1 else None

    def _other_object_method(self, func: ast.Attribute, fm: FunctionModel) -> FunctionModel | None:
        """``engine.backward_loss(loss)``, ``self.precision.optimizer_step(opt)``: the method of the one plain class of
        this file (not an ``nn.Module``, not an autograd ``Function``) that defines it, when the object is not a
        module and not a known optimizer, scheduler, scaler, EMA or loss."""
        owners = cast("dict[str, list[FunctionModel]]", self.memo("method_owners", self._method_owners)).get(func.attr)
        if owners is None or len(owners) != 1:
            return None
        recv = dotted(func.value)
        if recv is None or recv in ("self", "cls") or recv.split(".")[0] in self.imports.alias \
                or fm.role(recv) in (R.OPTIMIZER, R.SCHEDULER, R.SCALER, R.EMA, R.LOSS):
            return None
        return owners[0]

    def _method_owners(self) -> dict[str, list[FunctionModel]]:
        """method name -> the methods of that name of this file's plain classes (instance methods, no dunders)."""
        out: dict[str, list[FunctionModel]] = {}
        for (cls_name, name), fm in self.methods.items():
            cls = self.classes[cls_name]
            bases = {(dotted(b) or "").split(".")[-1] for b in cls.bases}
            decorators = {dotted(d) for d in cast(ast.FunctionDef, fm.node).decorator_list}
            if name.startswith("__") or any(b.endswith(("Module", "Function")) for b in bases) \
                    or (cls_name, "forward") in self.methods \
                    or decorators & {"staticmethod", "classmethod"}:
                continue
            out.setdefault(name, []).append(fm)
        return out

    def _factory_product(self, name: str, fm: FunctionModel) -> FunctionModel | None:
        """``step = make_step(model, opt)`` where ``make_step`` returns its nested ``def step``: that nested
        function, so that ``step(x, y)`` in a loop is a call of it."""
        key = (id(fm), name)
        table = cast("dict[tuple[int, str], FunctionModel | None]", self._memo.setdefault("factory_products", {}))
        if key in table:
            return table[key]
        table[key] = None  # cycle guard
        scopes: list[FunctionModel] = []
        scope: FunctionModel | None = fm
        while scope is not None:
            scopes.append(scope)
            scope = scope.parent
        for scope in scopes + ([self.module] if self.module not in scopes else []):
            for value in scope.call_assignments().get(name, ()):
                factory = self.resolve(value, scope)
                product = returned_nested(factory) if factory is not None else None
                if product is not None:
                    table[key] = product
                    return product
        return None

    def call_table(self) -> dict[int, list[Event]]:
        """id(helper) -> the CALL events that run it."""
        table: dict[int, list[Event]] = {}
        for fm in self.functions:
            for e in fm.events:
                if e.kind == CALL:
                    table.setdefault(id(e.extra["helper"]), []).append(e)
        return table

    def optimized(self) -> set[str]:
        """Dotted names whose ``.parameters()`` go to an optimizer constructor (``RMSprop(agent.parameters())``),
        or switched to eval by a bare ``agent.eval()`` / ``agent.train(False)``: models whatever their name."""
        return self.memo("optimized", lambda: {
            dotted(n.func.value) for node in self.nodes if isinstance(node, ast.Call)
            and R.role_by_constructor(node, self.imports, self.class_names) == R.OPTIMIZER
            for n in walk(node) if isinstance(n, ast.Call) and call_name(n) in ("parameters", "named_parameters")
            and isinstance(n.func, ast.Attribute) and dotted(n.func.value)} | {
            dotted(n.func.value) for n in self.nodes if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and ((call_name(n) == "eval" and not n.args and not n.keywords)
                 or (call_name(n) == "train" and len(n.args) == 1 and const_value(n.args[0]) is False)
                 or (call_name(n) == "train" and not n.args and not n.keywords and dotted(n.func.value) != "self"
                     and not _TRAINER_LIKE.search((dotted(n.func.value) or "").lower())))
            and dotted(n.func.value) and "trainer" not in (dotted(n.func.value) or "").lower()})

    def identifiers(self) -> frozenset[str]:
        """Every name and attribute name the file uses (computed once: a rule whose mistake needs ``GradScaler`` or
        ``ReduceLROnPlateau`` skips a file that never names it)."""
        return self.memo("identifiers", lambda: frozenset(
            n.id if isinstance(n, ast.Name) else n.attr
            for n in self.nodes if isinstance(n, (ast.Name, ast.Attribute))))

    def memo(self, key: str, compute):
        """``compute()`` once per file (rules share file-wide tables this way)."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def resolve_any(self, expr: ast.AST, fm: FunctionModel) -> FunctionModel | None:
        """The first local helper called anywhere inside ``expr`` (None when there is none)."""
        for n in walk_no_defs(expr):
            if isinstance(n, ast.Call):
                found = self.resolve(n, fm)
                if found is not None:
                    return found
        return None

    def summary(self, fm: FunctionModel, _depth: int = 0, consts: frozenset | None = None) -> Summary:
        """Kinds of events a helper runs (through its own helpers too) and its last train/eval switch; with
        ``consts`` (parameter, constant) pairs a call passes, the branches those constants rule out are left out
        (``set_mode("eval", models)`` runs ``if mode == "eval": m.eval()`` only)."""
        key = (id(fm), consts)
        if key in self._summaries:
            return self._summaries[key]
        self._summaries[key] = Summary(set(), None, set())  # cycle guard
        kinds: set[str] = set()
        last_mode, recvs = None, set()
        subs = _submodule_names(fm.node)
        for e in fm.events:
            if e.kind == EVAL and (e.recv or "") in subs:
                continue  # ``for m in model.modules(): m.eval()``: a frozen layer, not the model
            if consts and _ruled_out(e, dict(consts)):
                continue
            if e.kind == CALL and _depth < 4:
                sub = self.summary(e.extra["helper"], _depth + 1, e.constants())
                kinds |= sub.kinds
                last_mode = sub.last_mode or last_mode
                recvs |= sub.mode_recvs
            else:
                kinds.add(e.kind)
            if e.kind in (EVAL, TRAIN):
                last_mode = e
                recvs.add(e.recv or "")
        result = Summary(kinds, last_mode, recvs)
        self._summaries[key] = result
        return result

    def tested_params(self, fm: FunctionModel) -> set[str]:
        """Parameters of ``fm`` that an ``if`` of it compares to a constant (``if mode == "eval":``)."""
        table = cast("dict[int, set[str]]", self.memo("tested_params", dict))
        if id(fm) not in table:
            args = getattr(fm.node, "args", None)
            params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs} if args is not None else set()
            tested = {_constant_test(g.node.test)[0] for e in fm.events for g in e.guards} | \
                {_truth_test(g.node.test)[0] for e in fm.events for g in e.guards}
            table[id(fm)] = {p for p in params if p in tested}
        return table[id(fm)]


def _constant_test(test: ast.AST) -> tuple[str | None, object, bool]:
    """(name, constant, equal) for ``name == constant`` / ``name != constant``; (None, None, False) otherwise."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.NotEq)) \
            and isinstance(test.left, ast.Name) and isinstance(test.comparators[0], ast.Constant):
        return test.left.id, test.comparators[0].value, isinstance(test.ops[0], ast.Eq)
    return None, None, False


def _truth_test(test: ast.AST) -> tuple[str | None, bool]:
    """(name, negated) for ``if name:`` / ``if not name:``; (None, False) otherwise."""
    if isinstance(test, ast.Name):
        return test.id, False
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and isinstance(test.operand, ast.Name):
        return test.operand.id, True
    return None, False


def _ruled_out(e: Event, consts: dict[str, object]) -> bool:
    """An event in a branch that the constants bound to the parameters never take (``if mode == "eval":``, and
    ``if train:`` for a call passing ``train=False``)."""
    for g in e.guards:
        name, value, equal = _constant_test(g.node.test)
        if name is not None and name in consts and ((consts[name] == value) == equal) != g.branch:
            return True
        name, negated = _truth_test(g.node.test)
        if name is not None and name in consts and (bool(consts[name]) != negated) != g.branch:
            return True
    return False


_SUBMODULE_CALLS = {"modules", "children", "named_modules", "named_children"}


def _lists_submodules(expr: ast.AST, listed: set[str]) -> bool:
    return any((isinstance(n, ast.Call) and call_name(n) in _SUBMODULE_CALLS)
               or (isinstance(n, ast.Name) and n.id in listed) for n in walk(expr))


def _submodule_names(func: ast.AST) -> set[str]:
    """Names in ``func`` that hold a submodule, not the model passed in: loop variables over
    ``.modules()`` / ``.children()`` (directly or through a list built from them) and non-parameters
    selected by ``isinstance``."""
    params = (
        {a.arg for a in walk(func.args) if isinstance(a, ast.arg)}
        if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef))
        else set()
    )
    listed: set[str] = set()
    for n in walk(func):
        if isinstance(n, ast.Assign) and _lists_submodules(n.value, set()):
            listed |= {t.id for t in n.targets if isinstance(t, ast.Name)}
    names: set[str] = set()
    for n in walk(func):
        if isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)) and _lists_submodules(n.iter, listed):
            names |= {t.id for t in walk(n.target) if isinstance(t, ast.Name)}
        elif isinstance(n, ast.Call) and call_name(n) == "isinstance" and n.args \
                and isinstance(n.args[0], ast.Name) and n.args[0].id not in params:
            names.add(n.args[0].id)
    return names


class _Walker:
    """Walks one function body in execution order and records its events, loops and assignments."""

    def __init__(self, fm: FunctionModel) -> None:
        self.fm = fm
        self.order = 0
        self.comprehensions: bool | None = None  # does the function hold any comprehension at all
        self.values: dict[str, ast.AST | None] = {}  # name -> the value last assigned to it (walk order)

    def run(self) -> None:
        for arg, default in _defaults(self.fm.node):
            self.assign([arg.arg], default, arg, ())
        self.block(self.fm.body(), (), (), ())

    def block(self, stmts: list[ast.stmt], guards: tuple, loops: tuple, ctx: tuple) -> None:
        extra: tuple = ()
        for st in stmts:
            self.stmt(st, guards + extra, loops, ctx)
            if isinstance(st, ast.If) and not st.orelse and _ends_with_continue(st.body) \
                    and guard_is_accum(st.test):
                extra += (Guard(st, False, len(loops), True),)

    def stmt(self, st: ast.stmt, guards: tuple, loops: tuple, ctx: tuple) -> None:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if loops and not isinstance(st, ast.ClassDef):
                loops[-1].nested_defs.append(st.name)
            return
        if isinstance(st, ast.If):
            self.if_chain(st, guards, loops, ctx)
        elif isinstance(st, (ast.For, ast.AsyncFor, ast.While)):
            self.loop(st, guards, loops, ctx)
        elif isinstance(st, (ast.With, ast.AsyncWith)):
            added = ctx
            for item in st.items:
                self.exprs(item.context_expr, guards, loops, ctx)
                kind = self.context_kind(item.context_expr)
                if kind:
                    added += ((kind, item.context_expr),)
                if item.optional_vars is not None and dotted(item.optional_vars):
                    self.assign([dotted(item.optional_vars)], item.context_expr, st, loops, ctx=ctx)
            self.block(st.body, guards, loops, added)
        elif isinstance(st, ast.Try) or type(st).__name__ == "TryStar":
            st = cast(ast.Try, st)  # ``TryStar`` (3.11+) has the same fields
            self.block(st.body, guards, loops, ctx)
            for h in st.handlers:
                self.block(h.body, guards, loops, ctx)
            self.block(st.orelse, guards, loops, ctx)
            self.block(st.finalbody, guards, loops, ctx)
        elif type(st).__name__ == "Match":
            st = cast(ast.Match, st)
            self.exprs(st.subject, guards, loops, ctx)
            for case in st.cases:
                self.block(case.body, guards, loops, ctx)
        else:
            self.simple(st, guards, loops, ctx)

    def if_chain(self, st: ast.If, guards: tuple, loops: tuple, ctx: tuple) -> None:
        """An ``if`` and its ``elif`` branches, iteratively (a 1000-branch ``elif`` chain nests 1000 deep)."""
        while True:
            self.exprs(st.test, guards, loops, ctx)
            accum = guard_is_accum(st.test) or self.accum_flag(st.test)
            self.block(st.body, guards + (Guard(st, True, len(loops), accum),), loops, ctx)
            guards = guards + (Guard(st, False, len(loops), accum),)
            if len(st.orelse) != 1 or not isinstance(st.orelse[0], ast.If):
                self.block(st.orelse, guards, loops, ctx)
                return
            st = st.orelse[0]

    def loop(self, st: ast.For | ast.AsyncFor | ast.While, guards: tuple, loops: tuple, ctx: tuple) -> None:
        loop = Loop(st, loops[-1] if loops else None, len(loops) + 1)
        self.fm.loops.append(loop)
        if isinstance(st, ast.While):
            self.exprs(st.test, guards, loops + (loop,), ctx)
        else:
            self.exprs(st.iter, guards, loops, ctx)
            names = [dotted(n) for n in walk(st.target) if isinstance(n, ast.Name)]
            self.assign(names, None, st, loops + (loop,), ctx=ctx)
        self.block(st.body, guards, loops + (loop,), ctx)
        self.block(st.orelse, guards, loops, ctx)

    def simple(self, st: ast.stmt, guards: tuple, loops: tuple, ctx: tuple) -> None:
        self.exprs(st, guards, loops, ctx)
        if isinstance(st, ast.Assign):
            names = [dotted(n) for t in st.targets for n in _target_names(t)]
            self.assign([n for n in names if n], st.value, st, loops, ctx=ctx)
            for t in st.targets:
                if isinstance(t, ast.Attribute) and t.attr == "grad" and const_value(st.value) is None:
                    self.emit(ZERO, st, dotted(t.value), guards, loops, ctx)
        elif isinstance(st, (ast.AugAssign, ast.AnnAssign)) and dotted(st.target):
            self.assign([dotted(st.target)], st.value, st, loops, getattr(st, "op", None), ctx)

    def accum_flag(self, test: ast.AST) -> bool:
        """``if do_step:`` where ``do_step`` was last set from an accumulation test (``do_step = n % k == 0``),
        or a comparison of a count last set modulo the accumulation count (``acc = (acc + 1) % k``, then
        ``if acc == 0:``)."""
        while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test = test.operand
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.NotEq)):
            sides = [test.left, test.comparators[0]]
            if any(isinstance(x, ast.Constant) for x in sides):
                test = next(x for x in sides if not isinstance(x, ast.Constant))
        value = self.values.get(dotted(test) or "")
        return value is not None and guard_is_accum(value)

    def assign(self, names: list, value: ast.AST | None, node: ast.AST, loops: tuple,
               op: ast.operator | None = None, ctx: tuple = ()) -> None:
        self.order += 1
        for n in names:
            if n:
                self.values[n] = value if op is None else None
        self.fm.assigns.append(Assignment([n for n in names if n], value, node, self.order, loops, op, ctx))

    def exprs(self, node: ast.AST, guards: tuple, loops: tuple, ctx: tuple) -> None:
        """The calls of an expression in order; those inside a comprehension that runs training events
        (``[self.step(x, y) for x, y in loader]``) are in a loop of their own, as in a ``for`` loop."""
        if self.comprehensions is None:
            self.comprehensions = any(isinstance(n, _COMPREHENSIONS) for n in self.fm.nodes)
        inside = _comprehension_of(node) if self.comprehensions else {}
        comp_loops: dict[int, tuple] = {}
        for call in calls_in_order(node):
            here = self.comprehension_loops(inside, inside.get(id(call), ()), loops, comp_loops, ctx)
            for kind, recv, extra in self.classify(call):
                self.emit(kind, call, recv, guards, here, ctx, extra)
            if call_name(call) in ("append", "extend") and call.args and receiver(call):
                self.assign([receiver(call)], call.args[0], call, here, ast.Add(), ctx)

    def comprehension_loops(self, inside: dict[int, tuple], comps: tuple, loops: tuple, made: dict[int, tuple],
                            ctx: tuple) -> tuple:
        """``loops`` plus a Loop for each comprehension in ``comps`` (outermost first) that has events."""
        here = loops
        for comp in comps:
            if id(comp) not in made:
                if not any(comp in inside.get(id(c), ()) and self.classify(c) for c in calls_in_order(comp)):
                    made[id(comp)] = here
                else:
                    loop = Loop(comp, here[-1] if here else None, len(here) + 1)
                    self.fm.loops.append(loop)
                    names = [dotted(n) for g in comp.generators for n in walk(g.target) if isinstance(n, ast.Name)]
                    self.assign(names, None, comp, here + (loop,), ctx=ctx)
                    made[id(comp)] = here + (loop,)
            here = made[id(comp)]
        return here

    def emit(self, kind: str, node: ast.AST, recv: str | None, guards: tuple, loops: tuple, ctx: tuple,
             extra: dict | None = None) -> None:
        self.order += 1
        ev = Event(kind, node, recv, guards, loops, ctx, self.order, self.fm, extra or {})
        self.fm.events.append(ev)
        for lp in loops:
            lp.events.append(ev)

    def context_kind(self, expr: ast.AST) -> str | None:
        if isinstance(expr, ast.IfExp):  # ``no_grad() if not needs_grad else nullcontext()``: a deliberate choice
            return "nograd" if "nograd" in (self.context_kind(expr.body), self.context_kind(expr.orelse)) else None
        if isinstance(expr, ast.Name) and (chosen := self.chosen_context(expr.id)):
            return "nograd" if all(self.context_kind(v) == "nograd" for v in chosen) else None
        if not isinstance(expr, ast.Call):
            return "nograd" if self.fm.file.imports.qualname(expr).split(".")[-1] in _GRAD_OFF else None
        name = call_name(expr)
        first = expr.args[0] if expr.args else None
        if name in _GRAD_OFF:
            return "nograd" if const_value(first) is not False else None
        if name == "set_grad_enabled":  # ``set_grad_enabled(model.training)``: gradients chosen by a condition
            return "nograd" if const_value(first) is False else ("grad" if const_value(first) is not True else None)
        if name == "autocast":
            off = [k for k in expr.keywords if k.arg == "enabled" and const_value(k.value) is False]
            return None if off else "autocast"
        if name == "no_sync":
            return "no_sync"
        if name == "accumulate":
            return "accumulate"
        return None

    def chosen_context(self, name: str) -> list[ast.IfExp]:
        """The values of ``name`` when every assignment of it in the function is a conditional choice
        (``ctx = torch.no_grad() if not needs_grad else nullcontext()``, then ``with ctx:``); else []."""
        values = [n.value for n in self.fm.nodes if isinstance(n, ast.Assign)
                  and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)]
        chosen = [v for v in values if isinstance(v, ast.IfExp)]
        return chosen if values and len(chosen) == len(values) else []

    def classify(self, call: ast.Call) -> list[tuple[str, str | None, dict]]:
        return classify(self.fm, call)


_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _comprehension_of(node: ast.AST) -> dict[int, tuple]:
    """id(call) -> the comprehensions (outermost first) whose iterations run the call; the iterable of
    a comprehension's first ``for`` is evaluated outside it."""
    out: dict[int, tuple] = {}
    todo: list[tuple[ast.AST, tuple]] = [(node, ())]
    while todo:
        n, comps = todo.pop()
        if isinstance(n, ast.Call):
            out[id(n)] = comps
        if isinstance(n, _COMPREHENSIONS):
            first = n.generators[0].iter
            todo.append((first, comps))
            todo.extend((c, comps + (n,)) for c in child_nodes(n) if c is not n.generators[0])
            todo.extend((c, comps + (n,)) for c in child_nodes(n.generators[0]) if c is not first)
        elif not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            todo.extend((c, comps) for c in child_nodes(n))
    return out


def _defaults(node: ast.AST) -> Iterator[tuple[ast.arg, ast.AST]]:
    """(argument, default) for the defaults of a function that are not constants (``criterion=nn.CrossEntropyLoss()``),
    keyword-only ones included: they are assigned before the body runs."""
    args = getattr(node, "args", None)
    if not isinstance(args, ast.arguments):
        return
    positional = args.posonlyargs + args.args
    pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults)) + \
        [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
    for arg, default in pairs:
        if not isinstance(default, ast.Constant):
            yield arg, default


def _target_names(t: ast.AST) -> Iterator[ast.AST]:
    if isinstance(t, (ast.Tuple, ast.List)):
        for e in t.elts:
            yield from _target_names(e)
    elif isinstance(t, ast.Starred):
        yield from _target_names(t.value)
    else:
        yield t
