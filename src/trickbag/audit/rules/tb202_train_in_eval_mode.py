"""TB202 train-in-eval-mode: The model is switched to eval mode and training continues without ``model.train()``.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trickbag.audit import _roles as R
from trickbag.audit._ast import call_name, const_value, dotted, name_tokens, walk, walk_no_defs
from trickbag.audit._eval_facts import trained_models_of
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
    made_to_require_grad,
)
from trickbag.audit._intent import frozen_models, mode_free
from trickbag.audit._project import imported_definition
from trickbag.audit._query import (
    has_kind,
    mode_events,
    same_model,
    short_name,
    stepish,
)
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []



_FROZEN_WORDS = {"teacher", "target", "ref", "reference", "frozen", "pretrained", "vae", "clip", "critic_target",
                 "old", "momentum", "key", "tgt"}


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
    trained = trained_models_of(fm.file)
    for f in fm.kind_events(FORWARD):
        if f.grad_disabled or not f.loops or not has_kind(f.loops[-1], BACKWARD) or not f.recv \
                or not any(stepish(e) for lp in f.loops for e in lp.events):
            continue
        if (trained and short_name(f.recv) not in trained) or _frozen(fm.file, f.recv) or _input_optimisation(fm, f):
            continue
        yield f


def _input_optimisation(fm: FunctionModel, fwd: Event) -> bool:
    """Every optimizer stepped in the forward's loops is built in this function over a list of tensors the function
    itself made require gradients (``delta = Variable(d, requires_grad=True)``; ``optimizer_delta =
    optim.SGD([delta])``: an attack or an input optimisation through the model), so the forward does not train the
    model."""
    stepped = {e.recv for lp in fwd.loops for e in lp.events if e.kind == STEP}
    if not stepped or None in stepped:
        return False
    inputs = made_to_require_grad(fm)
    made = {n for a in fm.assigns if isinstance(a.value, ast.Call) and a.value.args and _tensor_list(a.value.args[0])
            and {dotted(e) for e in walk(a.value.args[0]) if isinstance(e, ast.Name)} <= inputs
            and R.role_by_constructor(a.value, fm.file.imports, fm.file.class_names) == R.OPTIMIZER for n in a.names}
    return stepped <= made



def _culprit(fm: FunctionModel, fwd: Event) -> ast.AST | None:
    """The ``eval()`` switch (or the call of a helper that does it) left in force at a training forward, if any."""
    for loop in reversed(fwd.loops):
        modes = [(e, k) for e, k in mode_events(fm, loop.events) if same_model(e, fwd)]
        if any(k == TRAIN for _, k in modes):
            return None
        evals = [e for e, k in modes if k == EVAL and _reaches(fm, loop, e.node, fwd)]
        if evals:
            return evals[0].node
        imported = _imported_eval_switch(fm, loop, fwd)
        if imported is not None and _reaches(fm, loop, imported, fwd):
            return imported
    outer = fwd.loops[0]
    before = [e for e in fm.events if e.order < fwd.order and outer not in e.loops]
    modes = [(e, k) for e, k in mode_events(fm, before) if same_model(e, fwd)]
    if modes and modes[-1][1] == EVAL and all(fwd.under(g) for g in modes[-1][0].guards):
        return modes[-1][0].node
    return None


def _reaches(fm: FunctionModel, loop: Loop, switch: ast.AST, fwd: Event) -> bool:
    """The eval switch is still in force at the forward: no re-assignment of the model to a new one (``model =
    GPT4TS(...)``, ``model = build_model(args)``: a fresh module in training mode; not ``accelerator.prepare(model)``
    or ``model.to(dev)``, the same module) in ``loop`` comes between them, counting the wrap-around to the next
    iteration when the switch is after the forward."""
    name = short_name(fwd.recv or "")
    first, last = getattr(loop.node, "lineno", 0), getattr(loop.node, "end_lineno", None) or 1 << 30
    at, to = getattr(switch, "lineno", 0), getattr(fwd.node, "lineno", 0)
    for a in fm.assigns:
        line = getattr(a.node, "lineno", 0)
        if a.op is not None or not isinstance(a.value, ast.Call) or not first <= line <= last \
                or name not in {short_name(n) for n in a.names} \
                or name in {short_name(d) for d in map(dotted, walk(a.value)) if d}:  # prepare(model), model.to()
            continue
        if (at < line < to) or (at > to and (line < to or line > at)):
            return False
    return True


def _imported_eval_switch(fm: FunctionModel, loop: Loop, fwd: Event) -> ast.Call | None:
    """A call in ``loop`` of a function imported from a module of the same project (``validate(model, data)``)
    whose body switches the parameter it gets the forward's model in to eval mode and never calls ``train``."""
    for call in (n for n in walk_no_defs(loop.node) if isinstance(n, ast.Call)):
        if not isinstance(call.func, ast.Name) or fm.file.resolve(call, fm) is not None:
            continue
        fn = imported_definition(fm.file.tree, fm.file.path, call.func.id)
        if not isinstance(fn, ast.FunctionDef):
            continue
        calls = [n for n in walk(fn) if isinstance(n, ast.Call)]
        if any(call_name(n) == "train" for n in calls):
            continue
        switched = {dotted(n.func.value) for n in calls if call_name(n) == "eval" and not n.args
                    and isinstance(n.func, ast.Attribute)}
        switched -= {t.id for n in walk(fn) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
                     and call_name(n.value) in ("deepcopy", "copy") for t in n.targets
                     if isinstance(t, ast.Name)}  # ``model = deepcopy(model); model.eval()``: a copy is switched
        params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
        bound = list(zip(params, call.args)) + [(k.arg, k.value) for k in call.keywords if k.arg]
        if any(p in switched and short_name(dotted(a) or "") == short_name(fwd.recv or "") for p, a in bound):
            return call
    return None


