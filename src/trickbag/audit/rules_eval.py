"""Lint rules on evaluation: ``model.eval()`` set and undone, evaluation forwards without gradients,
losses kept with their graph (codes TB2xx)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from trickbag.audit import _roles as R
from trickbag.audit._ast import call_name, const_value, dotted, name_tokens, walk_no_defs
from trickbag.audit._flow import (
    BACKWARD,
    CALL,
    EVAL,
    FORWARD,
    STEP,
    TRAIN,
    TRAIN_CALL,
    Event,
    FileModel,
    FunctionModel,
    Loop,
)
from trickbag.audit._query import (
    _VALISH,
    has_kind,
    is_data_loop,
    is_eval_function,
    is_valish,
    loss_names,
    mode_events,
    same_model,
    short_name,
    stepish,
    train_loop,
)
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []


def _mode_before(fm: FunctionModel, fwd: Event) -> str | None:
    """The train/eval switch last run (in this function) before ``fwd``: 'eval', 'train' or None."""
    events = [e for e in fm.events if e.order < fwd.order and not e.exclusive(fwd)]
    modes = [(e, kind) for e, kind in mode_events(fm, events) if same_model(e, fwd)]
    return modes[-1][1] if modes else None


EVAL_CONTEXT, TRAIN_CONTEXT, UNKNOWN_CONTEXT = "eval", "train", "unknown"


def _caller_mode(fm: FunctionModel, depth: int = 0, model: str | None = None) -> str:
    """The mode the callers leave the model in when they run ``fm``: 'eval' when every call site (followed up
    through its own callers, three levels) switched to eval before the call, 'train' when one left it
    training, 'unknown' when the callers are not in this file.  ``model`` is the parameter of ``fm`` holding
    the model: only the switches of what the caller passes there count.  A nested function that is not
    called by name (a callback) runs in its enclosing function's context."""
    sites = fm.call_sites()
    if not sites and fm.parent is not None and depth < 3:
        if any(kind == EVAL for _, kind in mode_events(fm.parent, fm.parent.events)):
            return EVAL_CONTEXT
        return _caller_mode(fm.parent, depth + 1, model)
    if not sites:
        return UNKNOWN_CONTEXT
    verdicts = set()
    for s in sites:
        modes = mode_events(s.fm, [e for e in s.fm.events if e.order < s.order and not e.exclusive(s)])
        arg = next((dotted(a) for p, a in _bound_args(fm, s.node) if p == model), None) \
            if model and isinstance(s.node, ast.Call) and isinstance(fm.node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
            else None
        if arg:
            modes = [(e, k) for e, k in modes if short_name(arg) in _switches(e)]  # not a probe trained beside
        if modes:
            verdicts.add(EVAL_CONTEXT if modes[-1][1] == EVAL else TRAIN_CONTEXT)
        else:
            verdicts.add(_caller_mode(s.fm, depth + 1, arg) if depth < 3 else UNKNOWN_CONTEXT)
    if verdicts == {EVAL_CONTEXT}:
        return EVAL_CONTEXT
    return TRAIN_CONTEXT if TRAIN_CONTEXT in verdicts else UNKNOWN_CONTEXT


def _switches(e: Event) -> set[str]:
    """Short names of the models a mode switch acts on (a helper's: the ones its body switches)."""
    if e.kind == CALL:
        return {short_name(r) for r in e.fm.file.summary(e.extra["helper"]).mode_recvs if r}
    if e.kind == TRAIN_CALL and isinstance(e.node, ast.Call):  # ``train_one_epoch(model, ...)``: what it is given
        return {short_name(d) for a in [*e.node.args, *(k.value for k in e.node.keywords)] if (d := dotted(a))}
    return {short_name(e.recv)} if e.recv else set()


def _callers_disable_grad(fm: FunctionModel, depth: int = 0) -> bool | None:
    """True when every call of ``fm`` runs without gradients (followed up through the callers, and for a
    nested function not called by name, its enclosing function's context); None when the callers are not
    in this file."""
    sites = fm.call_sites()
    if not sites and fm.parent is not None and depth < 3:
        if fm.parent.grad_disabled or _grad_off_statement(fm.parent) or _defined_without_grad(fm):
            return True
        return _callers_disable_grad(fm.parent, depth + 1)
    if not sites:
        return None
    verdicts = []
    for s in sites:
        if s.grad_disabled or _grad_off_statement(s.fm):
            verdicts.append(True)
        else:
            verdicts.append(_callers_disable_grad(s.fm, depth + 1) if depth < 3 else None)
    return False if False in verdicts else (None if None in verdicts else True)


def _defined_without_grad(fm: FunctionModel) -> bool:
    """A nested ``def`` written inside a ``with torch.no_grad():`` block of its enclosing function."""
    parent = fm.parent
    if parent is None:
        return False
    for n in parent.nodes:
        if isinstance(n, (ast.With, ast.AsyncWith)) and any(fm.node in ast.walk(st) for st in n.body):
            return any(isinstance(i.context_expr, ast.Call)
                       and call_name(i.context_expr) in ("no_grad", "inference_mode") for i in n.items)
    return False


def _grad_off_statement(fm: FunctionModel) -> bool:
    """``torch.set_grad_enabled(False)`` as a statement of the function."""
    return any(isinstance(n, ast.Call) and call_name(n) == "set_grad_enabled" and n.args
               and const_value(n.args[0]) is False for n in fm.nodes)


def _eval_forwards(fm: FunctionModel) -> Iterator[tuple[Event, str]]:
    """(first forward, why) of each evaluation scope of ``fm``: an evaluation function, a loop over a
    validation set, a loop without backward after ``model.eval()``."""
    fwds = fm.kind_events(FORWARD)
    if is_eval_function(fm) and fwds:
        yield min(fwds, key=lambda e: e.order), "function"
        return
    for loop in fm.loops:
        if loop.parent is not None and _is_eval_loop(fm, loop.parent):
            continue
        if _is_eval_loop(fm, loop):
            mine = [e for e in loop.events if e.kind == FORWARD]
            if mine:
                yield min(mine, key=lambda e: e.order), "loop"
    yield from ((f, "loop") for f in _full_batch_validation(fm))


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
        if trains and isinstance(call, ast.Call) and _valish([*call.args, *(k.value for k in call.keywords)]) \
                and _valish_sibling(fm, call):
            yield fwd


def _valish(nodes: list[ast.AST]) -> bool:
    words = {t for a in nodes for n in ast.walk(a) if isinstance(n, (ast.Name, ast.Attribute))
             for t in name_tokens(dotted(n) or "")}
    return bool(words & _VALISH)


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
        inner = [*parent.args, *([parent.func.value] if isinstance(parent.func, ast.Attribute) else [])] \
            if isinstance(parent, ast.Call) else [parent.left, *parent.comparators]  # ``p.eq(y_val)`` too
        seen: set[int] = set()
        for owner in inner:
            for n in ast.walk(owner):
                if id(n) not in seen:
                    seen.add(id(n))
                    parents.setdefault(id(n), []).append((inner, owner))
    return parents


def _is_eval_loop(fm: FunctionModel, loop: Loop) -> bool:
    if has_kind(loop, BACKWARD) or any(stepish(e) for e in loop.events):
        return False
    fwds = [e for e in loop.events if e.kind == FORWARD]
    if not fwds:
        return False
    first_fwd = min(fwds, key=lambda e: e.order)
    return is_valish(loop) or _mode_before(fm, first_fwd) == EVAL or \
        (is_data_loop(loop) and first_fwd.grad_disabled and not fm.kind_events(BACKWARD))


@rule("TB201", "eval-without-eval-mode", fix="call model.eval() before evaluating (and model.train() after)")
def eval_without_eval_mode(file: FileModel) -> Iterator[Hit]:
    """An evaluation runs the model without ``model.eval()``.

    ``torch.no_grad()`` / ``inference_mode()`` only stop gradients; in train mode dropout still drops
    units and BatchNorm normalises with the batch statistics (and updates its running averages with
    the validation data).  The metrics are noisy and too low, and they depend on the batch size.

    A single full-batch validation forward in the epoch loop counts too, when it is plainly one: under
    ``no_grad`` / ``inference_mode``, on inputs named like validation data and next to labels named alike
    (``loss_fn(model(X_valid), y_valid)``, ``model(x_val).argmax(1) == y_val``).

    The mode is followed from the callers into the evaluation function (three levels up, and into nested
    functions from the function that defines them).  Not evaluations: tests (test modules, ``test_*``
    functions, ``TestCase`` methods), shape checks (a forward on random inputs, or of a model built right
    there from its class and never loaded or trained) and a model just made by ``from_pretrained`` (Hugging
    Face returns it in eval mode).  A function run only from another module, on a model passed in, is a
    low-confidence finding (``--all``) when nothing in the file calls ``eval()``: its caller may.

    Wrong::

        @torch.no_grad()
        def evaluate(model, loader):
            correct = 0
            for x, y in loader:
                correct += (model(x).argmax(1) == y).sum().item()
            return correct

        for epoch in range(epochs):
            train_one_epoch(model, train_loader, optimizer)
            print(evaluate(model, val_loader))

    Right::

        @torch.no_grad()
        def evaluate(model, loader):
            model.eval()
            correct = 0
            for x, y in loader:
                correct += (model(x).argmax(1) == y).sum().item()
            model.train()
            return correct

        for epoch in range(epochs):
            train_one_epoch(model, train_loader, optimizer)
            print(evaluate(model, val_loader))
    """
    for fm in file.functions:
        if _test_code(fm):
            continue
        for fwd, scope in _eval_forwards(fm):
            mode = _mode_before(fm, fwd)
            if mode == EVAL or (mode == TRAIN and scope == "function"):  # train() on purpose: update_bn & co.
                continue
            if _smoke_check(fm, fwd) or _pretrained_here(fm, fwd):
                continue
            made = _made_here(fm, fwd)
            sure = "low" if made == "elsewhere" else "high"
            if mode is None and not made:
                callers = _caller_mode(fm, model=(fwd.recv or "").split(".")[0])
                if callers == EVAL_CONTEXT:
                    continue
                if callers == UNKNOWN_CONTEXT:
                    if any(e.kind == EVAL for f in file.functions for e in f.events):
                        continue
                    # run from another module, which may call eval() first: unless this file trains the model
                    sure = "high" if _file_trains(file) else "low"
            yield Hit(fwd.node, f"evaluation forward of {fwd.recv} in train mode (dropout on, BatchNorm on "
                                f"batch statistics): call {fwd.recv.split('(')[0]}.eval() first", confidence=sure)


_RANDOM = {"randn", "rand", "randint", "zeros", "ones", "empty", "full", "randn_like", "rand_like", "zeros_like",
           "ones_like", "arange", "randperm", "normal", "Tensor", "tensor"}
_LOADS = re.compile(r"load|restore|from_pretrained|resume|checkpoint|ckpt")


def _test_code(fm: FunctionModel) -> bool:
    """A test: in a test module, a ``test_*`` function, or a method of a ``Test*`` / ``TestCase`` class."""
    if fm.file.test_file or fm.name.startswith("test_"):
        return True
    cls = fm.cls
    return cls is not None and (cls.name.startswith("Test") or any(
        (dotted(b) or "").split(".")[-1] == "TestCase" for b in cls.bases))


def _random_input(fm: FunctionModel, node: ast.AST, depth: int = 0) -> bool:
    """``torch.randn(2, 3, 32, 32)`` (or a name assigned one in this function, moved with ``.to(dev)``)."""
    while isinstance(node, ast.Call) and call_name(node) in ("to", "cuda", "float", "half", "cpu"):
        if not isinstance(node.func, ast.Attribute):
            break
        node = node.func.value
    if isinstance(node, ast.Call):
        return call_name(node) in _RANDOM
    name = dotted(node)
    if not name or depth > 3:
        return False
    values = [a.value for a in fm.assigns if a.names == [name] and a.op is None]
    return bool(values) and all(v is not None and _random_input(fm, v, depth + 1) for v in values)


def _smoke_check(fm: FunctionModel, fwd: Event) -> bool:
    """A shape check, not an evaluation: the forward runs on random inputs, or runs a model built right here
    from its class and never loaded (``net = ResNet18(); y = net(torch.randn(1, 3, 32, 32))``)."""
    call = fwd.node
    args = [*call.args, *(k.value for k in call.keywords)] if isinstance(call, ast.Call) else []
    if args and all(_random_input(fm, a) for a in args):
        return True
    built = [a for a in fm.assigns if a.names == [fwd.recv] and a.op is None and isinstance(a.value, ast.Call)]
    fresh = bool(built) and all(
        R.role_by_constructor(a.value, fm.file.imports, fm.file.class_names) == R.MODEL
        and not _LOADS.search(call_name(R.innermost_call(a.value) or a.value)) for a in built)
    loaded = any(isinstance(n, ast.Call) and _LOADS.search(call_name(n)) for n in fm.nodes)
    trained = bool(fm.kind_events(BACKWARD)) or short_name(fwd.recv or "") in _trained_models(fm.file)
    return fresh and not loaded and not trained


def _file_trains(file: FileModel) -> bool:
    """The file has a training step of its own (a backward): a trainer, whose evaluation we see whole."""
    return any(f.kind_events(BACKWARD) for f in file.functions)


def _made_here(fm: FunctionModel, fwd: Event) -> str:
    """How the model was made in this function (its callers cannot have switched it to eval): 'built' by a
    known model constructor (a class of this file, torch / torchvision / timm: in train mode), 'elsewhere' by a
    constructor of another module (which may load weights and switch to eval itself), '' when it was not
    made here."""
    base = (fwd.recv or "").split(".")[0]
    if not base or base in ("self", "cls"):
        return ""
    made = [a for a in fm.assigns if a.names == [fwd.recv] and a.op is None and a.value is not None
            and a.order < fwd.order]
    if not made:
        return ""
    call = R.innermost_call(made[-1].value) if isinstance(made[-1].value, ast.Call) else None
    qual = fm.file.imports.qualname(call.func) if call is not None else ""
    last = qual.split(".")[-1]
    known = last in fm.file.class_names or last == "from_config" \
        or qual.startswith(("torch.", "torchvision.", "timm.", "nn.")) \
        or last in ("Sequential", "Linear", "Conv2d", "LSTM", "GRU", "Transformer", "ModuleList")
    return "built" if known or call is None else "elsewhere"


def _pretrained_here(fm: FunctionModel, fwd: Event) -> bool:
    """A model made here by ``from_pretrained(...)`` (Hugging Face returns it in eval mode) and not switched back
    to train mode."""
    made = [a for a in fm.assigns if a.names == [fwd.recv] and a.op is None and a.order < fwd.order]
    if not made or not isinstance(made[-1].value, ast.Call):
        return False
    inner = R.innermost_call(made[-1].value) or made[-1].value
    return call_name(inner) == "from_pretrained" and call_name(made[-1].value) != "train"


_FROZEN_WORDS = {"teacher", "target", "ref", "reference", "frozen", "pretrained", "vae", "clip", "critic_target",
                 "old", "momentum", "key", "tgt"}


def _trained_models(file: FileModel) -> set[str]:
    """Short names of the models whose parameters go to an optimizer in this file (empty: unknown)."""
    return file.memo("trained_models", lambda: _find_trained_models(file))


def _find_trained_models(file: FileModel) -> set[str]:
    out = set()
    for node in file.nodes:
        if isinstance(node, ast.Call) and R.role_by_constructor(node, file.imports, file.class_names) == R.OPTIMIZER:
            for n in ast.walk(node):
                if isinstance(n, ast.Call) and call_name(n) in ("parameters", "named_parameters") \
                        and isinstance(n.func, ast.Attribute) and dotted(n.func.value):
                    out.add(short_name(dotted(n.func.value)))
    return out


def _frozen(file: FileModel, name: str) -> bool:
    """A model that is not trained: named like a teacher/target network or ``requires_grad_(False)``-ed."""
    if set(name_tokens(name.split(".")[-1])) & _FROZEN_WORDS:
        return True
    frozen = file.memo("frozen_models", lambda: {
        short_name(dotted(n.func.value) or "") for n in file.nodes
        if isinstance(n, ast.Call) and call_name(n) == "requires_grad_" and n.args
        and const_value(n.args[0]) is False and isinstance(n.func, ast.Attribute)})
    return short_name(name) in frozen


def _training_forwards(fm: FunctionModel) -> Iterator[Event]:
    trained = _trained_models(fm.file)
    for f in fm.kind_events(FORWARD):
        if f.grad_disabled or not f.loops or not has_kind(f.loops[-1], BACKWARD) or not f.recv \
                or not any(stepish(e) for lp in f.loops for e in lp.events):
            continue
        if (trained and short_name(f.recv) not in trained) or _frozen(fm.file, f.recv):
            continue
        yield f


def _culprit(fm: FunctionModel, fwd: Event) -> Event | None:
    """The ``eval()`` switch left in force at a training forward, if any."""
    for loop in reversed(fwd.loops):
        modes = [(e, k) for e, k in mode_events(fm, loop.events) if same_model(e, fwd)]
        if any(k == TRAIN for _, k in modes):
            return None
        evals = [e for e, k in modes if k == EVAL]
        if evals:
            return evals[0]
    outer = fwd.loops[0]
    before = [e for e in fm.events if e.order < fwd.order and outer not in e.loops]
    modes = [(e, k) for e, k in mode_events(fm, before) if same_model(e, fwd)]
    if modes and modes[-1][1] == EVAL and all(fwd.under(g) for g in modes[-1][0].guards):
        return modes[-1][0]
    return None


@rule("TB202", "train-in-eval-mode", fix="call model.train() at the start of every training epoch")
def train_in_eval_mode(file: FileModel) -> Iterator[Hit]:
    """The model is switched to eval mode and training continues without ``model.train()``.

    After the first evaluation (``model.eval()``) every later epoch trains with dropout off and
    BatchNorm frozen on its running statistics — quietly worse results.  Switch back with
    ``model.train()`` at the top of each epoch (or at the end of the evaluation).

    ``model.train(was_training)`` / ``model.train(mode=prev)`` restores a saved mode and counts as switching
    back; only ``model.train(False)`` is a switch to eval.

    Wrong::

        for epoch in range(epochs):
            for x, y in train_loader:
                optimizer.zero_grad()
                loss_fn(model(x), y).backward()
                optimizer.step()
            model.eval()
            with torch.no_grad():
                val_loss = sum(loss_fn(model(x), y).item() for x, y in val_loader)

    Right::

        for epoch in range(epochs):
            model.train()
            for x, y in train_loader:
                optimizer.zero_grad()
                loss_fn(model(x), y).backward()
                optimizer.step()
            model.eval()
            with torch.no_grad():
                val_loss = sum(loss_fn(model(x), y).item() for x, y in val_loader)
    """
    for fm in file.functions:
        for fwd in _training_forwards(fm):
            bad = _culprit(fm, fwd)
            if bad is not None:
                yield Hit(bad.node, f"{fwd.recv} is left in eval mode while it trains: nothing switches it back "
                                    f"with .train()")
        for loop in fm.loops:
            bad = _helper_culprit(fm, loop)
            if bad is not None:
                yield Hit(bad.node, "the model is switched to eval mode here and the training helpers called in "
                                    "this loop never switch it back with .train()")


def _helper_culprit(fm: FunctionModel, loop: Loop) -> Event | None:
    """A loop that trains through helpers (``train_epoch(); validate()``) and switches to eval only."""
    if any(e.kind == FORWARD for e in loop.events) or not any(e.kind == CALL and {BACKWARD, STEP} <= e.kinds()
                                                              for e in loop.events):
        return None
    modes = [(e, k) for e, k in mode_events(fm, loop.events) if not (e.recv and _frozen(fm.file, e.recv))]
    if any(k == TRAIN for _, k in modes):
        return None
    evals = [e for e, k in modes if k == EVAL and not (e.kind == CALL and BACKWARD in e.kinds())]
    return evals[0] if evals else None


@rule("TB203", "eval-with-grad", fix="evaluate under `with torch.inference_mode():` (or @torch.no_grad())")
def eval_with_grad(file: FileModel) -> Iterator[Hit]:
    """An evaluation forward runs with gradients enabled.

    Without ``torch.no_grad()`` / ``torch.inference_mode()`` every evaluation batch records a graph:
    activations are kept for a backward that never comes (memory grows, out-of-memory on larger
    validation batches) and the forward is slower.

    Wrong::

        def validate(model, loader):
            model.eval()
            total = 0.0
            for x, y in loader:
                total += loss_fn(model(x), y).item()
            return total

    Right::

        @torch.inference_mode()
        def validate(model, loader):
            model.eval()
            total = 0.0
            for x, y in loader:
                total += loss_fn(model(x), y).item()
            return total
    """
    for fm in file.functions:
        if fm.grad_disabled or _grad_off_statement(fm) or _test_code(fm):
            continue
        for fwd, scope in _eval_forwards(fm):
            if fwd.grad_disabled or fwd.in_context("grad") is not None or _smoke_check(fm, fwd):
                continue
            if scope == "function" and fm.kind_events(BACKWARD):
                continue
            callers = _callers_disable_grad(fm)
            if callers:
                continue
            # run from another module: a caller may disable gradients, unless this function set eval() itself
            sure = "low" if callers is None and _mode_before(fm, fwd) != EVAL and not _file_trains(file) else "high"
            yield Hit(fwd.node, "evaluation forward with gradients enabled: the graph of every batch is built "
                                "and kept", confidence=sure)


def _defined_before(fm: FunctionModel, name: str, loop: Loop) -> bool:
    if "." in name or "[]" in name:
        return True
    args = getattr(fm.node, "args", None)
    if args is not None and name in {a.arg for a in args.args + args.kwonlyargs + args.posonlyargs}:
        return True
    if any(name in a.names and a.node.lineno < loop.node.lineno for a in fm.assigns):
        return True
    return fm.node is not fm.file.tree and any(name in a.names for a in fm.file.module.assigns)  # a module global


_DETACHING = {"item", "detach", "tolist", "numpy", "float", "int", "round", "detach_"}


_PASS_THROUGH = {"sum", "mean", "clone", "cpu", "to", "view", "reshape", "squeeze"}


def _keeps_graph(node: ast.AST, fm: FunctionModel, losses: set[str], before: int) -> str | None:
    """The loss whose graph ``node`` keeps alive (None if every use is detached).  Iterative: a
    1000-term sum does not reach the recursion limit."""
    todo = [node]
    while todo:
        n = todo.pop()
        if isinstance(n, ast.BinOp):
            todo += [n.right, n.left]
            continue
        if isinstance(n, ast.Call) and call_name(n) not in _DETACHING and R.is_loss_value(n, fm.role):
            return "the loss"
        if isinstance(n, (ast.Name, ast.Attribute)):
            found = _kept_name(n, fm, losses, before)
            if found:
                return found
        elif isinstance(n, ast.Call) and call_name(n) not in _DETACHING and isinstance(n.func, ast.Attribute) \
                and call_name(n) in _PASS_THROUGH:
            todo.append(n.func.value)
    return None


def _kept_name(node: ast.AST, fm: FunctionModel, losses: set[str], before: int) -> str | None:
    name = dotted(node)
    if (isinstance(node, ast.Attribute) and node.attr == "data") or name not in losses:
        return None
    last = fm.last_assignments(name, before)
    if last and isinstance(last[-1].value, ast.Call) and call_name(last[-1].value) in _DETACHING:
        return None  # loss = loss.item() before the sum
    return name


def _accumulations(fm: FunctionModel, loop: Loop) -> Iterator[tuple[ast.AST, str, ast.AST, int]]:
    """(statement, accumulator name, added value, order) for ``acc += v``, ``acc = acc + v``, ``acc.append(v)``
    run with gradients enabled."""
    for a in fm.assigns:
        if loop not in a.loops or not a.names or a.value is None or fm.grad_disabled \
                or any(k == "nograd" for k, _ in a.contexts):
            continue
        added = _added(a)
        if added is not None:
            yield a.node, a.names[0], added, a.order


def _added(a) -> ast.AST | None:
    """The value ``a`` adds to its target: ``acc += v``, ``acc = acc + v``, ``d[k] = d.get(k, 0) + v``,
    ``acc.append(v)`` (None for any other assignment)."""
    target = a.names[0] if a.names else None
    if target is None or a.value is None:
        return None
    if a.op is not None and isinstance(a.op, ast.Add):
        return a.value
    if a.op is None and isinstance(a.value, ast.BinOp) and isinstance(a.value.op, ast.Add):
        left = a.value.left
        if dotted(left) == target or (isinstance(left, ast.Call) and call_name(left) == "get"
                                      and isinstance(left.func, ast.Attribute)
                                      and f"{dotted(left.func.value)}[]" == target):
            return a.value.right
    return None


@rule("TB204", "loss-kept-with-graph", fix="accumulate loss.item() (or loss.detach()) for logging")
def loss_kept_with_graph(file: FileModel) -> Iterator[Hit]:
    """A loss tensor is summed (or appended) across iterations without ``.item()`` / ``.detach()``.

    ``total_loss += loss`` keeps a reference to the graph of every iteration (activations included):
    memory grows each step until the epoch ends or the GPU runs out — the classic "out of memory
    after N batches".  Accumulate ``loss.item()`` (or ``loss.detach()``) instead.
    The spelled-out forms are the same: ``meters["loss"] = meters["loss"] + loss``,
    ``self.total = self.total + loss``.

    So is ``sums[k] = sums.get(k, 0.0) + loss``, and a loss handed to a local helper or a method of a class of
    the file (``tracker.update("loss", loss)``) that adds it to an attribute, a container passed in or a
    module-level name (reported at the call).

    So is a loop-less helper or method called once per iteration of a training loop (``self.one_batch(x,
    y)``) that adds its own loss to an attribute, a module-level name or a container passed in; a step function
    or method of its own (backward and step, no loop) that the file never calls is taken to be one.  A function's own
    loop
    adding its loss to a module-level list or total (``loss_history.append(loss)``) is reported too.

    Wrong::

        total_loss = 0.0
        for x, y in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            total_loss += loss

    Right::

        total_loss = 0.0
        for x, y in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            total_loss += loss.item()
    """
    for fm in file.functions:
        losses = loss_names(fm)
        backed = {n for b in fm.kind_events(BACKWARD) for n in _names(b.extra.get("loss"))}
        for loop in fm.loops:
            if not has_kind(loop, BACKWARD):
                continue
            for node, target, value, order in _accumulations(fm, loop):
                kept = _keeps_graph(value, fm, losses, order)
                if kept and target != kept and target not in backed and target not in losses \
                        and _defined_before(fm, target, loop) and not _reset_in_loop(fm, target, loop, node):
                    yield Hit(node, f"{target} accumulates {kept} with its autograd graph; every iteration's "
                                    f"graph stays in memory")
        yield from _helper_accumulations(fm, losses)
        yield from _per_iteration_helper_accumulations(fm, losses, backed)


def _called_per_training_step(fm: FunctionModel) -> bool:
    """``fm`` is a helper (``self.one_batch(x, y)``) called inside a loop that trains, grad enabled."""
    if fm.grad_disabled or fm.node is fm.file.tree:
        return False
    own = bool(fm.kind_events(BACKWARD))
    sites = fm.call_sites()
    if own and not sites and fm.kind_events(STEP):
        return True  # a step function of its own (backward + step) the file never calls: a per-step callback
    return any(site.loops and not site.grad_disabled and (own or train_loop(site) is not None)
               for site in fm.call_sites())


def _per_iteration_helper_accumulations(fm: FunctionModel, losses: set[str], backed: set[str]) -> Iterator[Hit]:
    """A loop-less helper computing a loss and adding it to a sum outliving the call (``self.losses.append(loss)``),
    called once per iteration of a training loop: every iteration's graph stays in memory."""
    if fm.loops or not losses or not _called_per_training_step(fm):
        return
    args = fm.node.args
    params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    module_names = {n for a in fm.file.module.assigns for n in a.names}
    for a in fm.assigns:
        added = _added(a) if not a.loops and not any(k == "nograd" for k, _ in a.contexts) else None
        if added is None:
            continue
        target = a.names[0]
        base = target.split(".")[0].replace("[]", "")
        if not (target.startswith("self.") or base in params or base in module_names) or target in backed:
            continue
        kept = _keeps_graph(added, fm, losses, a.order)
        if kept and kept not in params and target != kept:
            yield Hit(a.node, f"{target} accumulates {kept} with its autograd graph at every call of "
                              f"{fm.name}() from the training loop; every iteration's graph stays in memory")


def _helper_accumulations(fm: FunctionModel, losses: set[str]) -> Iterator[Hit]:
    """A training loop hands a loss to a local helper (``tracker.update("loss", loss)``) that adds it to
    a sum outliving the call (``self.sums[name] = self.sums[name] + value``): reported at the call."""
    seen: set[int] = set()
    for loop in fm.loops:
        if fm.grad_disabled or not has_kind(loop, BACKWARD):
            continue
        for call in (n for st in getattr(loop.node, "body", []) for n in walk_no_defs(st) if isinstance(n, ast.Call)):
            if id(call) in seen:
                continue
            seen.add(id(call))
            helper = fm.file.resolve(call, fm) or _instance_method(fm, call)
            if helper is None or helper.grad_disabled:
                continue
            before = max((a.order for a in fm.assigns if a.node.lineno <= call.lineno), default=0)
            for param, arg in _bound_args(helper, call):
                kept = _keeps_graph(arg, fm, losses, before)
                target = _persistent_sum(helper, param) if kept else None
                if target:
                    yield Hit(call, f"{dotted(call.func) or helper.name}() adds {kept} to {target} with its "
                                    f"autograd graph; every iteration's graph stays in memory")
                    break


def _instance_method(fm: FunctionModel, call: ast.Call) -> FunctionModel | None:
    """``tracker.update(...)`` where ``tracker = MetricTracker()`` (a class of this file): that method."""
    func = call.func
    recv = dotted(func.value) if isinstance(func, ast.Attribute) else None
    if not recv:
        return None
    scopes = [s for s in fm.file.functions if s is fm or s is fm.file.module or s is fm.parent
              or (recv.startswith("self.") and s.cls is not None and s.cls is fm.cls)]
    for scope in scopes:
        for a in scope.assigns:
            if a.names == [recv] and a.op is None and isinstance(a.value, ast.Call):
                cls = fm.file.imports.qualname(R.innermost_call(a.value) or a.value).split(".")[-1]
                if cls in fm.file.classes:
                    return fm.file.methods.get((cls, func.attr))
    return None


def _bound_args(helper: FunctionModel, call: ast.Call) -> Iterator[tuple[str, ast.AST]]:
    """(parameter, argument) pairs of a call of a local function or method."""
    args = helper.node.args
    params = [a.arg for a in args.posonlyargs + args.args]
    if helper.cls is not None and isinstance(call.func, ast.Attribute) and params:
        params = params[1:]  # self
    for param, arg in zip(params, call.args):
        if isinstance(arg, ast.Starred):
            return
        yield param, arg
    names = set(params) | {a.arg for a in args.kwonlyargs}
    for k in call.keywords:
        if k.arg in names:
            yield k.arg, k.value


def _persistent_sum(helper: FunctionModel, param: str) -> str | None:
    """The sum outliving a call of ``helper`` that the parameter ``param`` is added to, with its graph:
    an attribute (``self.total``), a container passed in, or a module-level name."""
    args = helper.node.args
    params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs} - {param}
    file = helper.file
    module_names = file.memo("module_names", lambda: {n for a in file.module.assigns for n in a.names})
    backed = file.memo("all_backed", lambda: {n for f in file.functions for b in f.kind_events(BACKWARD)
                                              for n in _names(b.extra.get("loss"))})
    for a in helper.assigns:
        added = _added(a) if not any(k == "nograd" for k, _ in a.contexts) else None
        if added is None:
            continue
        target = a.names[0]
        base = target.split(".")[0].replace("[]", "")
        if (target.startswith("self.") or base in params or base in module_names) and target not in backed \
                and _keeps_graph(added, helper, {param}, a.order):
            return target
    return None


def _names(node: ast.AST | None) -> set[str]:
    if node is None:
        return set()
    return {dotted(n) for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute)) and dotted(n)}


def _reset_in_loop(fm: FunctionModel, target: str, loop: Loop, node: ast.AST) -> bool:
    """``acc = 0`` inside the loop (before the accumulation): a per-iteration sum, not a leak."""
    return any(target in a.names and a.op is None and loop in a.loops and a.node is not node
               and a.node.lineno < getattr(node, "lineno", 0) for a in fm.assigns)
