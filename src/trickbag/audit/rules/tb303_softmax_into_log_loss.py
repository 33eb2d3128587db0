"""TB303 softmax-into-log-loss: Softmax probabilities go where logits or log-probabilities belong.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TypeGuard, cast

from trickbag.audit import _roles as R
from trickbag.audit._ast import call_name, dotted, name_tokens, opposite_branches, walk, walk_no_defs
from trickbag.audit._flow import FileModel, FunctionModel
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []



# --------------------------------------------------------------------------- softmax into NLL losses
def _prob_models(file: FileModel) -> set[str]:
    """Names holding a model whose output is already a softmax (Sequential ending in Softmax, or an
    instance of a class of this file whose forward returns softmax(...) / sigmoid(...)).  When every
    model class of the file returns probabilities, a model argument (``def train(model, ...)``) not
    built here from another class is one of them: :data:`PROB_MODEL` stands for it."""
    returns_probs, classes = _probability_classes(file)
    items = _probability_items(file)
    out, others = set(), set()
    for fm in file.functions:
        for a in fm.assigns:
            call = R.innermost_call(a.value) if a.value is not None and a.op is None else None
            if call is None or len(a.names) != 1:
                continue
            last = file.imports.qualname(call.func).split(".")[-1]
            out |= {f"{a.names[0]}#{i}" for i in items.get(last, ())}  # ``pred, depth = model(x)``: pred
            if last in returns_probs or (last == "Sequential" and call.args and _is_softmax_call(call.args[-1])):
                out.add(a.names[0])
            elif R.role_by_constructor(a.value, file.imports, file.class_names) == R.MODEL \
                    and (fm.cls is None or fm.cls.name not in classes):  # not a layer of a model class
                others.add(a.names[0])
        out |= _sequential_filled_to_softmax(file, fm)
    if returns_probs and returns_probs == classes and not others:
        out.add(PROB_MODEL)
    return out


def _sequential_filled_to_softmax(file: FileModel, fm: FunctionModel) -> set[str]:
    """``model = nn.Sequential()`` then ``model.add_module(...)`` calls whose last adds a softmax."""
    empty = {a.names[0] for a in fm.assigns if a.op is None and len(a.names) == 1 and isinstance(a.value, ast.Call)
             and file.imports.qualname(a.value.func).split(".")[-1] == "Sequential" and not a.value.args}
    last: dict[str, ast.Call] = {}
    for node in fm.nodes:
        if isinstance(node, ast.Call) and call_name(node) == "add_module" and isinstance(node.func, ast.Attribute) \
                and dotted(node.func.value) in empty and len(node.args) == 2:
            name = dotted(node.func.value) or ""
            if name not in last or node.lineno > last[name].lineno:
                last[name] = node
    return {name for name, call in last.items() if _is_softmax_call(call.args[1])}


#: in :func:`_prob_models`: every model argument of the file outputs probabilities
PROB_MODEL = "<model argument>"


def _probability_classes(file: FileModel) -> tuple[set[str], set[str]]:
    """(classes whose forward returns probabilities on every path, classes with a forward)."""
    probs, classes = set(), set()
    for cls in file.classes.values():
        fm = file.methods.get((cls.name, "forward"))
        if fm is None:
            continue
        classes.add(cls.name)
        rets = [n for n in fm.nodes if isinstance(n, ast.Return) and n.value is not None]
        layers = _softmax_layers(file, cls.name)
        if rets and all(_softmaxed(fm, r.value, r.lineno, layers, sigmoid=True) for r in rets):
            probs.add(cls.name)
    return probs, classes


def _probability_items(file: FileModel) -> dict[str, set[int]]:
    """class -> the positions of the tuple its forward returns that hold probabilities on every path
    (``return torch.sigmoid(x), depth_map``: {0})."""
    out: dict[str, set[int]] = {}
    for cls in file.classes.values():
        fm = file.methods.get((cls.name, "forward"))
        rets = [n for n in fm.nodes if isinstance(n, ast.Return)] if fm is not None else []
        if not rets or not all(isinstance(r.value, ast.Tuple) for r in rets):
            continue
        sizes = {len(r.value.elts) for r in rets if isinstance(r.value, ast.Tuple)}
        layers = _softmax_layers(file, cls.name)
        if len(sizes) == 1 and fm is not None:
            found = {i for i in range(sizes.pop()) if all(
                isinstance(r.value, ast.Tuple) and _softmaxed(fm, r.value.elts[i], r.lineno, layers, sigmoid=True)
                for r in rets)}
            if found:
                out[cls.name] = found
    return out


def _softmax_layers(file: FileModel, cls: str) -> set[str]:
    """``self.head`` for ``self.head = nn.Sequential(..., nn.Softmax(dim=1))`` / ``self.act = nn.Softmax(1)``
    in the ``__init__`` of ``cls``."""
    init = file.methods.get((cls, "__init__"))
    out: set[str] = set()
    for a in init.assigns if init is not None else ():
        value = a.value if a.op is None and len(a.names) == 1 and a.names[0].startswith("self.") else None
        if not isinstance(value, ast.Call):
            continue
        seq = file.imports.qualname(value.func).split(".")[-1] == "Sequential" and value.args \
            and _is_softmax_call(value.args[-1])
        if seq or (call_name(value) == "Softmax" and not isinstance(value.func, ast.Call)):
            out.add(a.names[0])
    return out


def _is_softmax_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    name = call_name(node)
    if name in ("softmax", "Softmax"):
        return True
    return isinstance(node.func, ast.Call) and call_name(node.func) == "Softmax"


def _softmaxed(fm: FunctionModel, node: ast.AST | None, line: int, probs: set[str], depth: int = 0,
               sigmoid: bool = False) -> bool:
    if node is None or depth > 6:
        return False
    if _is_softmax_call(node) or (sigmoid and isinstance(node, ast.Call) and call_name(node) == "sigmoid"):
        return True
    if isinstance(node, ast.Call) and (dotted(node.func) in probs or _model_argument(fm, node, probs)
                                       or _own_forward(fm, node)):
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "forward" \
            and dotted(node.func.value) in probs - {PROB_MODEL}:
        return True  # ``model.forward(x)`` of a model that outputs probabilities
    if isinstance(node, ast.Call) and call_name(node) in _RESHAPES:  # p.view(-1, p.size(-1)), p.float()
        return _softmaxed(fm, _call_source(fm, node), line, probs, depth + 1, sigmoid)
    name = dotted(node)
    if name is None:
        return False
    assigns = [a for a in fm.assigns if name in a.names and a.value is not None and a.op is None
               and a.node.lineno <= line]  # type: ignore[attr-defined]  # Assignment.node: a statement here
    if assigns and len(assigns[-1].names) > 1 and isinstance(assigns[-1].value, ast.Call):
        callee = dotted(assigns[-1].value.func)  # ``pred, depth = model(x)`` with pred a probability output
        return f"{callee}#{assigns[-1].names.index(name)}" in probs
    return bool(assigns) and len(assigns[-1].names) == 1 and \
        _softmaxed(fm, assigns[-1].value, assigns[-1].node.lineno - 1,  # type: ignore[attr-defined]
                   probs, depth + 1, sigmoid)


#: calls that keep a tensor's values (probabilities stay probabilities through them)
_RESHAPES = {"view", "reshape", "flatten", "permute", "transpose", "contiguous", "float", "double", "half",
             "bfloat16", "to", "type_as", "squeeze", "unsqueeze", "view_as", "reshape_as", "movedim", "swapaxes",
             "swapdims", "clone", "cuda", "cpu", "t", "type"}


def _own_forward(fm: FunctionModel, call: ast.Call) -> bool:
    """``self(x)`` / ``self.forward(x)`` in a method of a model class whose forward returns probabilities."""
    if fm.cls is None or fm.name == "forward" or dotted(call.func) not in ("self", "self.forward"):
        return False
    return fm.cls.name in fm.file.memo("probability_classes", lambda: _probability_classes(fm.file)[0])


def _model_argument(fm: FunctionModel, call: ast.Call, probs: set[str]) -> bool:
    """``model(x)`` on a model argument when every model class of the file returns probabilities."""
    name = dotted(call.func)
    if PROB_MODEL not in probs or not name or name in probs or not (call.args or call.keywords):
        return False
    if name.startswith("self.") and fm.cls is not None and (fm.cls.name, "forward") in fm.file.methods:
        return False  # a layer of the model class itself (``self.linear(h)``), not a model
    return fm.role(name) == R.MODEL and fm.file.resolve(call, fm) is None and name not in fm.file.class_names


def _loss_kinds(file: FileModel) -> dict[str, str]:
    """criterion name -> 'ce' / 'nll' for ``criterion = nn.CrossEntropyLoss()`` & co., 'bce' for a loss that takes
    logits for a binary target (``nn.BCEWithLogitsLoss()``, a loss class of the file built on it)."""
    own = _logit_loss_classes(file)
    out = {}
    for fm in file.functions:
        for a in fm.assigns:
            call = R.innermost_call(a.value) if a.value is not None and a.op is None else None
            if call is not None and len(a.names) == 1:
                last = file.imports.qualname(call.func).split(".")[-1]
                if last in R.CE_LOSSES | R.NLL_LOSSES:
                    out[a.names[0]] = "ce" if last in R.CE_LOSSES else "nll"
                elif last in _LOGIT_BCE or last in own:
                    out[a.names[0]] = "bce"
        out.update(_default_losses(file, fm))
    return out


#: losses that apply the sigmoid themselves: they take logits
_LOGIT_BCE = {"binary_cross_entropy_with_logits", "BCEWithLogitsLoss", "sigmoid_focal_loss"}


def _logit_loss_classes(file: FileModel) -> set[str]:
    """Loss classes of the file whose ``forward`` hands its first input to a logits BCE (a focal loss written on
    ``F.binary_cross_entropy_with_logits(inputs, targets)``): they take logits too."""
    out = set()
    for cls in file.classes.values():
        fm = file.methods.get((cls.name, "forward"))
        args = getattr(fm.node, "args", None) if fm is not None else None
        params = [a.arg for a in args.args[1:]] if args is not None else []
        if fm is not None and params and any(
                isinstance(n, ast.Call) and call_name(n) in _LOGIT_BCE and n.args and dotted(n.args[0]) == params[0]
                for n in fm.nodes):
            out.add(cls.name)
    return out


def _default_losses(file: FileModel, fm: FunctionModel) -> dict[str, str]:
    """``def __init__(self, loss_func=nn.CrossEntropyLoss())``: the parameter, and ``self.loss_func = loss_func``
    stored from it, hold that loss."""
    node = fm.node
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return {}
    params = [*node.args.posonlyargs, *node.args.args]
    pairs = list(zip(params[len(params) - len(node.args.defaults):], node.args.defaults))
    pairs += [(a, d) for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults) if d is not None]
    out: dict[str, str] = {}
    for arg, default in pairs:
        last = file.imports.qualname(default.func).split(".")[-1] if isinstance(default, ast.Call) else ""
        if last in R.CE_LOSSES | R.NLL_LOSSES:
            out[arg.arg] = "ce" if last in R.CE_LOSSES else "nll"
    for a in fm.assigns if out else ():
        if a.op is None and len(a.names) == 1 and a.names[0].startswith("self.") and dotted(a.value) in out:
            out[a.names[0]] = out[dotted(a.value) or ""]
    return out


@rule("TB303", "softmax-into-log-loss", fix="pass logits to cross_entropy; log_softmax to nll_loss / kl_div")
def softmax_into_log_loss(file: FileModel) -> Iterator[Hit]:
    """Softmax probabilities go where logits or log-probabilities belong.

    A call of the file's own function or method named like a loss (``self.cross_entropy(probs)`` defined as an
    entropy ``-(x * log(x)).sum()``) that hands nothing to a torch loss is not a torch loss and is not reported.

    ``CrossEntropyLoss`` / ``F.cross_entropy`` apply ``log_softmax`` themselves: feeding them
    ``softmax`` output squashes the logits twice (gradients vanish, training stalls near chance).
    ``nll_loss`` and ``kl_div`` expect log-probabilities.  A hand-written cross-entropy needs
    ``log_softmax``: the log of softmax probabilities underflows to ``-inf``.  A hand-written NLL that
    picks the target's probability (``probs.gather(1, y[:, None])``, ``probs[range(n), y]``) and
    negates it with no log (``-picked.mean()``) is wrong: it minimises minus the probability, not
    its log — a different, badly conditioned objective.  ``-torch.log(probs.gather(1, y[:, None]))``
    is reported too: ``log`` of softmax probabilities underflows to ``-inf`` whether it is taken of
    ``softmax(...)`` itself, of a name holding them (``probs = F.softmax(logits, -1)`` then
    ``-(targets * torch.log(probs)).sum(-1)``) or of the target's picked probability (a hand-written
    focal loss's ``torch.log(pt)`` included); a name is reported when its log sits in a loss (under
    a minus, in ``loss = ...``, in the ``return`` of a loss function, in a loss call).  Entropy terms
    (``-(p * p.log()).sum()``) and logs of ``probs + eps`` are not reported, nor a log of softmax probabilities
    that is only printed or logged, with every local name computed from it (a script showing that
    ``torch.log(F.softmax(x))`` equals ``F.log_softmax(x)``): it reaches no loss.

    Probabilities stay probabilities through reshapes and casts: ``F.nll_loss(p.view(-1, p.size(-1)), y)``,
    ``reshape``, ``flatten``, ``permute``, ``transpose``, ``contiguous()``, ``float()``.

    A model class of the file whose forward ends in a softmax layer attribute (``self.head = nn.Sequential(...,
    nn.Softmax(dim=1))`` or ``self.act = nn.Softmax(1)``, applied last) outputs probabilities too, as does a
    ``nn.Sequential()`` filled by ``add_module`` calls whose last adds a softmax. The loss may be a criterion
    object, called or through ``.forward(...)``, including one given as a parameter's default
    (``def __init__(self, loss_func=nn.CrossEntropyLoss())``) and stored on ``self``.  Sigmoid probabilities passed
    to a loss that applies the sigmoid itself (``F.binary_cross_entropy_with_logits``, ``nn.BCEWithLogitsLoss``,
    torchvision's ``sigmoid_focal_loss``, or a loss class of the file whose ``forward`` hands its input to one of
    them) are reported too: the loss sees ``sigmoid(sigmoid(x))``, squashed into [0.5, 0.73], and its gradients
    vanish; so is the item of a model's tuple output that its ``forward`` returns through a sigmoid (``return
    torch.sigmoid(x), depth_map``, unpacked as ``pred, depth = model(x)``).  A softmax taken of softmax
    probabilities (``p = p.softmax(1)`` then ``torch.max(p.softmax(1), 1)``, or ``F.softmax(model(x))`` of a model
    that ends in a softmax) is reported too: the scores are squeezed towards uniform, so confidences, calibration
    and AUC computed from them are wrong.

    Wrong::

        probs = F.softmax(logits, dim=1)
        loss = F.cross_entropy(probs, targets)

    Right::

        loss = F.cross_entropy(logits, targets)
    """
    if not _mentions_probabilities(file):
        return
    probs, kinds = _prob_models(file), _loss_kinds(file)
    for fm in file.functions:
        lossy_function = bool(set(name_tokens(fm.name)) & _LOSS_WORDS)
        yield from _log_of_probabilities(fm, probs, kinds, lossy_function)
        for node in fm.nodes:
            if isinstance(node, ast.Call):
                yield from _check_loss_call(fm, node, probs, kinds)
                yield from _check_log_softmax(fm, node)
                yield from _check_double_softmax(fm, node, probs)
            elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
                yield from _check_handwritten(node.operand, node)
                if _picked_probabilities(fm, node.operand, node.lineno, probs) and not _a_cost(fm, node):
                    yield Hit(node, "hand-written NLL takes minus the softmax probability of the target, without "
                                    "its log; it needs log_softmax(x) (or F.cross_entropy on the logits)")
            elif _loss_statement(node, lossy_function) and not any(
                    isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub) and _softmax_product(n.operand)
                    for n in walk_no_defs(cast(ast.expr, node.value))):  # _loss_statement: a Return with a value
                yield from _check_handwritten(cast(ast.expr, node.value), node, needs_minus=True)


_PROBABILITY_NAMES = {"softmax", "Softmax", "sigmoid", "Sigmoid", "softmax_", "sigmoid_"}


def _mentions_probabilities(file: FileModel) -> bool:
    """Every shape this rule reports starts from a softmax (or sigmoid) somewhere in the file."""
    return any((isinstance(n, ast.Attribute) and n.attr in _PROBABILITY_NAMES)
               or (isinstance(n, ast.Name) and n.id in _PROBABILITY_NAMES)
               or (isinstance(n, ast.alias) and n.name.split(".")[-1] in _PROBABILITY_NAMES) for n in file.nodes)


_LOSS_WORDS = {"loss", "ce", "xent", "nll", "entropy", "crossentropy", "focal"}


def _loss_statement(node: ast.AST, lossy_function: bool) -> TypeGuard[ast.Return | ast.Assign]:
    """``loss = ...`` / ``ce = ...``, or a ``return`` in a function named like a loss."""
    if isinstance(node, ast.Return) and node.value is not None:
        return lossy_function
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        return bool(set(name_tokens(dotted(node.targets[0]) or "")) & _LOSS_WORDS)
    return False


_PICK = {"gather", "take_along_dim", "index_select"}
_KEEP = {"mean", "sum", "squeeze", "unsqueeze", "view", "reshape", "flatten", "float", "double", "clone",
         "contiguous", "to", "type_as"}


def _picked_probabilities(fm: FunctionModel, node: ast.AST | None, line: int, probs: set[str]) -> bool:
    """``probs.gather(1, y[:, None]).mean()``, ``torch.gather(probs, ...)``, ``probs[range(n), y]``:
    the target's softmax probability (through names, reshapes and reductions) with no log on the way."""
    for _ in range(12):
        if isinstance(node, ast.Call):
            name = call_name(node)
            if name not in _PICK | _KEEP:
                return False
            src = _call_source(fm, node)
            if name in _PICK:
                return src is not None and _softmaxed(fm, src, line, probs)
            node = src
        elif isinstance(node, ast.Subscript):
            labels = any(isinstance(n, (ast.Name, ast.Call)) for n in walk(node.slice))
            return labels and _softmaxed(fm, node.value, line, probs)
        elif dotted(node):
            assigns = [a for a in fm.assigns if a.names == [dotted(node)] and a.value is not None and a.op is None
                       and a.node.lineno <= line]  # type: ignore[attr-defined]
            if not assigns:
                return False
            node, line = assigns[-1].value, assigns[-1].node.lineno  # type: ignore[attr-defined]
        else:
            return False
    return False


