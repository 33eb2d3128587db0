"""Lint rules on torch API misuse that fails silently: param-group keys, misspelled attributes,
probabilities fed to log-probability losses, a warm-up that starts at zero (codes TB3xx)."""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Iterator

from trickbag.audit import _roles as R
from trickbag.audit._ast import call_name, dotted, edit_distance, name_tokens, walk_no_defs
from trickbag.audit._flow import FileModel, FunctionModel, _returned_nested
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []

_HYPER = {"lr", "weight_decay", "momentum", "dampening", "nesterov", "betas", "eps", "amsgrad", "alpha",
          "initial_lr", "foreach", "maximize", "capturable", "differentiable", "fused", "centered", "lambd",
          "t0", "rho", "decoupled_weight_decay", "momentum_decay", "lr_decay", "initial_accumulator_value",
          "max_iter", "history_size", "line_search_fn", "tolerance_grad", "tolerance_change", "max_eval",
          "etas", "step_sizes", "adaptive", "weight_decouple", "max_lr", "min_lr"}
_HYPER_TYPOS = {"learning_rate": "lr", "learningrate": "lr", "lr_rate": "lr", "wd": "weight_decay",
                "decay": "weight_decay", "beta": "betas", "epsilon": "eps", "momentun": "momentum"}
_PARAM_WORDS = {"parameters", "named_parameters", "params", "param"}


def _param_group_dicts(file: FileModel) -> Iterator[ast.AST]:
    """Dict literals and ``dict(...)`` calls used as optimizer param groups: in the optimizer call, in
    a list built before it (``groups = [...]``, ``groups.append({...})``), or anywhere they look like one."""
    seen: set[int] = set()
    for fm in file.functions:
        for node in fm.nodes:
            if not isinstance(node, ast.Call):
                continue
            is_opt = R.role_by_constructor(node, file.imports, file.class_names) == R.OPTIMIZER \
                or call_name(node) == "add_param_group"
            first = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "params"), None)
            if not is_opt or first is None:
                continue
            for d in _group_nodes(fm, first):
                if id(d) not in seen:
                    seen.add(id(d))
                    yield d
    for node in file.nodes:
        if (isinstance(node, ast.Dict) or _dict_call(node)) and id(node) not in seen and _looks_like_group(node):
            yield node


def _dict_call(node: ast.AST) -> bool:
    """``dict(params=..., lr=...)`` (keywords only)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" \
        and not node.args


def _group_nodes(fm: FunctionModel, expr: ast.AST | None, hops: int = 0) -> Iterator[ast.AST]:
    """The dicts an optimizer's ``params`` argument is made of, following names to the lists assigned
    (or appended) to them — in the function, the enclosing ones, the module, and for ``self.groups``
    the class's methods — and local helpers to what they return (3 hops at most)."""
    todo = [expr]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Dict) or _dict_call(node):
            yield node
        elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            todo += node.elts
        elif isinstance(node, (ast.ListComp, ast.GeneratorExp)):
            todo.append(node.elt)
        elif isinstance(node, ast.Starred):
            todo.append(node.value)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            todo += [node.left, node.right]
        elif hops < 3 and isinstance(node, (ast.Name, ast.Attribute)) and dotted(node):
            for scope, value in _assigned_values(fm, dotted(node)):
                yield from _group_nodes(scope, value, hops + 1)
        elif hops < 3 and isinstance(node, ast.Call) and (helper := fm.file.resolve(node, fm)) is not None:
            for ret in (n for n in helper.nodes if isinstance(n, ast.Return) and n.value is not None):
                yield from _group_nodes(helper, ret.value, hops + 1)


def _assigned_values(fm: FunctionModel, name: str) -> Iterator[tuple[FunctionModel, ast.AST]]:
    scopes: list[FunctionModel] = []
    scope: FunctionModel | None = fm
    while scope is not None:
        scopes.append(scope)
        scope = scope.parent
    if name.startswith("self.") and fm.cls is not None:
        scopes += [m for (cls, _), m in fm.file.methods.items() if cls == fm.cls.name and m not in scopes]
    if fm.file.module not in scopes:
        scopes.append(fm.file.module)
    for sc in scopes:
        for a in sc.assigns:
            if a.names == [name] and a.value is not None and (a.op is None or isinstance(a.op, ast.Add)):
                yield sc, a.value


