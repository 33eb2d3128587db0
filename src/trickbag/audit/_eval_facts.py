"""Facts about evaluation that several rules read (which forwards are an evaluation, the mode before a
forward, tests and shape checks, which models a file trains): helpers that name no rule."""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Iterator, Sequence
from typing import cast

from trickbag.audit import _roles as R
from trickbag.audit._ast import call_name, const_value, dotted, name_tokens, walk
from trickbag.audit._flow import (
    BACKWARD,
    CALL,
    EVAL,
    FORWARD,
    STEP,
    TRAIN,
    Event,
    FileModel,
    FunctionModel,
    Loop,
)
from trickbag.audit._project import imported_definition
from trickbag.audit._query import (
    VALISH,
    feeds_backward,
    has_kind,
    is_data_loop,
    is_eval_function,
    is_valish,
    mode_events,
    same_model,
    short_name,
    stepish,
)

__all__: list[str] = []



def mode_before(fm: FunctionModel, fwd: Event) -> str | None:
    """The train/eval switch last run (in this function) before ``fwd``: 'eval', 'train' or None."""
    events = [e for e in fm.events if e.order < fwd.order and not e.exclusive(fwd)]
    modes = [(e, kind) for e, kind in mode_events(fm, events) if same_model(e, fwd)]
    inner = _wrapped_model(fm.file, fwd.recv) if not modes and fwd.recv else None
    if inner:
        modes = [(e, kind) for e, kind in mode_events(fm, events) if (e.recv or "") == inner]
    aliases = _parameters_bound_to(fm, fwd.recv) if not modes and fwd.recv else set()
    if aliases:  # ``def val(net): net.eval(); ... crnn(x)`` called as ``val(crnn)``: the same module
        modes = [(e, kind) for e, kind in mode_events(fm, events) if (e.recv or "") in aliases]
    if modes:
        return modes[-1][1]
    if fwd.recv and _built_in_eval(fm, fwd):
        return EVAL
    return EVAL if fwd.recv and _keeps_itself_in_eval(fm.file, fwd.recv) else None


def _parameters_bound_to(fm: FunctionModel, name: str) -> set[str]:
    """The parameters of ``fm`` that every call of it in the file binds to ``name`` (a global the body also uses
    by its own name)."""
    if not isinstance(fm.node, (ast.FunctionDef, ast.AsyncFunctionDef)) or "." in name:
        return set()
    sites = [s.node for s in fm.call_sites() if isinstance(s.node, ast.Call)]
    bound: dict[str, set[str | None]] = {}
    for call in sites:
        for p, a in bound_args(fm, call):
            bound.setdefault(p, set()).add(dotted(a))
    return {p for p, names in bound.items() if names == {name} and sites}


_WRAPPERS = ("DataParallel", "DistributedDataParallel", "cuda", "to", "cpu")


def _wrapped_model(file: FileModel, name: str) -> str | None:
    """The model that a plain name of the file wraps: every assignment of ``name`` in the file is that model, moved
    (``model.cuda()``, ``model.to(device)``) or wrapped (``nn.DataParallel(model, dim=1)``): switching the model
    switches the wrapper, whose replicas copy its mode (darts' ``parallel_model``)."""
    table = file.memo("wrapped_model", dict)
    if name not in table:
        bases = {_unwrap(n.value) for n in file.nodes if isinstance(n, ast.Assign)
                 and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)} if "." not in name else set()
        table[name] = bases.pop() if len(bases) == 1 and None not in bases else None
        if table[name] == name:
            table[name] = None
    return table[name]


def _unwrap(value: ast.AST | None) -> str | None:
    while isinstance(value, ast.Call):
        if call_name(value) not in _WRAPPERS:
            return None
        value = value.func.value if isinstance(value.func, ast.Attribute) and call_name(value) != "DataParallel" \
            and call_name(value) != "DistributedDataParallel" else (value.args[0] if value.args else None)
    return value.id if isinstance(value, ast.Name) else None


def _built_in_eval(fm: FunctionModel, fwd: Event) -> bool:
    """The model was assigned, before the forward, from a method chain that ends in eval mode:
    ``inception = InceptionV3().eval().to(device)`` (the chain's root is no name, so the switch has no receiver
    of its own)."""
    name = fwd.recv
    last = max((a for a in fm.assigns if a.order < fwd.order and name in a.names), key=lambda a: a.order, default=None)
    if last is None or last.names != [name] or last.op is not None:
        return False
    node = last.value
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr == "eval":  # the outermost switch is the last one run
            return not node.args and not node.keywords
        if node.func.attr == "train":
            return bool(node.args) and const_value(node.args[0]) is False
        node = node.func.value
    return False