#: names read as modules (``torch.mean(x)``) even where the snippet does not import them
_MODULE_NAMES = {"torch", "F", "np", "numpy"}


def _call_source(fm: FunctionModel, call: ast.Call) -> ast.AST | None:
    """The tensor a call works on: ``x`` in ``x.mean()`` and in ``torch.mean(x)``."""
    func = call.func
    if isinstance(func, ast.Attribute):
        base = dotted(func.value)
        if not base or base.split(".")[0] not in {*fm.file.imports.alias, *_MODULE_NAMES}:
            return func.value
    return call.args[0] if call.args else None


def _softmax_product(node: ast.AST) -> bool:
    """A product with ``softmax(x)`` on one side, unless the other side is ``x`` itself: ``softmax(logp) * logp``
    is ``p * log p`` when ``x`` holds log-probabilities (an entropy), and no cross-entropy with targets."""
    for n in walk_no_defs(node):
        if not (isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult)):
            continue
        for side, other in ((n.left, n.right), (n.right, n.left)):
            if _is_softmax_call(side) and not _softmax_of(side, other):
                return True
    return False


def _softmax_of(call: ast.AST, x: ast.AST) -> bool:
    """``call`` is the softmax of ``x``: ``F.softmax(x, dim)``, ``torch.softmax(x, dim)`` or ``x.softmax(dim)``."""
    if not isinstance(call, ast.Call):
        return False
    func = call.func
    if isinstance(func, ast.Attribute) and (dotted(func.value) or "").split(".")[-1] not in (
            "F", "torch", "functional", "nn"):
        src: ast.AST | None = func.value
    else:
        src = call.args[0] if call.args else None
    return src is not None and ast.dump(src) == ast.dump(x)