def _keys(d: ast.AST) -> list[tuple[str, ast.AST, ast.AST]]:
    """(key, key node, value) of a dict literal's string keys or a ``dict(...)`` call's keywords."""
    if isinstance(d, ast.Call):
        return [(k.arg, k, k.value) for k in d.keywords if k.arg]
    return [
        (k.value, k, v) for k, v in zip(d.keys, d.values) if isinstance(k, ast.Constant) and isinstance(k.value, str)
    ]


def _n_keys(d: ast.AST) -> int:
    return len(d.keywords) if isinstance(d, ast.Call) else len(d.keys)


def _holds_parameters(value: ast.AST) -> bool:
    for n in ast.walk(value):
        if isinstance(n, ast.Call) and call_name(n) in {"parameters", "named_parameters"}:
            return True
        if isinstance(n, (ast.Name, ast.Attribute)) and (dotted(n) or "").split(".")[-1] in _PARAM_WORDS:
            return True
    return False


def _looks_like_group(d: ast.AST) -> bool:
    keys = {k for k, _, _ in _keys(d)}
    if "params" in keys and len(keys) > 1:
        return True
    return bool(keys & {"lr", "weight_decay"}) and any(_holds_parameters(v) for _, _, v in _keys(d))


@rule(
    "TB301",
    "param-group-key",
    fix="name the tensors 'params' and use torch's hyper-parameter keys (lr, weight_decay, ...)",
)
def param_group_key(file: FileModel) -> Iterator[Hit]:
    """An optimizer param-group dict has its tensors under a key other than ``'params'``, or a
    misspelled hyper-parameter key.

    ``torch.optim`` reads the tensors of a group from ``'params'`` only (``{'model': ...}`` or
    ``{'parameters': ...}`` fails or trains nothing) and keeps unknown keys silently: a group with
    ``'learning_rate'`` or ``'wd'`` uses the optimizer's default ``lr`` / ``weight_decay``.  The
    groups are checked where they are written: in the optimizer call, in a list built before it
    (``groups = [...]``, ``groups.append({...})``, ``self.groups``, a local helper that returns
    them), as dict literals or as ``dict(params=..., lr=...)``.

    Wrong::

        optimizer = torch.optim.AdamW([
            {"parameters": model.backbone.parameters(), "lr": 1e-4},
            {"params": model.head.parameters(), "learning_rate": 1e-3},
        ])

    Right::

        optimizer = torch.optim.AdamW([
            {"params": model.backbone.parameters(), "lr": 1e-4},
            {"params": model.head.parameters(), "lr": 1e-3},
        ])
    """
    for d in _param_group_dicts(file):
        keys = _keys(d)
        if not keys or len(keys) != _n_keys(d):
            continue
        names = {k for k, _, _ in keys}
        if "params" not in names:
            bad = next(((k, node) for k, node, v in keys if k not in _HYPER and _holds_parameters(v)), None) \
                or next(((k, node) for k, node, _ in keys if k not in _HYPER), None)
            if bad:
                yield Hit(bad[1], f"param group holds its tensors under {bad[0]!r}; torch.optim reads 'params'")
            continue
        for k, node, _ in keys:
            meant = _HYPER_TYPOS.get(k) or next((h for h in _HYPER if k not in _HYPER and len(k) > 3
                                                 and edit_distance(k, h) <= 2), None)
            if meant and k not in _HYPER:
                yield Hit(node, f"param-group key {k!r} is ignored by torch.optim (did you mean {meant!r}?)")


_TYPO_TARGETS = {"requires_grad": {"requires_gradient", "require_gradient", "requires_grad_"},
                 "training": set()}
_CUDNN = {"benchmark", "deterministic", "enabled", "allow_tf32", "benchmark_limit"}
_MODULE_ITERS = {"modules", "children", "named_modules", "named_children"}


def _module_loop_var(fm: FunctionModel, name: str) -> bool:
    for a in fm.assigns:
        if isinstance(a.node, (ast.For, ast.AsyncFor)) and a.names and a.names[-1] == name:
            it = a.node.iter
            if isinstance(it, ast.Call) and call_name(it) in _MODULE_ITERS:
                return True
    return False


