"""TB203 eval-with-grad: An evaluation forward runs with gradients enabled.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trickbag.audit._ast import call_name, const_value, dotted, names_in, walk
from trickbag.audit._callers import project_calls
from trickbag.audit._eval_facts import (
    differentiates,
    eval_forwards,
    file_trains,
    mode_before,
    runs_without_grad,
    smoke_check,
    test_code,
    unconditional_forward,
)
from trickbag.audit._flow import (
    BACKWARD,
    EVAL,
    FileModel,
    FunctionModel,
    made_to_require_grad,
)
from trickbag.audit._intent import frozen_models
from trickbag.audit._project import imported_definition
from trickbag.audit._query import short_name
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []



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
    verdicts: list[bool | None] = []
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
        if isinstance(n, (ast.With, ast.AsyncWith)) and any(fm.node in walk(st) for st in n.body):
            return any(isinstance(i.context_expr, ast.Call)
                       and call_name(i.context_expr) in ("no_grad", "inference_mode") for i in n.items)
    return False


def _grad_off_statement(fm: FunctionModel) -> bool:
    """``torch.set_grad_enabled(False)`` as a statement of the function."""
    return any(isinstance(n, ast.Call) and call_name(n) == "set_grad_enabled" and n.args
               and const_value(n.args[0]) is False for n in fm.nodes) or _volatile_inputs(fm)


def _volatile_inputs(fm: FunctionModel) -> bool:
    """``Variable(x, volatile=True)`` (or a helper given ``volatile=True``: ``np_to_variable(x, volatile=True)``):
    the no-grad of torch <= 0.3, which the function's code is written for (a forward of a volatile input records no
    graph there); or a helper of the file or of an imported project module that makes ``Variable(x,
    volatile=evaluation)`` called with ``evaluation=True`` (``get_batch(data, i, evaluation=True)``; when the helper's
    module is not in the project, in a file of that era, one that imports ``Variable``)."""
    return any(isinstance(n, ast.Call)
               and any(k.arg == "volatile" and const_value(k.value) is True for k in n.keywords) for n in fm.nodes) \
        or any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and _volatile_helper(fm, n) for n in fm.nodes)


def _volatile_helper(fm: FunctionModel, call: ast.Call) -> bool:
    flags = {k.arg for k in call.keywords if k.arg and const_value(k.value) is True}
    if not flags:
        return False
    name = call.func.id if isinstance(call.func, ast.Name) else ""
    local = fm.file.top.get(name)
    helper = local.node if local is not None else imported_definition(fm.file.tree, fm.file.path, name)
    if helper is None:  # awd-lstm's ``get_batch(..., evaluation=True)`` from a module the project does not ship
        return "evaluation" in flags and fm.file.imports.qualname(ast.Name("Variable")).endswith("autograd.Variable")
    return isinstance(helper, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
        isinstance(n, ast.Call) and call_name(n) == "Variable" and any(
            k.arg == "volatile" and isinstance(k.value, ast.Name) and k.value.id in flags for k in n.keywords)
        for n in walk(helper))


def _feeds_a_backward(fm: FunctionModel, fwd) -> bool:
    """The forward's result reaches the loss of a later backward in the same loop (``logits += model(z) * w`` ...
    ``loss = crit(logits, y); loss.backward()``: frozen client models a generator is trained through), followed
    through the function's assignments."""
    made = {n for a in fm.assigns if a.order >= fwd.order - 1 and a.value is not None
            and any(x is fwd.node for x in ast.walk(a.value)) for n in a.names}
    if not made:
        return False
    for lp in fwd.loops:
        for e in lp.events:
            loss = e.extra.get("loss") if e.kind == BACKWARD and e.order > fwd.order else None
            if loss is None:
                continue
            names: set[str] = set()
            todo = [loss]
            while todo and len(names) < 200:
                node = todo.pop()
                for n in ast.walk(node):
                    d = dotted(n) if isinstance(n, (ast.Name, ast.Attribute)) else None
                    if d and d not in names:
                        names.add(d)
                        todo += [a.value for a in fm.assigns if d in a.names and a.value is not None
                                 and a.order < e.order]
            if names & made:
                return True
    return False


def _evaluation_callers_disable_grad(fm: FunctionModel) -> bool:
    """Every call of ``fm`` by name in its project (this module and the others, test modules left out) that is not
    a training forward runs without gradients, and there is at least one: a method that is both the training
    forward (``update()`` computes the loss through ``self.predict(x)``) and the evaluation forward, run by an
    evaluation loop of another module under ``torch.no_grad()``."""
    if fm.name.startswith("__") or fm.name in ("forward", "main", "run"):
        return False
    calls = [c for c in project_calls(fm.file.path, fm.name) if c.grad_off or not c.trains]  # a training loop's
    # ``with torch.no_grad(): validate(...)`` is no training forward
    return bool(calls) and all(c.grad_off for c in calls)