def _check_loss_call(fm: FunctionModel, call: ast.Call, probs: set[str], kinds: dict[str, str]) -> Iterator[Hit]:
    name = call_name(call)
    if name not in R.CE_LOSSES | R.NLL_LOSSES:  # ``from torch.nn.functional import nll_loss as nll``
        name = fm.file.imports.qualname(call.func).split(".")[-1] or name
    func = call.func.value if name == "forward" and isinstance(call.func, ast.Attribute) else call.func
    kind = "ce" if name in R.CE_LOSSES else "nll" if name in R.NLL_LOSSES else "bce" if name in _LOGIT_BCE \
        else kinds.get(dotted(func) or "")
    if isinstance(call.func, ast.Call) and call_name(call.func) in R.CE_LOSSES | R.NLL_LOSSES | _LOGIT_BCE:
        inner = call_name(call.func)
        kind = "ce" if inner in R.CE_LOSSES else "nll" if inner in R.NLL_LOSSES else "bce"
    if kind is None or (name in R.CE_LOSSES | R.NLL_LOSSES | _LOGIT_BCE and name[0].isupper()):
        return
    if _own_non_loss(fm, call):
        return
    arg = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "input"), None)
    if kind == "bce":
        if _softmaxed(fm, arg, call.lineno, probs, sigmoid=True):
            yield Hit(call, "sigmoid (or softmax) probabilities passed to a loss that takes logits (it applies the "
                            "sigmoid itself): the loss sees sigmoid(sigmoid(x)), squashed into [0.5, 0.73]")
        return
    if _softmaxed(fm, arg, call.lineno, probs):
        what = "cross-entropy applies log_softmax itself" if kind == "ce" else "this loss expects log-probabilities"
        yield Hit(call, f"softmax probabilities passed to a loss that takes logits/log-probabilities ({what})")