_REAL_ATTRS = {"require_backward_grad_sync", "require_forward_param_sync", "requires_grad"}


def _typo_message(fm: FunctionModel, base: str, attr: str) -> str | None:
    if attr == "requires_grad_" or (attr not in _REAL_ATTRS and (
            attr in _TYPO_TARGETS["requires_grad"] or edit_distance(attr, "requires_grad") <= 2
            or (attr.startswith("req") and "grad" in attr and len(attr) <= len("requires_gradient")))):
        return f"'.{attr}' is not 'requires_grad': the assignment creates a new attribute and freezes nothing"
    if attr == "requires_grad" and (fm.role(base) == R.MODEL or _module_loop_var(fm, base)):
        return (f"an nn.Module has no 'requires_grad': '{base}.requires_grad = ...' freezes nothing "
                f"(use {base}.requires_grad_(False))")
    if fm.file.imports.resolve(base).split(".")[-1] == "cudnn" and attr not in _CUDNN:
        near = next((c for c in _CUDNN if edit_distance(attr, c) <= 2), None)
        if near:
            return f"'cudnn.{attr}' is not a cuDNN flag (did you mean 'cudnn.{near}'?): nothing is set"
    if attr != "training" and edit_distance(attr, "training") <= 2 and len(attr) > 6 and fm.role(base) == R.MODEL:
        return f"'.{attr}' is not 'training': use {base}.train() / {base}.eval()"
    return None


@rule(
    "TB302",
    "misspelled-attribute",
    fix="spell the attribute exactly (p.requires_grad = False / model.requires_grad_(False))",
)
def misspelled_attribute(file: FileModel) -> Iterator[Hit]:
    """An assignment to a misspelled torch attribute silently creates a new attribute.

    Python objects accept any attribute: ``p.required_grad = False`` (or ``requires_gard``,
    ``require_grad``) stores a new, unused attribute and the parameter keeps training;
    ``model.requires_grad = False`` does the same on a module (modules have ``requires_grad_()``);
    ``torch.backends.cudnn.benchmarks = True`` sets nothing.  ``setattr(p, "requires_grads", False)`` with a
    constant name is the same assignment.

    Wrong::

        for p in model.backbone.parameters():
            p.required_grad = False

    Right::

        for p in model.backbone.parameters():
            p.requires_grad = False
    """
    for fm in file.functions:
        for a in fm.assigns:
            if not isinstance(a.node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                continue
            for name in a.names:
                base, _, attr = name.rpartition(".")
                msg = _typo_message(fm, base, attr) if base else None
                if msg:
                    yield Hit(a.node, msg)
        for call, base, attr in _setattr_calls(fm):
            msg = _typo_message(fm, base, attr)
            if msg:
                yield Hit(call, msg)


def _setattr_calls(fm: FunctionModel) -> Iterator[tuple[ast.Call, str, str]]:
    """``setattr(p, "requires_grads", False)`` with a constant name, in ``fm`` (lambdas included)."""
    todo = list(fm.body())
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "setattr" \
                and len(n.args) == 3 and isinstance(n.args[1], ast.Constant) and isinstance(n.args[1].value, str):
            base = dotted(n.args[0])
            if base:
                yield n, base, n.args[1].value
        todo.extend(c for c in ast.iter_child_nodes(n)
                    if not isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))


# --------------------------------------------------------------------------- softmax into NLL losses
def _prob_models(file: FileModel) -> set[str]:
    """Names holding a model whose output is already a softmax (Sequential ending in Softmax, or an
    instance of a class of this file whose forward returns softmax(...) / sigmoid(...)).  When every
    model class of the file returns probabilities, a model argument (``def train(model, ...)``) not
    built here from another class is one of them: :data:`PROB_MODEL` stands for it."""
    returns_probs, classes = _probability_classes(file)
    out, others = set(), set()
    for fm in file.functions:
        for a in fm.assigns:
            call = R.innermost_call(a.value) if a.value is not None and a.op is None else None
            if call is None or len(a.names) != 1:
                continue
            last = file.imports.qualname(call.func).split(".")[-1]
            if last in returns_probs or (last == "Sequential" and call.args and _is_softmax_call(call.args[-1])):
                out.add(a.names[0])
            elif R.role_by_constructor(a.value, file.imports, file.class_names) == R.MODEL \
                    and (fm.cls is None or fm.cls.name not in classes):  # not a layer of a model class
                others.add(a.names[0])
    if returns_probs and returns_probs == classes and not others:
        out.add(PROB_MODEL)
    return out


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
    if isinstance(node, ast.Call) and call_name(node) in _RESHAPES:  # p.view(-1, p.size(-1)), p.float()
        return _softmaxed(fm, _call_source(fm, node), line, probs, depth + 1, sigmoid)
    name = dotted(node)
    if name is None:
        return False
    assigns = [a for a in fm.assigns if name in a.names and a.value is not None and a.op is None
               and a.node.lineno <= line]
    return bool(assigns) and len(assigns[-1].names) == 1 and \
        _softmaxed(fm, assigns[-1].value, assigns[-1].node.lineno - 1, probs, depth + 1, sigmoid)