def _keeps_itself_in_eval(file: FileModel, name: str) -> bool:
    """``name`` holds an instance of a class (of this file, or imported from a module of the same project) that
    switches what it holds to eval mode and never back to train (an EMA wrapper built as
    ``self.net_ema = copy.deepcopy(net).eval()``)."""
    classes = _wrapper_classes(file, name)
    return bool(classes) and all(_evaluating_class(c) for c in classes)


def runs_without_grad(file: FileModel, name: str) -> bool:
    """``name`` holds an instance of a class (of this file, or imported from the project) whose ``forward`` runs
    with gradients off: decorated with ``no_grad`` / ``inference_mode``, or its whole body under such a block."""
    classes = _wrapper_classes(file, name)
    return bool(classes) and all(_forward_without_grad(c) for c in classes)


def _wrapper_classes(file: FileModel, name: str) -> list[ast.ClassDef]:
    table = file.memo("instance_classes", lambda: _instance_classes(file))
    return table.get(name, [])


def _instance_classes(file: FileModel) -> dict[str, list[ast.ClassDef]]:
    """dotted name -> the classes whose instances are assigned to it (``net_ema = NetworkEMA(net)``): classes of
    this file, and capitalised names imported from the project's own modules."""
    out: dict[str, list[ast.ClassDef]] = {}
    for n in file.nodes:
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call):
            name = (dotted(n.value.func) or "").split(".")[-1]
            cls: ast.AST | None = file.classes.get(name)
            if cls is None and isinstance(n.value.func, ast.Name) and name[:1].isupper():
                cls = imported_definition(file.tree, file.path, name)
            if isinstance(cls, ast.ClassDef):
                for t in n.targets:
                    if target := dotted(t):
                        out.setdefault(target, []).append(cls)
    return out


def _evaluating_class(cls: ast.ClassDef) -> bool:
    calls = [n for n in walk(cls) if isinstance(n, ast.Call)]
    return any(call_name(n) == "eval" and not n.args and not n.keywords for n in calls) \
        and not any(call_name(n) == "train" for n in calls)


_GRAD_OFF = {"no_grad", "inference_mode"}


def _forward_without_grad(cls: ast.ClassDef) -> bool:
    forward = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name in ("forward", "__call__")), None)
    if forward is None:
        return False
    if any(call_name(d) in _GRAD_OFF if isinstance(d, ast.Call) else (dotted(d) or "").split(".")[-1] in _GRAD_OFF
           for d in forward.decorator_list):
        return True
    body = [st for st in forward.body if not (isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant))]
    guarded = [st for st in body if isinstance(st, ast.With) and any(
        isinstance(i.context_expr, ast.Call) and call_name(i.context_expr) in _GRAD_OFF for i in st.items)]
    rest = [st for st in body if st not in guarded]
    return bool(guarded) and all(isinstance(st, ast.Return) and not any(isinstance(x, ast.Call) for x in walk(st))
                                 for st in rest)


def _forwards(fm: FunctionModel) -> list[Event]:
    """The forwards of ``fm``: its own, and a call of a method of its class that runs the class's model, trains
    nothing, switches no mode and is shared with the training step (``output, loss = self._forward_pass(x, y)``),
    seen as that model's forward at the call."""
    table = fm.file.memo("forwards", dict)
    if id(fm) not in table:
        out = []
        for e in fm.events:
            if e.kind == FORWARD:
                if not _plain_object(fm, e.recv):
                    out.append(e)
            elif e.kind == CALL and dotted(getattr(e.node, "func", None) or e.node) is not None \
                    and (dotted(cast(ast.Call, e.node).func) or "").startswith("self.") \
                    and not e.kinds() & {BACKWARD, STEP}:
                helper = e.extra["helper"]
                inner = [x for x in helper.events if x.kind == FORWARD and (x.recv or "").startswith("self.")]
                shared = any(site.fm.kind_events(BACKWARD) for site in helper.call_sites())  # training uses it too
                if inner and shared and not any(x.kind in (EVAL, TRAIN) for x in helper.events):
                    out.append(dataclasses.replace(e, kind=FORWARD, recv=inner[0].recv))
        table[id(fm)] = out
    return table[id(fm)]