def _softmax_input(fm: FunctionModel, call: ast.Call) -> ast.AST | None:
    """What a softmax call normalises: ``F.softmax(x)`` / ``torch.softmax(x)`` / ``nn.Softmax(1)(x)`` -> ``x``,
    ``x.softmax(-1)`` -> ``x``; None for anything else."""
    if not _is_softmax_call(call) or call_name(call) == "Softmax":
        return None  # ``nn.Softmax(dim=1)`` builds the layer
    qual = fm.file.imports.qualname(call.func)
    if isinstance(call.func, ast.Attribute) and not qual.startswith(("torch.", "scipy.")) \
            and dotted(call.func.value) not in _MODULE_NAMES:
        return call.func.value
    return call.args[0] if call.args else next((k.value for k in call.keywords if k.arg in ("input", "x")), None)


def _other_branch(fm: FunctionModel, arg: ast.AST, call: ast.Call) -> bool:
    """The softmax that made ``arg`` (its last assignment) sits in the other branch of an ``if`` than ``call``
    (``if fp16: w = softmax(w, dtype=float32) else: w = softmax(w)``): only one of them runs."""
    node: ast.AST | None = arg
    for _ in range(8):  # ``w[:, 1:].float()`` -> ``w``
        if isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call):
            node = _call_source(fm, node)
        else:
            break
    name = dotted(node)
    if name is None:
        return False
    made = [n for n in fm.nodes if isinstance(n, ast.Assign) and n.lineno < call.lineno
            and any(dotted(t.value if isinstance(t, ast.Subscript) else t) == name for t in n.targets)]
    return bool(made) and opposite_branches(fm.nodes, max(made, key=lambda n: n.lineno), call)