#: calls that keep a tensor's values (probabilities stay probabilities through them)
_RESHAPES = {"view", "reshape", "flatten", "permute", "transpose", "contiguous", "float", "double", "half",
             "bfloat16", "to", "type_as", "squeeze", "unsqueeze", "view_as", "reshape_as", "movedim", "swapaxes",
             "swapdims", "clone", "cuda", "cpu", "t"}


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
    """criterion name -> 'ce' / 'nll' for ``criterion = nn.CrossEntropyLoss()`` & co."""
    out = {}
    for fm in file.functions:
        for a in fm.assigns:
            call = R.innermost_call(a.value) if a.value is not None and a.op is None else None
            if call is not None and len(a.names) == 1:
                last = file.imports.qualname(call.func).split(".")[-1]
                if last in R.CE_LOSSES | R.NLL_LOSSES:
                    out[a.names[0]] = "ce" if last in R.CE_LOSSES else "nll"
    return out


@rule("TB303", "softmax-into-log-loss", fix="pass logits to cross_entropy; log_softmax to nll_loss / kl_div")
def softmax_into_log_loss(file: FileModel) -> Iterator[Hit]:
    """Softmax probabilities go where logits or log-probabilities belong.

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
    (``-(p * p.log()).sum()``) and logs of ``probs + eps`` are not reported.

    Probabilities stay probabilities through reshapes and casts: ``F.nll_loss(p.view(-1, p.size(-1)), y)``,
    ``reshape``, ``flatten``, ``permute``, ``transpose``, ``contiguous()``, ``float()``.

    A model class of the file whose forward ends in a softmax layer attribute (``self.head = nn.Sequential(...,
    nn.Softmax(dim=1))`` or ``self.act = nn.Softmax(1)``, applied last) outputs probabilities too.

    Wrong::

        probs = F.softmax(logits, dim=1)
        loss = F.cross_entropy(probs, targets)

    Right::

        loss = F.cross_entropy(logits, targets)
    """
    probs, kinds = _prob_models(file), _loss_kinds(file)
    for fm in file.functions:
        lossy_function = bool(set(name_tokens(fm.name)) & _LOSS_WORDS)
        yield from _log_of_probabilities(fm, probs, kinds, lossy_function)
        for node in fm.nodes:
            if isinstance(node, ast.Call):
                yield from _check_loss_call(fm, node, probs, kinds)
                yield from _check_log_softmax(fm, node)
            elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
                yield from _check_handwritten(node.operand, node)
                if _picked_probabilities(fm, node.operand, node.lineno, probs):
                    yield Hit(node, "hand-written NLL takes minus the softmax probability of the target, without "
                                    "its log; it needs log_softmax(x) (or F.cross_entropy on the logits)")
            elif _loss_statement(node, lossy_function) and not any(
                    isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub) and _softmax_product(n.operand)
                    for n in walk_no_defs(node.value)):
                yield from _check_handwritten(node.value, node, needs_minus=True)


_LOSS_WORDS = {"loss", "ce", "xent", "nll", "entropy", "crossentropy", "focal"}


def _loss_statement(node: ast.AST, lossy_function: bool) -> bool:
    """``loss = ...`` / ``ce = ...``, or a ``return`` in a function named like a loss."""
    if isinstance(node, ast.Return) and node.value is not None:
        return lossy_function
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        return bool(set(name_tokens(dotted(node.targets[0]) or "")) & _LOSS_WORDS)
    return False