def _plain_object(fm: FunctionModel, recv: str | None) -> bool:
    """``recv`` holds an instance, made in this function, of a class of this file that is no module (``class
    MscEval(object)`` with a ``__call__``: an evaluator called with the network, not a network)."""
    if not recv:
        return False
    made = [a.value for a in fm.assigns if a.names == [recv] and a.op is None and isinstance(a.value, ast.Call)]
    classes = [fm.file.classes.get((dotted(v.func) or "").split(".")[-1]) for v in made]
    return bool(classes) and all(c is not None and all(dotted(b) in ("object", None) for b in c.bases)
                                 and not c.keywords for c in classes)


def eval_forwards(fm: FunctionModel) -> Iterator[tuple[Event, str]]:
    """(first forward, why) of each evaluation scope of ``fm``: an evaluation function, a loop over a
    validation set, a loop without backward after ``model.eval()``."""
    fwds = _forwards(fm)
    if is_eval_function(fm) and fwds:
        yield min(fwds, key=lambda e: e.order), "function"
        return
    if any(feeds_backward(site) for site in fm.call_sites()):
        return  # its result is back-propagated by a caller (MAML's get_outer_loss): part of the training step
    for loop in fm.loops:
        if loop.parent is not None and _is_eval_loop(fm, loop.parent):
            continue
        if _is_eval_loop(fm, loop):
            mine = [e for e in _forwards(fm) if loop in e.loops]
            if mine:
                yield min(mine, key=lambda e: e.order), "loop"
    yield from ((f, "loop") for f in _full_batch_validation(fm))


def unconditional_forward(fm: FunctionModel, fwd: Event, scope: str) -> Event:
    """The first forward of the evaluation scope of ``fwd`` that runs on every pass (not under an ``if`` of the
    scope: ``if encoder is not None: imgs = encoder(imgs)`` comes before the decoder that always runs), else ``fwd``."""
    loop = fwd.loops[-1] if scope == "loop" and fwd.loops else None
    same = [e for e in _forwards(fm) if e.order >= fwd.order and (loop is None or loop in e.loops)
            and not e.rel_guards(loop) and e.grad_disabled == fwd.grad_disabled]
    return fwd if not fwd.rel_guards(loop) or not same else min(same, key=lambda e: e.order)


def _full_batch_validation(fm: FunctionModel) -> Iterator[Event]:
    """``model(X_valid)`` under ``no_grad`` / ``inference_mode`` right in an epoch loop that trains the same model
    (one full-batch validation forward, no loop over a validation loader), compared to labels named alike."""
    for fwd in fm.kind_events(FORWARD):
        loop = fwd.loops[-1] if fwd.loops else None
        if loop is None or not fwd.grad_disabled or not fwd.recv or not has_kind(loop, BACKWARD):
            continue
        trains = any(e.kind == FORWARD and e is not fwd and not e.grad_disabled and e.recv == fwd.recv
                     for e in loop.events)
        call = fwd.node
        if not (trains and isinstance(call, ast.Call)):
            continue
        args: list[ast.AST] = [*call.args, *(k.value for k in call.keywords)]
        if (_valish(args) and _valish_sibling(fm, call)) or _drawn_from_valish_loader(fm, args, fwd.order):
            yield fwd


_VALISH_PREFIX = re.compile(r"^(val|valid|test|eval|dev|holdout)")


def _valish_loader(nodes: Sequence[ast.AST]) -> bool:
    """``val_loader``, ``testdataloader``, ``self.valid_iter``: a name of the held-out data."""
    return any(_VALISH_PREFIX.match(t) for a in nodes for n in walk(a) if isinstance(n, (ast.Name, ast.Attribute))
               for t in name_tokens((dotted(n) or "").split(".")[-1]))


def _drawn_from_valish_loader(fm: FunctionModel, args: list[ast.AST], before: int, depth: int = 0) -> bool:
    """The inputs come from a batch drawn with ``next(...)`` from a validation or test loader in the loop
    (``j, data = next(enumerate(testdataloader, 0)); points, target = data``), three assignments deep."""
    if depth > 3:
        return False
    for name in {d for a in args for n in walk(a) if isinstance(n, (ast.Name, ast.Attribute)) and (d := dotted(n))}:
        for a in fm.last_assignments(name, before):
            if a.value is None:
                continue
            drawn = [n for n in walk(a.value) if isinstance(n, ast.Call) and call_name(n) == "next"]
            if any(_valish_loader(n.args) for n in drawn):
                return True
            if _drawn_from_valish_loader(fm, [a.value], a.order, depth + 1):
                return True
    return False