@rule("TB202", "train-in-eval-mode", fix="call model.train() at the start of every training epoch")
def train_in_eval_mode(file: FileModel) -> Iterator[Hit]:
    """The model is switched to eval mode and training continues without ``model.train()``.

    After the first evaluation (``model.eval()``) every later epoch trains with dropout off and
    BatchNorm frozen on its running statistics — quietly worse results.  Switch back with
    ``model.train()`` at the top of each epoch (or at the end of the evaluation).

    ``model.train(was_training)`` / ``model.train(mode=prev)`` restores a saved mode and counts as switching back;
    only ``model.train(False)`` is a switch to eval. ``model = model.train() if is_train else model.eval()`` (one
    function for the training and the validation loop) switches to train where it trains. A helper that switches by
    a mode argument (``set_mode("eval", models)`` with ``if mode == "eval": m.eval()``) is read with the constant it
    is given. A function imported from a module of the same project (``from prediction import validate``) that
    switches the model it is given to eval and never calls ``train`` counts where the training loop calls it (not
    one that switches a ``deepcopy`` of it). A helper switches the model the call binds to its parameter:
    ``evaluate(eval_model, loader)`` on a separate evaluation copy leaves the trained ``model`` as it was.

    The finding is reported where eval mode is left in force: the ``model.eval()`` of the training function, or
    the call of the helper that switches (``validate(model, loader)``, ``self.evaluate()``), which is what was
    missing its ``.train()``; the message names the training forward that then runs in eval mode.  One switch
    that reaches several training forwards is one finding.

    A forward whose loop steps only optimizers over tensors the function itself made require gradients
    (``optim.SGD([delta])``: an attack's own optimisation of its input) does not train the model.

    A model re-assigned to a new one in the loop between the switch and the training forward (``for run in
    range(args.itr): model = GPT4TS(args)`` after the last run's ``test(model)``) is a fresh module in training
    mode: not reported; ``model = accelerator.prepare(model)`` re-binds the same module and resets nothing.

    The finding is uncertain (``--all``) when the model's parameters are frozen (``requires_grad = False``), or
    when every optimizer the file builds takes a list of tensors (``Adam([latent])``: the model may be fixed on
    purpose) — unless the training function steps an optimizer it is given as a parameter and no code of the file
    calls it (the model's optimizer comes from a caller in another module).

    A model whose layers behave the same in both modes (no dropout, no BatchNorm, no ``self.training``; followed as
    for TB201, ``model = model.cuda()`` included) is not reported: the mode changes nothing.

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
            if bad is not None and not mode_free(file, fwd.recv or "", fm.cls):
                why, line = _doubt(file, fwd.recv, fm), getattr(fwd.node, "lineno", "?")
                yield Hit(bad, f"{fwd.recv} is left in eval mode while it trains: nothing switches it back "
                               f"with .train(), and the training forward on line {line} runs in eval "
                               f"mode from here on{why}", confidence="low" if why else "high")
        for loop in fm.loops:
            switch = _helper_culprit(fm, loop)
            if switch is not None:
                why = _doubt(file, switch.recv, fm)
                yield Hit(switch.node, "the model is switched to eval mode here and the training helpers called in "
                                       f"this loop never switch it back with .train(){why}",
                          confidence="low" if why else "high")


def _doubt(file: FileModel, recv: str | None, fm: FunctionModel) -> str:
    """Why eval mode during training may be on purpose, or '' (``fm``: the function that trains)."""
    frozen = frozen_models(file)
    if frozen and (not recv or short_name(recv) in frozen):
        return " (uncertain: its parameters are frozen with requires_grad = False: eval() may be on purpose, " \
               "as in linear probing)"
    if _optimizers_take_tensors_only(file) and not _optimizer_from_caller(fm):
        return " (uncertain: no optimizer of this file gets a model's parameters: the model may be fixed on purpose)"
    return ""


def _optimizer_from_caller(fm: FunctionModel) -> bool:
    """``fm`` steps an optimizer it is given as a parameter (never re-bound in it) and no code of this file calls
    it: the optimizer that trains the model comes from a caller in another module, so the tensor-list optimizers
    this file builds (``Adam([mask])`` of a trigger inversion) say nothing about whether the model is trained."""
    args = getattr(fm.node, "args", None)
    if args is None or fm.call_sites():
        return False
    params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    bound = {n for a in fm.assigns for n in a.names}
    return any(e.recv in params and e.recv not in bound for e in fm.kind_events(STEP))


def _optimizers_take_tensors_only(file: FileModel) -> bool:
    """This file builds optimizers, and none of them is given ``.parameters()`` of anything (``Adam([latent])``)."""
    opts = [n for n in file.nodes if isinstance(n, ast.Call)
            and R.role_by_constructor(n, file.imports, file.class_names) == R.OPTIMIZER]
    return bool(opts) and all(o.args and _tensor_list(o.args[0]) for o in opts)


def _tensor_list(node: ast.AST) -> bool:
    """``[latent] + noises``, ``[w, b]``: a list literal (maybe concatenated) of names, no ``.parameters()``."""
    if isinstance(node, ast.BinOp):
        return (_tensor_list(node.left) or _tensor_list(node.right)) and not any(
            isinstance(n, ast.Call) for n in walk(node))
    return isinstance(node, ast.List) and all(isinstance(e, (ast.Name, ast.Attribute)) for e in node.elts)


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