_PICK = {"gather", "take_along_dim", "index_select"}
_KEEP = {"mean", "sum", "squeeze", "unsqueeze", "view", "reshape", "flatten", "float", "double", "clone",
         "contiguous", "to", "type_as"}


def _picked_probabilities(fm: FunctionModel, node: ast.AST, line: int, probs: set[str]) -> bool:
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
            labels = any(isinstance(n, (ast.Name, ast.Call)) for n in ast.walk(node.slice))
            return labels and _softmaxed(fm, node.value, line, probs)
        elif dotted(node):
            assigns = [a for a in fm.assigns if a.names == [dotted(node)] and a.value is not None and a.op is None
                       and a.node.lineno <= line]
            if not assigns:
                return False
            node, line = assigns[-1].value, assigns[-1].node.lineno
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
    return any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult)
               and (_is_softmax_call(n.left) or _is_softmax_call(n.right)) for n in walk_no_defs(node))


def _check_loss_call(fm: FunctionModel, call: ast.Call, probs: set[str], kinds: dict[str, str]) -> Iterator[Hit]:
    name = call_name(call)
    if name not in R.CE_LOSSES | R.NLL_LOSSES:  # ``from torch.nn.functional import nll_loss as nll``
        name = fm.file.imports.qualname(call.func).split(".")[-1] or name
    kind = "ce" if name in R.CE_LOSSES else "nll" if name in R.NLL_LOSSES else kinds.get(dotted(call.func) or "")
    if isinstance(call.func, ast.Call) and call_name(call.func) in R.CE_LOSSES | R.NLL_LOSSES:
        kind = "ce" if call_name(call.func) in R.CE_LOSSES else "nll"
    if kind is None or (name in R.CE_LOSSES | R.NLL_LOSSES and name[0].isupper()):
        return
    arg = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "input"), None)
    if _softmaxed(fm, arg, call.lineno, probs):
        what = "cross-entropy applies log_softmax itself" if kind == "ce" else "this loss expects log-probabilities"
        yield Hit(call, f"softmax probabilities passed to a loss that takes logits/log-probabilities ({what})")


def _check_log_softmax(fm: FunctionModel, call: ast.Call) -> Iterator[Hit]:
    if call_name(call) != "log":
        return
    arg = call.args[0] if call.args else (call.func.value if isinstance(call.func, ast.Attribute) else None)
    if arg is not None and _is_softmax_call(arg):  # log of a stored ``p`` may be an entropy or a focal term
        yield Hit(call, "log(softmax(x)) underflows to -inf; use log_softmax(x)")


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
                or not (id(node) in inside or targets & used):
            continue
        if _softmaxed(fm, arg, node.lineno, probs) or _picked_probabilities(fm, arg, node.lineno, probs):
            text = ast.unparse(arg)
            text = text if len(text) <= 30 else text[:27] + "..."
            yield Hit(node, f"log({text}) of softmax probabilities underflows to -inf; use log_softmax(x)")


def _names_in(node: ast.AST) -> set[str]:
    return {dotted(n) for n in walk_no_defs(node) if isinstance(n, (ast.Name, ast.Attribute)) and dotted(n)}


def _log_calls(fm: FunctionModel) -> Iterator[tuple[ast.Call, set[str]]]:
    """Every ``log`` call of ``fm`` with the names its statement assigns it to (``logp = torch.log(p)``)."""
    assigned: dict[int, set[str]] = {}
    for st in fm.nodes:
        if isinstance(st, (ast.Assign, ast.AnnAssign)) and st.value is not None:
            targets = st.targets if isinstance(st, ast.Assign) else [st.target]
            names = {dotted(t) for t in targets if dotted(t)}
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
            out.append(n.value)
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


# --------------------------------------------------------------------------- warm-up that starts at 0
class _Positive:
    """An unknown value assumed > 0 (``warmup_steps``, ``args.warmup``)."""


POS = _Positive()
Value = float | _Positive | None


def _num(v: Value) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


_ARITH = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
          ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}


def _pos(v: Value) -> bool:
    return v is POS or (_num(v) and v > 0)