def _check_double_softmax(fm: FunctionModel, call: ast.Call, probs: set[str]) -> Iterator[Hit]:
    arg = _softmax_input(fm, call)
    if arg is not None and _softmaxed(fm, arg, call.lineno - 1, probs) and not _other_branch(fm, arg, call):
        yield Hit(call, "softmax applied to softmax probabilities: they are already normalised, and a second softmax "
                        "flattens them towards uniform (confidences, calibration and AUC computed from it are wrong)")


def _own_non_loss(fm: FunctionModel, call: ast.Call) -> bool:
    """The call runs the file's own function or method named like a loss (``self.cross_entropy(probs)`` with
    ``def cross_entropy(self, x): return -(x * torch.log(x + eps)).sum(-1)``: an entropy of probabilities) that does
    not hand its input to a torch loss: not ``nn.CrossEntropyLoss``."""
    own = fm.file.resolve(call, fm) if isinstance(call.func, (ast.Name, ast.Attribute)) else None
    if own is None or getattr(own.node, "name", None) != call_name(call):
        return False
    return not any(isinstance(n, ast.Call) and call_name(n) in R.CE_LOSSES | R.NLL_LOSSES for n in walk(own.node))


def _check_log_softmax(fm: FunctionModel, call: ast.Call) -> Iterator[Hit]:
    if call_name(call) != "log":
        return
    arg = call.args[0] if call.args else (call.func.value if isinstance(call.func, ast.Attribute) else None)
    if arg is not None and _is_softmax_call(arg) and not _only_printed(fm, call):
        # log of a stored ``p`` may be an entropy or a focal term
        yield Hit(call, "log(softmax(x)) underflows to -inf; use log_softmax(x)")