def _valish(nodes: list[ast.AST]) -> bool:
    words = {t for a in nodes for n in walk(a) if isinstance(n, (ast.Name, ast.Attribute))
             for t in name_tokens(dotted(n) or "")}
    return bool(words & VALISH)


def _valish_sibling(fm: FunctionModel, call: ast.AST) -> bool:
    """The call sits in a bigger call or comparison next to validation labels: ``loss_fn(model(X_val), y_val)``."""
    table = fm.file.memo("enclosing_calls", dict)
    if id(fm) not in table:
        table[id(fm)] = _enclosing_calls(fm)
    return any(_valish([a for a in inner if a is not owner]) for inner, owner in table[id(fm)].get(id(call), []))


def _enclosing_calls(fm: FunctionModel) -> dict[int, list[tuple[list[ast.AST], ast.AST]]]:
    """``id(node) ->`` the (operands, operand holding the node) of every call or comparison of ``fm`` around it."""
    parents: dict[int, list[tuple[list[ast.AST], ast.AST]]] = {}
    for parent in (n for n in fm.nodes if isinstance(n, (ast.Call, ast.Compare))):
        inner: list[ast.AST] = \
            [*parent.args, *([parent.func.value] if isinstance(parent.func, ast.Attribute) else [])] \
            if isinstance(parent, ast.Call) else [parent.left, *parent.comparators]  # ``p.eq(y_val)`` too
        seen: set[int] = set()
        for owner in inner:
            for n in walk(owner):
                if id(n) not in seen:
                    seen.add(id(n))
                    parents.setdefault(id(n), []).append((inner, owner))
    return parents


#: words of a call that crafts adversarial examples (an attack differentiates the model with respect to its input)
_ATTACK_WORDS = {"adv", "adversary", "adversarial", "attack", "attacker", "perturb", "pgd", "fgsm", "fgm", "deepfool",
                 "carlini"}


def differentiates(fm: FunctionModel, loop: Loop) -> bool:
    """The loop calls ``torch.autograd.grad``, itself or through a function defined in ``fm`` or in the file or a
    method of the class (``self.cac_jacobian(preds)`` calling ``self.cac_grad``, transitively: a Hessian-vector
    product or a Jacobian of its forward's outputs), or crafts adversarial examples (a call named like an attack:
    ``adversary.generate(x, y)``, ``pgd_attack(model, x)``): its forward needs the graph."""
    def grads(node: ast.AST) -> bool:  # ``torch.autograd.grad(...)``, or ``grad(...)`` imported from torch.autograd
        return any(isinstance(n, ast.Call) and call_name(n) == "grad" and "autograd" in (
            dotted(n.func) or "" if isinstance(n.func, ast.Attribute) else fm.file.imports.qualname(n.func))
            for n in walk(node))
    if any(isinstance(n, ast.Call) and set(name_tokens(dotted(n.func) or call_name(n))) & _ATTACK_WORDS
           for n in walk(loop.node)):
        return True  # ``x_adv = adversary.generate(x, y)``: an adversarial evaluation differentiates the model
    local = {n.name: n for n in fm.nodes if isinstance(n, ast.FunctionDef)}
    methods = {n.name: n for n in (fm.cls.body if fm.cls is not None else []) if isinstance(n, ast.FunctionDef)}
    todo: list[ast.AST] = [loop.node]
    seen: set[int] = set()
    while todo:  # the loop, and the functions it calls (a method of the class through ``self.``), transitively
        node = todo.pop()
        if grads(_without_flagged_branches(node) if node is loop.node else node):
            return True
        for n in walk(node):
            if not isinstance(n, ast.Call):
                continue
            if isinstance(n.func, ast.Name):
                x = n.func.id
                target = local.get(x) or (fm.file.top[x].node if x in fm.file.top else None)
            elif isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) \
                    and n.func.value.id == "self":
                target = methods.get(n.func.attr)
            else:
                target = None
            if target is not None and id(target) not in seen and len(seen) < 20:
                seen.add(id(target))
                todo.append(target)
    return False