def _binop(op: ast.operator, a: Value, b: Value) -> Value:
    """``a op b`` where either side may be a positive unknown; None when the sign is unknown."""
    if a is None or b is None:
        return None
    if _num(a) and _num(b):
        try:
            return float(_ARITH[type(op)](a, b))
        except (KeyError, ArithmeticError):
            return None
    a_zero, b_zero = _num(a) and a == 0, _num(b) and b == 0
    if isinstance(op, (ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)) and a_zero and _pos(b):
        return 0.0
    if isinstance(op, ast.Mult) and b_zero:
        return 0.0
    if isinstance(op, (ast.Add, ast.Sub)) and b_zero:
        return a
    if isinstance(op, ast.Add):
        return b if a_zero else POS if _pos(a) and _pos(b) else None
    if isinstance(op, (ast.Mult, ast.Div)) and _pos(a) and _pos(b):
        return POS
    if isinstance(op, ast.Pow) and _pos(a) and (_num(b) or b is POS):
        return POS  # a positive base to any real power: ``d_model ** -0.5``
    return None


def _compare(op: ast.cmpop, a: Value, b: Value) -> bool | None:
    if _num(a) and _num(b):
        return {ast.Lt: a < b, ast.LtE: a <= b, ast.Gt: a > b, ast.GtE: a >= b, ast.Eq: a == b,
                ast.NotEq: a != b}.get(type(op))
    if _num(a) and a <= 0 and b is POS:
        return {ast.Lt: True, ast.LtE: True, ast.Gt: False, ast.GtE: False, ast.Eq: False, ast.NotEq: True}.get(
            type(op)
        )
    if a is POS and _num(b) and b <= 0:
        return {ast.Lt: False, ast.LtE: False, ast.Gt: True, ast.GtE: True, ast.Eq: False, ast.NotEq: True}.get(
            type(op)
        )
    return None


def _value(node: ast.AST, env: dict[str, Value], depth: int = 0) -> Value:
    """The value of ``node`` when the step argument is 0 (numbers, POS, or None when unknown; None too
    beyond 100 levels of nesting)."""
    if depth > 100:
        return None
    if isinstance(node, ast.Constant):
        return float(node.value) if _num(node.value) else None
    if isinstance(node, ast.Name):
        return env.get(node.id, POS)
    if isinstance(node, ast.Attribute):
        return POS
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):  # ``-0.5`` in ``d_model ** -0.5``
        v = _value(node.operand, env, depth + 1)
        return -v if _num(v) else None
    if isinstance(node, ast.BinOp):
        return _binop(node.op, _value(node.left, env, depth + 1), _value(node.right, env, depth + 1))
    if isinstance(node, ast.IfExp):
        test = _truth(node.test, env, depth + 1)
        return None if test is None else _value(node.body if test else node.orelse, env, depth + 1)
    if isinstance(node, ast.Call):
        return _call_value(node, env, depth + 1)
    return None


def _call_value(node: ast.Call, env: dict[str, Value], depth: int = 0) -> Value:
    name = call_name(node)
    args = [_value(a, env, depth) for a in node.args]
    if name == "float" and len(args) == 1:
        return args[0]
    if name in ("min", "max") and args and not node.keywords:
        nums = [a for a in args if _num(a)]
        if name == "min" and any(a == 0 for a in nums) and all(_nonneg(n, env, depth) for n in node.args):
            return 0.0  # min(0, anything >= 0), e.g. ``min(step / warmup, 0.5 * (1 + cos(...)))``
        if None in args:
            return None
        if name == "min":
            return min(nums) if len(nums) == len(args) else (POS if all(a is POS or a > 0 for a in args) else None)
        if any(a is POS or a > 0 for a in args):
            return max(nums) if len(nums) == len(args) else POS
        return max(nums) if nums else None
    return None


_BOUNDED = {"cos", "sin", "tanh"}  # |f(x)| <= 1
_NONNEG_CALLS = {"exp", "sqrt", "abs", "fabs", "float"}


def _bound(node: ast.AST, env: dict[str, Value], depth: int) -> float | None:
    """A bound on ``abs(node)``: ``cos(x)`` -> 1, ``0.5 * cos(x)`` -> 0.5; None when unbounded or unknown."""
    if isinstance(node, ast.Call) and call_name(node) in _BOUNDED:
        return 1.0
    v = _value(node, env, depth + 1)
    if _num(v):
        return abs(v)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Add, ast.Sub)):
        a, b = _bound(node.left, env, depth + 1), _bound(node.right, env, depth + 1)
        if a is not None and b is not None:
            return a * b if isinstance(node.op, ast.Mult) else a + b
    return None