#: calls that only show a value: what flows into them reaches no loss
_SHOW = {"print", "pprint", "info", "debug", "warning", "write", "format", "add_scalar", "add_histogram", "str",
         "repr"}


def _only_printed(fm: FunctionModel, log: ast.Call) -> bool:
    """The value of ``log`` (and every local name computed from it) is printed or logged and used nowhere else: no
    backward, ``return``, stored attribute or other call (a log never used is no evidence) — a demonstration
    (``print(torch.log(F.softmax(x)))`` next to ``F.log_softmax(x)``), not a loss."""
    parents = fm.file.memo(f"parents:{id(fm)}", lambda: {id(c): n for n in walk_no_defs(fm.node)
                                                         for c in ast.iter_child_nodes(n)})
    todo: list[ast.AST] = [log]
    seen: set[str] = set()
    shown = False
    while todo:
        node = todo.pop()
        child, up = node, parents.get(id(node))
        while up is not None and not isinstance(up, ast.stmt):
            if isinstance(up, ast.Call) and call_name(up) in _SHOW and child is not up.func:
                shown = True
                break
            child, up = up, parents.get(id(up))
        else:
            if not isinstance(up, (ast.Assign, ast.AnnAssign)) or child is not up.value:
                return False
            targets = up.targets if isinstance(up, ast.Assign) else [up.target]
            if not all(isinstance(t, ast.Name) for t in targets):
                return False
            for name in {cast(ast.Name, t).id for t in targets} - seen:
                seen.add(name)
                todo.extend(n for n in fm.nodes if isinstance(n, ast.Name) and n.id == name
                            and isinstance(n.ctx, ast.Load) and n.lineno >= up.lineno)
    return shown