def _without_flagged_branches(node: ast.AST) -> ast.AST:
    """``node`` with the bodies of its ``if <flag>:`` statements left out (``if energy_and_force: grad(...)``: the
    gradient is taken only when an option asks for it; on the default path the graph is built for nothing)."""
    def flag(test: ast.AST) -> bool:
        inner = test.operand if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) else test
        return isinstance(inner, (ast.Name, ast.Attribute))

    kept = ast.Module(body=[], type_ignores=[])
    todo = [node]
    while todo:
        n = todo.pop()
        if isinstance(n, ast.If) and flag(n.test):
            continue
        if isinstance(n, ast.Call):
            kept.body.append(ast.Expr(n))
        todo.extend(ast.iter_child_nodes(n))
    return kept


def _is_eval_loop(fm: FunctionModel, loop: Loop) -> bool:
    if has_kind(loop, BACKWARD) or any(stepish(e) for e in loop.events):
        return False
    fwds = [e for e in _forwards(fm) if loop in e.loops]
    if not fwds or differentiates(fm, loop):
        return False
    first_fwd = min(fwds, key=lambda e: e.order)
    return is_valish(loop) or (mode_before(fm, first_fwd) == EVAL and not _kept_in_eval(fm, loop, first_fwd)) or \
        (is_data_loop(loop) and first_fwd.grad_disabled and not fm.kind_events(BACKWARD))


def _kept_in_eval(fm: FunctionModel, loop: Loop, fwd: Event) -> bool:
    """The loop runs inside a loop that back-propagates, and the module was put in eval mode before that training
    loop began (a frozen module kept in eval through training, run in a per-sample helper loop of each iteration),
    not by an evaluation block inside the training iteration (``if it % 100 == 0: model.eval(); for p in probes:
    ...``)."""
    trainer = loop.parent
    while trainer is not None and not has_kind(trainer, BACKWARD):
        trainer = trainer.parent
    if trainer is None:
        return False
    events = [e for e in fm.events if e.order < fwd.order and not e.exclusive(fwd)]
    switches = [e for e, kind in mode_events(fm, events) if same_model(e, fwd)]
    return bool(switches) and trainer not in switches[-1].loops


_RANDOM = {"randn", "rand", "randint", "zeros", "ones", "empty", "full", "randn_like", "rand_like", "zeros_like",
           "ones_like", "arange", "randperm", "normal", "Tensor", "tensor"}
#: a method that moves or copies a tensor: its result holds the same values
_MOVES = ("to", "cuda", "float", "half", "cpu", "clone", "detach")
_LOADS = re.compile(r"load|restore|from_pretrained|resume|checkpoint|ckpt")


def test_code(fm: FunctionModel) -> bool:
    """A test: in a test module, a ``test_*`` function, or a method of a ``Test*`` / ``TestCase`` class."""
    if fm.file.test_file or fm.name.startswith("test_"):
        return True
    cls = fm.cls
    return cls is not None and (cls.name.startswith("Test") or any(
        (dotted(b) or "").split(".")[-1] == "TestCase" for b in cls.bases))


def _random_input(fm: FunctionModel, node: ast.AST, depth: int = 0) -> bool:
    """``torch.randn(2, 3, 32, 32)`` (or a name assigned one in this function, moved with ``.to(dev)``, or a copy
    of one: ``copy.deepcopy(chunk)``, ``chunk.clone()``, as an export script's torch-vs-ONNX check copies its
    random example inputs before running the model on them)."""
    while isinstance(node, ast.Call):
        fn = call_name(node)
        if fn in _MOVES and isinstance(node.func, ast.Attribute):
            node = node.func.value
        elif fn == "deepcopy" and len(node.args) == 1 and not node.keywords:
            node = node.args[0]
        else:
            break
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Div, ast.Add, ast.Sub)):
        consts = [s for s in (node.left, node.right) if isinstance(s, ast.Constant)]
        if len(consts) == 1:  # ``torch.ones(1, 3, h, w) * 255.``: still made up
            return _random_input(fm, node.right if consts[0] is node.left else node.left, depth)
    if isinstance(node, ast.Call):
        return call_name(node) in _RANDOM or _literal_input(node) or (
            len(node.args) == 1 and _random_input(fm, node.args[0], depth + 1))  # ``cuda_variable(randn(...))``
    name = dotted(node)
    if not name or depth > 3:
        return False
    values = [a.value for a in fm.assigns if a.names == [name] and a.op is None]
    values += [a.value.elts[a.names.index(name)] for a in fm.assigns  # chunk, mask = copy(c), copy(m)
               if name in a.names and len(a.names) > 1 and a.op is None
               and isinstance(a.value, ast.Tuple) and len(a.value.elts) == len(a.names)]
    return bool(values) and all(v is not None and _random_input(fm, v, depth + 1) for v in values)