def _nonneg(node: ast.AST, env: dict[str, Value], depth: int = 0) -> bool:
    """Is ``node`` provably >= 0 at step 0: numbers >= 0, positive unknowns, ``exp``/``sqrt``/``abs``, squares,
    ``c + cos(x)`` with c >= 1 (a cosine decay), and sums, products and quotients of such."""
    v = _value(node, env, depth + 1)
    if v is POS or (_num(v) and v >= 0) or depth > 50:
        return v is not None and depth <= 50
    if isinstance(node, ast.Call):
        name, args = call_name(node), node.args
        if name in _NONNEG_CALLS and len(args) == 1:
            return name != "float" or _nonneg(args[0], env, depth + 1)
        return name in ("max", "min") and bool(args) and (any if name == "max" else all)(
            _nonneg(a, env, depth + 1) for a in args)
    if isinstance(node, ast.IfExp):
        return _nonneg(node.body, env, depth + 1) and _nonneg(node.orelse, env, depth + 1)
    if not isinstance(node, ast.BinOp):
        return False
    left, right = node.left, node.right
    if isinstance(node.op, ast.Pow):
        return (isinstance(right, ast.Constant) and right.value in (2, 2.0)) or _nonneg(left, env, depth + 1)
    if isinstance(node.op, (ast.Add, ast.Sub)):
        lv, b = _value(left, env, depth + 1), _bound(right, env, depth)
        if _num(lv) and b is not None and lv >= b:
            return True  # ``1 + cos(x)``, ``1 - 0.5 * cos(x)``
    if isinstance(node.op, (ast.Add, ast.Mult, ast.Div)):
        return _nonneg(left, env, depth + 1) and _nonneg(right, env, depth + 1)
    return False


def _truth(test: ast.AST, env: dict[str, Value], depth: int = 0) -> bool | None:
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        return _compare(test.ops[0], _value(test.left, env, depth), _value(test.comparators[0], env, depth))
    return None


def _run_body(body: list[ast.stmt], env: dict[str, Value]) -> tuple[Value, ast.AST | None]:
    """Run a small lr_lambda body at step 0: (returned value, the return statement)."""
    for st in body:
        if isinstance(st, ast.Return) and st.value is not None:
            return _value(st.value, env), st
        if isinstance(st, ast.If):
            truth = _truth(st.test, env)
            if truth is None:
                return None, None
            value, ret = _run_body(st.body if truth else st.orelse, env)
            if ret is not None or value is not None:
                return value, ret
        elif isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
            env = {**env, st.targets[0].id: _value(st.value, env)}
        elif not isinstance(st, (ast.Expr, ast.Pass)):
            return None, None
    return None, None


def _constants(fm: FunctionModel) -> dict[str, Value]:
    env: dict[str, Value] = {}
    for scope in (fm.file.module, fm):
        for a in scope.assigns:
            if len(a.names) == 1 and a.value is not None and a.op is None:
                v = _value(a.value, env)
                env[a.names[0]] = v if _num(v) else POS
    return env


def _lambdas(fm: FunctionModel, node: ast.AST) -> Iterator[ast.AST]:
    if isinstance(node, (ast.List, ast.Tuple)):
        for e in node.elts:
            yield from _lambdas(fm, e)
    elif isinstance(node, ast.Lambda):
        yield node
    elif isinstance(node, ast.Call) and _is_partial(fm, node):  # ``partial(_lr_lambda, num_warmup_steps=500)``
        if len(node.args) == 1:  # keyword-bound only: the step is still the first positional parameter
            yield from _lambdas(fm, node.args[0])
    elif isinstance(node, ast.Call) and (product := _factory_function(fm, node)) is not None:
        yield product  # ``noam(cfg)`` returning its nested ``def f(step)`` (or a lambda)
    elif isinstance(node, ast.Call):  # ``LinearWarmup(warmup)``: an instance of a class with ``__call__``
        cls = fm.file.imports.qualname(node.func).split(".")[-1]
        method = fm.file.methods.get((cls, "__call__")) if cls in fm.file.classes else None
        if method is not None:
            yield method.node
    elif isinstance(node, ast.Attribute) and dotted(node) == f"self.{node.attr}" and fm.cls is not None:
        method = fm.file.methods.get((fm.cls.name, node.attr))  # a bound method: ``LambdaLR(opt, self._factor)``
        if method is not None:
            yield method.node
    elif isinstance(node, ast.Name):
        helper = fm.nested.get(node.id) or fm.file.top.get(node.id)
        if helper is not None:
            yield helper.node
        for a in fm.assigns + fm.file.module.assigns:
            if node.id in a.names and isinstance(a.value, ast.Lambda):
                yield a.value
            elif a.names == [node.id] and isinstance(a.value, ast.Call) and a.op is None:
                yield from _lambdas(fm, a.value)