def _log_of_probabilities(fm: FunctionModel, probs: set[str], kinds: dict[str, str], lossy: bool) -> Iterator[Hit]:
    """``torch.log(probs)`` / ``p.gather(1, y[:, None]).log()`` of softmax probabilities held in a name, in
    a loss (or assigned to a name a loss uses); ``log(softmax(x))`` itself is :func:`_check_log_softmax`'s."""
    contexts = _loss_contexts(fm, lossy, kinds)
    inside = {id(n) for c in contexts for n in walk_no_defs(c)}
    used = {d for c in contexts for d in _names_in(c)}
    entropy = _entropy_logs(fm)
    for node, targets in _log_calls(fm):
        arg = _call_source(fm, node)
        if arg is None or _is_softmax_call(arg) or id(node) in entropy \
                or not (id(node) in inside or targets & used) or _clamped_log(fm, node) or _only_printed(fm, node):
            continue
        if _softmaxed(fm, arg, node.lineno, probs) or _picked_probabilities(fm, arg, node.lineno, probs):
            text = ast.unparse(arg)
            text = text if len(text) <= 30 else text[:27] + "..."
            yield Hit(node, f"log({text}) of softmax probabilities underflows to -inf; use log_softmax(x)")


def _a_cost(fm: FunctionModel, node: ast.AST) -> bool:
    """``cost_class = -out_prob[:, tgt_ids]``: minus a probability assigned to a matching cost or score (a
    Hungarian matcher's), not to a loss."""
    table = fm.file.memo("assigned_words", dict)
    if id(fm) not in table:
        table[id(fm)] = {id(n): {w for t in st.targets for w in name_tokens(dotted(t) or "")}
                         for st in fm.nodes if isinstance(st, ast.Assign) for n in walk_no_defs(st.value)}
    return bool(table[id(fm)].get(id(node), set()) & _COST_WORDS)