def _literal_input(call: ast.Call) -> bool:
    """``torch.LongTensor([1, 2, 3])``, ``str2tensor('hello')``: an input written out in the code, not data."""
    args = [*call.args, *(k.value for k in call.keywords)]
    return bool(args) and all(isinstance(x, ast.Constant) or (isinstance(x, (ast.List, ast.Tuple)) and all(
        isinstance(e, ast.Constant) for e in x.elts)) for x in args) and any(
        not isinstance(x, ast.Constant) or isinstance(x.value, str) for x in args)


def _literal_data(fm: FunctionModel, node: ast.AST) -> bool:
    """The data argument is an input written out in the code, directly or through one local name."""
    if isinstance(node, ast.Call):
        return _literal_input(node) or (len(node.args) == 1 and isinstance(node.args[0], ast.Call)
                                        and _literal_input(node.args[0]))
    name = dotted(node)
    values = [a.value for a in fm.assigns if a.names == [name] and a.op is None] if name else []
    return bool(values) and all(isinstance(v, ast.Call) and _literal_data(fm, v) for v in values)


def smoke_check(fm: FunctionModel, fwd: Event) -> bool:
    """A shape check, not an evaluation: the forward runs on random inputs, or runs a model built right here
    from its class and never loaded (``net = ResNet18(); y = net(torch.randn(1, 3, 32, 32))``)."""
    call = fwd.node
    args = [*call.args, *(k.value for k in call.keywords)] if isinstance(call, ast.Call) else []
    first = call.args[0] if isinstance(call, ast.Call) and call.args else None
    if args and (all(_random_input(fm, a) for a in args) or (first is not None and _literal_data(fm, first))):
        return True  # random inputs, or the data written out (``encoder(str2tensor('hello'), hidden)``)
    built = [v for a in fm.assigns if a.names == [fwd.recv] and a.op is None and isinstance(v := a.value, ast.Call)]
    fresh = bool(built) and all(
        R.role_by_constructor(v, fm.file.imports, fm.file.class_names) == R.MODEL
        and not _LOADS.search(call_name(R.innermost_call(v) or v)) for v in built)
    loaded = any(isinstance(n, ast.Call) and _LOADS.search(call_name(n)) for n in fm.nodes)
    trained = bool(fm.kind_events(BACKWARD)) or short_name(fwd.recv or "") in trained_models_of(fm.file)
    return fresh and not loaded and not trained


def file_trains(file: FileModel) -> bool:
    """The file has a training step of its own (a backward): a trainer, whose evaluation we see whole."""
    return any(f.kind_events(BACKWARD) for f in file.functions)


def trained_models_of(file: FileModel) -> set[str]:
    """Short names of the models whose parameters go to an optimizer in this file (empty: unknown)."""
    return file.memo("trained_models", lambda: _find_trained_models(file))


def _find_trained_models(file: FileModel) -> set[str]:
    out = set()
    for node in file.nodes:
        if isinstance(node, ast.Call) and R.role_by_constructor(node, file.imports, file.class_names) == R.OPTIMIZER:
            for n in walk(node):
                if isinstance(n, ast.Call) and call_name(n) in ("parameters", "named_parameters") \
                        and isinstance(n.func, ast.Attribute) and (name := dotted(n.func.value)):
                    out.add(short_name(name))
    return out


def bound_args(helper: FunctionModel, call: ast.Call) -> Iterator[tuple[str, ast.AST]]:
    """(parameter, argument) pairs of a call of a local function or method."""
    args = cast(ast.FunctionDef, helper.node).args  # a local function or method
    params = [a.arg for a in args.posonlyargs + args.args]
    if helper.cls is not None and isinstance(call.func, ast.Attribute) and params:
        params = params[1:]  # self
    for param, arg in zip(params, call.args):
        if isinstance(arg, ast.Starred):
            return
        yield param, arg
    names = set(params) | {a.arg for a in args.kwonlyargs}
    for k in call.keywords:
        if k.arg is not None and k.arg in names:
            yield k.arg, k.value