def _factory_function(fm: FunctionModel, call: ast.Call) -> ast.AST | None:
    """The function a local factory call returns: its nested def returned by name, or a returned lambda."""
    factory = fm.file.resolve(call, fm)
    if factory is None:
        return None
    nested = _returned_nested(factory)
    if nested is not None:
        return nested.node
    return next((n.value for n in factory.nodes if isinstance(n, ast.Return) and isinstance(n.value, ast.Lambda)),
                None)


def _is_partial(fm: FunctionModel, call: ast.Call) -> bool:
    return call_name(call) == "partial" and fm.file.imports.qualname(call.func) in ("functools.partial", "partial")


@rule("TB304", "warmup-starts-at-zero", fix="make the factor non-zero at step 0, e.g. (step + 1) / warmup_steps")
def warmup_starts_at_zero(file: FileModel) -> Iterator[Hit]:
    """A warm-up ``LambdaLR`` whose factor is 0 at step 0.

    ``LambdaLR`` sets the learning rate to ``base_lr * lr_lambda(step)`` starting with step 0.  With
    ``lambda step: step / warmup`` the first update is done with learning rate 0 (a wasted step;
    with Adam the moment estimates still absorb that batch), and a one-step warm-up never trains.

    The factor may be a lambda, a function, or an instance of a class of the file with a ``__call__`` method
    (``LambdaLR(opt, LinearWarmup(warmup))``), or ``functools.partial(fn, warmup=...)`` binding keywords only
    (the Hugging Face ``get_*_schedule_with_warmup`` shape), or what a factory of the file returns
    (``LambdaLR(opt, noam(cfg))`` where ``noam`` returns its nested ``def f(step)`` or a lambda), or a bound
    method of the class (``LambdaLR(self.opt, self._factor)``, ``self`` skipped).

    ``min(step / warmup, decay)`` is 0 too when the decay is provably >= 0 (``0.5 * (1 + cos(...))``,
    ``exp(...)``, a square), and so is 0 scaled by a positive factor (the Noam schedule
    ``d_model ** -0.5 * min(step ** -0.5 if step > 0 else 0.0, step * warmup ** -1.5)``).

    Wrong::

        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, step / warmup_steps))

    Right::

        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / warmup_steps))
    """
    for fm in file.functions:
        for call in (n for n in fm.nodes if isinstance(n, ast.Call) and "LambdaLR" in
                     (call_name(n), file.imports.qualname(n.func).split(".")[-1])):
            fn = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords
                                                                 if k.arg == "lr_lambda"), None)
            for lam in (_lambdas(fm, fn) if fn is not None else ()):
                hit = _zero_at_start(fm, lam)
                if hit is not None:
                    yield Hit(hit, "the warm-up factor is 0 at step 0: the first update uses learning rate 0")


def _zero_at_start(fm: FunctionModel, lam: ast.AST) -> ast.AST | None:
    args = lam.args.posonlyargs + lam.args.args
    if args and not isinstance(lam, ast.Lambda) and args[0].arg in ("self", "cls"):
        args = args[1:]
    if not args:
        return None
    env = {**_constants(fm), args[0].arg: 0.0}
    if isinstance(lam, ast.Lambda):
        value, where = _value(lam.body, env), lam
    else:
        value, where = _run_body(lam.body, env)
    return where if _num(value) and math.isclose(value, 0.0, abs_tol=0.0) else None