def _clamped_log(fm: FunctionModel, node: ast.Call) -> bool:
    """``log(p, eps)`` with a floor (a second argument), or a local ``log`` helper that adds one or clamps
    (``def log(t, eps=1e-20): return torch.log(t + eps)``): no -inf."""
    if len(node.args) > 1 or node.keywords:
        return True
    helper = fm.file.resolve(node, fm)
    return helper is not None and any(
        isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add) or isinstance(n, ast.Call)
        and call_name(n) in ("clamp", "clamp_min", "clip", "maximum") for n in helper.nodes)


_COST_WORDS = {"cost", "costs", "score", "scores", "match", "matching", "sim", "similarity", "dist", "distance"}


def _names_in(node: ast.AST) -> set[str]:
    return {d for n in walk_no_defs(node) if isinstance(n, (ast.Name, ast.Attribute)) and (d := dotted(n))}


def _log_calls(fm: FunctionModel) -> Iterator[tuple[ast.Call, set[str]]]:
    """Every ``log`` call of ``fm`` with the names its statement assigns it to (``logp = torch.log(p)``)."""
    assigned: dict[int, set[str]] = {}
    for st in fm.nodes:
        if isinstance(st, (ast.Assign, ast.AnnAssign)) and st.value is not None:
            targets = st.targets if isinstance(st, ast.Assign) else [st.target]
            names = {d for t in targets if (d := dotted(t))}
            for n in walk_no_defs(st.value):
                assigned[id(n)] = names
    for n in fm.nodes:
        if isinstance(n, ast.Call) and call_name(n) == "log":
            yield n, assigned.get(id(n), set())


def _loss_contexts(fm: FunctionModel, lossy: bool, kinds: dict[str, str]) -> list[ast.AST]:
    """Expressions that compute a loss: negations, ``loss = ...`` / ``loss += ...``, a loss function's
    ``return``, the arguments of a loss call."""
    out: list[ast.AST] = []
    for n in fm.nodes:
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            out.append(n.operand)
        elif _loss_statement(n, lossy) or (isinstance(n, ast.AugAssign)
                                           and set(name_tokens(dotted(n.target) or "")) & _LOSS_WORDS):
            out.append(cast(ast.expr, n.value))  # _loss_statement: a Return with a value
        elif isinstance(n, ast.Call) and (call_name(n) in R.LOSS_FUNCTIONS or dotted(n.func) in kinds):
            out.extend([*n.args, *(k.value for k in n.keywords)])
    return out


def _entropy_logs(fm: FunctionModel) -> set[int]:
    """ids of the ``log(p)`` calls of entropy terms: ``p * torch.log(p)``, ``probs * probs.log()``."""
    out = set()
    for n in fm.nodes:
        if not (isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult)):
            continue
        for side, other in ((n.left, n.right), (n.right, n.left)):
            for c in walk_no_defs(side):
                if isinstance(c, ast.Call) and call_name(c) == "log":
                    arg = _call_source(fm, c)
                    if arg is not None and ast.dump(arg) == ast.dump(other):
                        out.add(id(c))
    return out


def _check_handwritten(expr: ast.AST, where: ast.AST, needs_minus: bool = False) -> Iterator[Hit]:
    """``-(targets * softmax(x)).sum()``: a cross-entropy without its log."""
    if any(isinstance(n, ast.Call) and call_name(n) in ("log", "log_softmax", "logsumexp", "log2", "log1p")
           for n in walk_no_defs(expr)):
        return
    if needs_minus and not any(isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub) for n in walk_no_defs(expr)):
        return
    if _softmax_product(expr):
        yield Hit(where, "hand-written cross-entropy multiplies by softmax(x); it needs log_softmax(x)")
