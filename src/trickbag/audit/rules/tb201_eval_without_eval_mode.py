"""TB201 eval-without-eval-mode: An evaluation runs the model without ``model.eval()``.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import cast

from trickbag.audit import _roles as R
from trickbag.audit._ast import call_name, dotted, name_tokens
from trickbag.audit._eval_facts import bound_args, eval_forwards, file_trains, mode_before, smoke_check, test_code
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
)
from trickbag.audit._intent import injected_class, mode_free
from trickbag.audit._project import project_method_calls, project_mode_free
from trickbag.audit._query import (
    VALISH,
    mode_events,
    same_model,
    short_name,
)
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []



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
        arg = next((dotted(a) for p, a in bound_args(fm, s.node) if p == model), None) \
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
    functions from the function that defines them); a parameter every call binds to the model the body uses by
    its global name (``def val(net): net.eval(); ... crnn(x)`` called as ``val(crnn)``) is that model.  A function
    named like ``predict`` whose results a training step back-propagates (directly, or through a function that
    returns them, two calls deep, or through assignments and list appends:
    ``losses.append(crit(maml.predict(x), y))`` then ``torch.stack(losses).mean().backward()``) is part of
    training.  Not evaluations: tests (test modules, ``test_*`` functions, ``TestCase`` methods), shape checks
    (a forward on random inputs, or of a model built right there from its class and never loaded or trained)
    and a model just made by ``from_pretrained`` (Hugging
    Face returns it in eval mode).  A function run only from another module, on a model passed in, is a
    low-confidence finding (``--all``) when nothing in the file calls ``eval()``: its caller may; a method called
    only from other modules of the project, each call after an ``eval()`` in the calling function
    (``network.eval()`` then ``network.predict(x)``), is not reported.  A loop whose result a caller back-propagates
    (MAML's ``get_outer_loss`` shared by training and evaluation) is part of the training step.

    The mode must matter: a model whose class (built in the function, or an attribute built in ``__init__``; a class of
    this file or one imported from a module of the project, followed into the classes it holds, ``ModuleDict`` /
    ``ModuleList`` comprehensions, RNNs without ``dropout=``, an activation picked from a list of layers (``[nn.ReLU(),
    nn.Tanh()][args.use_tanh]``), PyTorch Geometric layers without dropout and plain helper classes included) has no
    dropout, no BatchNorm and never reads ``self.training`` is not reported, nor one that holds no module at all
    (a numpy computation from given weights); where no module of the project uses such a layer nor loads a model
    from a zoo (torchvision.models, timm, transformers, the hub), the finding is low confidence.  A function
    imported from the project (``add_prompt_to_generator(example, ...)``) is not a model, whatever its name, nor an
    instance of a class of the file that is no module (an evaluator object with ``__call__``, called with the
    network).  ``model.eval()`` puts the submodules in eval mode too (``model.encoder(x)`` after it is in eval
    mode), and ``[model[k].eval() for k in model]`` every part of ``model``; so does ``eval()`` in the chain that
    makes the model (``inception = InceptionV3().eval().to(device)``).  A name that is only ever the model moved or
    wrapped (``parallel_model = nn.DataParallel(model)``) is in the model's mode.  A model made by a constructor of
    another module counts as built here (train mode) when a function that does not train loads its weights with
    ``load_state_dict`` before the forward (an evaluation script).  An epoch function shared by training and
    evaluation (``self._epoch(test_loader, train=False)``), run with constants that rule out its backward and
    step, under ``no_grad`` or from a ``test`` / ``validate`` function, is reported at that call when neither it
    nor anything in the file switches to eval mode.  ``model.train()`` right before the ``no_grad`` block
    (only prints, logs or constants between) is train mode on purpose: a validation-loss pass (a detector that
    returns its loss dict only when ``self.training``: ``loss_dict = model(images_val, targets_val)``) or a
    data-dependent initialisation (Glow's ActNorm statistics set from data): a low-confidence finding (``--all``)
    with that reason.  Also low: a model built by calling a class the caller passes in (``def __init__(self,
    network): self.network = network()``; a helper given that model by its callers): which layers it has cannot
    be seen; and a private function or method (``_name``, ``__name``) that nothing in its file names (it may never
    run).  A method of a project class called on its instance with data (``engine.eval(x, y)`` where
    ``engine = trainer(...)`` comes from another module of the project) switches the model its body switches
    (``self.model.eval()`` there: ``engine.model`` is in eval mode after the call).  A method named after the model
    on another object (``self.eval_collector.model_collect(self.model)``) is no forward.

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
        if test_code(fm):
            continue
        for fwd, scope in eval_forwards(fm):
            mode = mode_before(fm, fwd)
            if mode == EVAL or (mode == TRAIN and scope == "function"):  # train() on purpose: update_bn & co.
                continue
            if smoke_check(fm, fwd) or _pretrained_here(fm, fwd) or mode_free(file, fwd.recv or "", fm.cls, fm):
                continue
            made = _made_here(fm, fwd)
            sure = "low" if made == "elsewhere" else "high"
            if mode is None and not made:
                callers = _caller_mode(fm, model=(fwd.recv or "").split(".")[0])
                if callers == EVAL_CONTEXT:
                    continue
                if callers == UNKNOWN_CONTEXT:
                    if any(e.kind == EVAL for f in file.functions for e in f.events) or _project_callers_switch(fm):
                        continue
                    # run from another module, which may call eval() first: unless this file trains the model
                    sure = "high" if file_trains(file) else "low"
            why = (_train_on_purpose(fm, fwd) if mode == TRAIN else "") or _feeds_training(fm, fwd) \
                or _class_chosen_by_caller(file, fm, fwd) or _never_called(file, fm) or (
                " (uncertain: no module of this project uses dropout, BatchNorm or self.training, nor loads a model "
                "from a zoo: the mode may change nothing)" if project_mode_free(file.path) else "")
            yield Hit(fwd.node, f"evaluation forward of {fwd.recv} in train mode (dropout on, BatchNorm on "
                                f"batch statistics): call {cast(str, fwd.recv).split('(')[0]}.eval() first{why}",
                      confidence="low" if why else sure)
    yield from _shared_epoch_as_evaluation(file)


def _project_callers_switch(fm) -> bool:
    """A method run only from other modules (``network.predict(x)``) whose every call in the project follows an
    ``eval()`` call in the calling function (``network.eval()`` then a loop of ``network.predict(x)``)."""
    if fm.cls is None or fm.call_sites():
        return False
    calls = project_method_calls(fm.file.path, fm.name)
    if not calls:
        return False
    return all(any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "eval"
                   and not n.args and n.lineno < line for n in ast.walk(fn))
               for path, fn, line in calls if path != fm.file.path)


def _shared_epoch_as_evaluation(file: FileModel) -> Iterator[Hit]:
    """``self._epoch(test_loader, train=False)`` under ``no_grad`` (or in a ``test`` / ``validate`` function): an
    epoch function shared with training, whose backward and step the constant rules out, run as an evaluation
    with no mode switch in it, before it, nor anywhere in the file (DeepRank's ``test()``)."""
    if any(e.kind == EVAL for f in file.functions for e in f.events):
        return
    for fm in file.functions:
        if test_code(fm):
            continue
        for e in fm.events:
            if e.kind != CALL or not e.constants():
                continue
            helper = e.extra["helper"]
            full, run = file.summary(helper), file.summary(helper, consts=e.constants())
            if not ({BACKWARD, STEP} <= full.kinds) or run.kinds & {BACKWARD, STEP} or FORWARD not in run.kinds \
                    or full.last_mode is not None:
                continue
            evaluating = e.grad_disabled or bool(set(name_tokens(fm.name)) & _EVAL_WORDS)
            if not evaluating or _caller_mode(fm) == EVAL_CONTEXT:
                continue
            why = " (uncertain: no module of this project uses dropout, BatchNorm or self.training, nor loads a " \
                  "model from a zoo: the mode may change nothing)" if project_mode_free(file.path) else ""
            yield Hit(e.node, f"{helper.name}() runs here as an evaluation (the constants passed rule out its "
                              f"backward and step), with the model still in train mode: call model.eval() "
                              f"first{why}", confidence="low" if why else "high")


_TARGET_WORDS = {"td", "advantage", "advantages", "adv", "gae", "returns", "memory", "bank",
                 "queue", "pseudo", "rollout", "rollouts", "buffer", "replay", "teacher", "prototypes", "cluster",
                 "clusters", "centroids", "collect", "bootstrap"}
_EVAL_WORDS = VALISH | {"evaluate", "validate", "accuracy", "metric", "metrics", "score", "inference", "predict"}


def _train_on_purpose(fm: FunctionModel, fwd: Event) -> str:
    """``model.train()`` right before the ``no_grad`` block of a forward (only prints, logs or constants between):
    train mode on purpose, for a validation-loss pass (a detector returns its loss dict only when
    ``self.training``) or a data-dependent initialisation (Glow's ActNorm); '' if not."""
    grad_off = next((node for kind, node in fwd.contexts if kind == "nograd"), None)
    events = [e for e in fm.events if e.order < fwd.order and not e.exclusive(fwd)]
    modes = [e for e, k in mode_events(fm, events) if same_model(e, fwd)]
    if grad_off is None or not modes or not isinstance(modes[-1].node, ast.Call):
        return ""
    after, before = getattr(modes[-1].node, "end_lineno", 0) or 0, getattr(grad_off, "lineno", 0)
    if not after < before or not all(_bookkeeping(n) for n in fm.nodes
                                     if isinstance(n, ast.stmt) and after < n.lineno < before):
        return ""
    stored = next((n for n in fm.nodes if isinstance(n, ast.Assign) and n.value is fwd.node), None)
    words = {t for target in (stored.targets if stored else []) for t in name_tokens(dotted(target) or "")}
    if words & {"loss", "losses"}:
        return " (uncertain: model.train() is called right before this gradient-free pass, which stores losses: " \
               "train mode may be on purpose, for a model that returns its losses only in train mode)"
    return " (uncertain: model.train() is called right before this gradient-free pass: train mode may be on " \
           "purpose, as in a data-dependent initialisation that sets normalisation statistics from data)"


def _class_chosen_by_caller(file: FileModel, fm: FunctionModel, fwd: Event) -> str:
    """The model is built by calling a class the caller passes in (``self.network = network().to(device)``): which
    layers it has, and so whether the mode matters, cannot be seen here; '' if not."""
    recv = fwd.recv or ""
    param = injected_class(file, recv, fm.cls, fm)
    sites = fm.call_sites() if "." not in recv and isinstance(fm.node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
        else []
    if param is None and sites:  # ``def check(self, state, network): network(state)`` called with ``self.network``
        passed = [next((dotted(a) for p, a in bound_args(fm, s.node) if p == recv), None)
                  if isinstance(s.node, ast.Call) else None for s in sites]
        found = [injected_class(file, a, s.fm.cls, s.fm) if a else None for a, s in zip(passed, sites)]
        param = found[0] if all(found) else None
    return f" (uncertain: the model's class is passed in as {param!r}: whether it has dropout or BatchNorm, and so " \
           f"whether the mode matters, cannot be seen here)" if param else ""


def _never_called(file: FileModel, fm: FunctionModel) -> str:
    """A private function or method (``_name`` / ``__name``, not a dunder) that nothing in its file names: no other
    module is meant to call it, so it does not run; '' if not."""
    name = fm.name
    if not name.startswith("_") or name.endswith("__") or fm.parent is not None:
        return ""
    mangled = f"_{fm.cls.name}{name}" if fm.cls is not None and name.startswith("__") else name
    used = any((isinstance(n, ast.Attribute) and n.attr in (name, mangled))
               or (isinstance(n, ast.Name) and n.id == name) for n in ast.walk(file.tree))
    return "" if used else f" (uncertain: nothing in this file calls the private {name}(): it may never run)"


def _bookkeeping(st: ast.stmt) -> bool:
    """A statement that cannot change the model's mode between ``model.train()`` and the ``no_grad`` block: a
    print or log call, or a name set to a constant (``num_iter = 0``)."""
    if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
        return (dotted(st.value.func) or "").split(".")[-1] in ("print", "info", "debug", "warning", "log")
    return isinstance(st, ast.Assign) and isinstance(st.value, ast.Constant)


def _feeds_training(fm: FunctionModel, fwd: Event) -> str:
    """A reason to think this gradient-free forward computes something training uses (an RL target, a memory bank,
    pseudo-labels) rather than an evaluation: the function's name or a name assigned in it says so; '' if not."""
    words = set(name_tokens(fm.name))
    words |= {t for a in fm.assigns for n in a.names for t in name_tokens(n)}
    hit = sorted(words & _TARGET_WORDS)
    if not hit or set(name_tokens(fm.name)) & _EVAL_WORDS:
        return ""
    return f" (uncertain: this may compute a training target or memory rather than evaluate ({hit[0]!r}))"


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
    return "built" if known or call is None or _weights_loaded_here(fm, fwd, made[-1].order) else "elsewhere"


def _weights_loaded_here(fm: FunctionModel, fwd: Event, after: int) -> bool:
    """``model = vgg19(); model.load_state_dict(torch.load(path))`` before the forward, in a function that does not
    train: the constructor of another module made a bare architecture whose trained weights this evaluation
    script loads (it is in train mode)."""
    if fm.kind_events(BACKWARD, STEP):
        return False
    line_from = next((getattr(a.node, "lineno", 0) for a in fm.assigns if a.order == after), 0)
    line_to = getattr(fwd.node, "lineno", 0)
    return any(isinstance(n, ast.Call) and call_name(n) == "load_state_dict" and isinstance(n.func, ast.Attribute)
               and dotted(n.func.value) == fwd.recv and line_from <= getattr(n, "lineno", 0) < line_to
               for n in fm.nodes)


def _pretrained_here(fm: FunctionModel, fwd: Event) -> bool:
    """A model made here by ``from_pretrained(...)`` (Hugging Face returns it in eval mode) and not switched back
    to train mode."""
    made = [a for a in fm.assigns if a.names == [fwd.recv] and a.op is None and a.order < fwd.order]
    if not made or not isinstance(made[-1].value, ast.Call):
        return False
    inner = R.innermost_call(made[-1].value) or made[-1].value
    return call_name(inner) == "from_pretrained" and call_name(made[-1].value) != "train"