@rule("TB203", "eval-with-grad", fix="evaluate under `with torch.inference_mode():` (or @torch.no_grad())")
def eval_with_grad(file: FileModel) -> Iterator[Hit]:
    """An evaluation forward runs with gradients enabled.

    Without ``torch.no_grad()`` / ``torch.inference_mode()`` every evaluation batch records a graph:
    activations are kept for a backward that never comes (memory grows, out-of-memory on larger
    validation batches) and the forward is slower.

    A method of the trainer that runs the model and is shared with the training step (``self.infer(x)``) is a
    forward where a validation step calls it; a function named like an evaluation (``infer``, ``predict``) that the
    training step runs before its backward is part of training, not an evaluation.  ``module.train(False)`` is an
    eval switch like ``module.eval()``.  The forward of a wrapper whose own ``forward`` runs under ``no_grad`` /
    ``inference_mode`` (a class of the file, or one imported from a module of the same project) is not reported,
    nor one under a context chosen by a condition with ``no_grad`` on one side (``with torch.no_grad() if not
    needs_grad else nullcontext():``, or ``with ctx:`` where every assignment of ``ctx`` is such a choice),
    nor a function that wraps its inputs in ``Variable(x, volatile=True)`` (the no-grad of torch <= 0.3 that the
    code is written for).  A loop inside a training iteration that runs a module put in eval mode
    before the training loop began (a frozen module kept in eval through training, run per sample) is part of the
    training step, not an evaluation.  The callers are followed into methods inherited within the file (a base
    class's ``run_all_evals`` running ``self.evaluate_mt`` under ``no_grad``, defined only by one subclass) and
    into an evaluator class's own ``self.eval()`` method (no ``nn.Module``: not a mode switch).  A function whose
    callers are not in its file is not reported when every call of it by name in the project (other modules
    included, tests left out) that is not a training forward runs under ``no_grad`` / ``inference_mode``
    (``predict()`` shared by ``update()`` and an ``accuracy()`` helper of another module that holds ``no_grad``);
    nor is a loop that calls ``autograd.grad``, itself or through the file's functions and the class's methods (a
    Hessian-vector product or a Jacobian of the outputs needs the graph), or that crafts adversarial examples (a call
    named like an attack: ``adversary.generate(x, y)``, ``self.adv_data(x, y)``; an adversarial evaluation
    differentiates the model), nor a forward on batches
    a project helper wraps in ``Variable(x, volatile=evaluation)`` when called with ``evaluation=True``, nor a
    forward on made-up inputs (``torch.randn``, ``torch.zeros``, a copy of one by ``copy.deepcopy`` or
    ``.clone()``, as an export script's torch-vs-ONNX check runs the model on the example inputs it exported
    with), or on data written out in the code (``encoder(str2tensor('hello'), hidden)``,
    ``LongTensor([1, 2, 3])``): a shape or equivalence check, not an evaluation over data; nor a forward under
    ``torch.set_grad_enabled(<a condition>)`` (``set_grad_enabled(self.model.training)``: chosen on purpose), nor
    one on inputs the function makes require gradients (``img.requires_grad = True``: a distillation loss on input
    gradients), nor a test script right in a ``tests`` folder (``tests/actions_test.py``).  A forward whose result
    reaches the loss of a later backward in the same loop (frozen models a generator is trained through) is part of
    training; ``grad`` imported from ``torch.autograd`` is ``autograd.grad``.  A method of a
    weight-averaging helper given the model itself (``ema_helper.ema(score)``: it copies the average into
    ``score``) is no forward.  The finding is on the first forward of the evaluation that runs on every pass (not
    one under an ``if``).

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
        if fm.grad_disabled or _grad_off_statement(fm) or test_code(fm):
            continue
        for first, scope in eval_forwards(fm):
            fwd = unconditional_forward(fm, first, scope)
            if fwd.grad_disabled or fwd.in_context("grad") is not None or smoke_check(fm, fwd) \
                    or runs_without_grad(file, fwd.recv or ""):
                continue
            if scope == "function" and fm.kind_events(BACKWARD):
                continue
            if any(differentiates(fm, lp) for lp in fwd.loops):
                continue  # the loop also takes gradients of the model (a Jacobian, an attack on the inputs)
            if _feeds_a_backward(fm, fwd):
                continue  # its outputs reach a backward of the same iteration (a generator trained through them)
            if names_in(fwd.node) & made_to_require_grad(fm):
                continue  # ``img.requires_grad = True; snet(img)``: the evaluation needs input gradients
            callers = _callers_disable_grad(fm)
            if callers or (callers is None and _evaluation_callers_disable_grad(fm)):
                continue
            # run from another module: a caller may disable gradients, unless this function set eval() itself
            sure = "low" if callers is None and mode_before(fm, fwd) != EVAL and not file_trains(file) else "high"
            frozen = short_name(fwd.recv or "") in frozen_models(file)
            why = " (uncertain: the model is frozen with requires_grad_(False): no graph is built unless the " \
                  "inputs need gradients)" if frozen else ""
            yield Hit(fwd.node, "evaluation forward with gradients enabled: the graph of every batch is built "
                                f"and kept{why}", confidence="low" if frozen else sure)
