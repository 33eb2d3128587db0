"""TB301 param-group-key: An optimizer param-group dict has its tensors under a key other than ``'params'``, or a

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TypeGuard

from trickbag.audit import _roles as R
from trickbag.audit._ast import call_name, dotted, edit_distance, name_tokens, walk
from trickbag.audit._flow import FileModel, FunctionModel
from trickbag.audit._project import project_root
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


def _param_group_dicts(file: FileModel) -> Iterator[tuple[ast.Dict | ast.Call, str]]:
    """(dict, whose keys) for the dict literals and ``dict(...)`` calls used as optimizer param groups: in the
    optimizer call, in a list built before it (``groups = [...]``, ``groups.append({...})``), or anywhere they
    look like one.  Whose keys: ``'torch'`` (a torch.optim optimizer), ``'own'`` (an optimizer with
    hyper-parameters of its own: a class of the file, or of another package), ``''`` (not known)."""
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
            owner = _optimizer_family(file, node)
            for d in _group_nodes(fm, first):
                if id(d) not in seen:
                    seen.add(id(d))
                    yield d, owner
    loose = "" if _own_optimizers(file) else "torch"
    for node in file.nodes:
        if (isinstance(node, ast.Dict) or _dict_call(node)) and id(node) not in seen and _looks_like_group(node):
            yield node, loose


def _holds_optimizers(d: ast.Dict | ast.Call) -> bool:
    """``{"pretrained": opt_a, "new": opt_b}``: a table of optimizers (or schedulers), not a param group."""
    values = [v for _, _, v in _keys(d)]
    return bool(values) and all(isinstance(v, (ast.Name, ast.Attribute)) and (
        R.role_by_name(dotted(v)) in (R.OPTIMIZER, R.SCHEDULER)
        or (name_tokens((dotted(v) or "").split(".")[-1]) or [""])[-1] in _OPTIMIZER_WORDS) for v in values)


_OPTIMIZER_WORDS = {"optimizer", "optimiser", "optim", "opt", "scheduler", "sched"}


def _own_optimizers(file: FileModel) -> bool:
    """The file defines an optimizer class or builds an optimizer that is not torch's."""
    return file.memo("own_optimizers", lambda: any(
        any((dotted(b) or "").split(".")[-1] == "Optimizer" for b in c.bases) for c in file.classes.values())
        or any(isinstance(n, ast.Call) and R.role_by_constructor(n, file.imports, file.class_names) == R.OPTIMIZER
               and _optimizer_family(file, n) == "own" for n in file.nodes))


_TORCH_OPTIMIZERS = {"SGD", "Adam", "AdamW", "Adamax", "Adagrad", "Adadelta", "RMSprop", "Rprop", "LBFGS", "NAdam",
                     "RAdam", "SparseAdam", "ASGD", "Muon"}


def _optimizer_family(file: FileModel, call: ast.Call) -> str:
    """``'torch'`` for ``torch.optim.AdamW(...)`` (or ``add_param_group`` / an imported torch optimizer), ``'own'`` for
    an optimizer class of the file or of another package (its own hyper-parameter names: ``epsilon``, ``beta3``),
    ``''`` when unknown."""
    if call_name(call) == "add_param_group":
        return "torch"
    qual = file.imports.qualname(R.innermost_call(call) or call)
    module, _, last = qual.rpartition(".")
    if last in file.class_names:
        return "own"
    if qual.startswith("torch.optim.") or (last in _TORCH_OPTIMIZERS and module in ("", "optim", "torch.optim")):
        return "torch"
    return "own"


def _dict_call(node: ast.AST | None) -> TypeGuard[ast.Call]:
    """``dict(params=..., lr=...)`` (keywords only)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" \
        and not node.args


def _group_nodes(fm: FunctionModel, expr: ast.AST | None, hops: int = 0) -> Iterator[ast.Dict | ast.Call]:
    """The dicts an optimizer's ``params`` argument is made of, following names to the lists assigned
    (or appended) to them — in the function, the enclosing ones, the module, and for ``self.groups``
    the class's methods — and local helpers to what they return (3 hops at most)."""
    todo: list[ast.AST | None] = [expr]
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
        elif hops < 3 and isinstance(node, (ast.Name, ast.Attribute)) and (name := dotted(node)):
            for scope, value in _assigned_values(fm, name):
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


def _keys(d: ast.Dict | ast.Call) -> list[tuple[str, ast.AST, ast.AST]]:
    """(key, key node, value) of a dict literal's string keys or a ``dict(...)`` call's keywords."""
    if isinstance(d, ast.Call):
        return [(k.arg, k, k.value) for k in d.keywords if k.arg]
    return [
        (k.value, k, v) for k, v in zip(d.keys, d.values) if isinstance(k, ast.Constant) and isinstance(k.value, str)
    ]


def _n_keys(d: ast.Dict | ast.Call) -> int:
    return len(d.keywords) if isinstance(d, ast.Call) else len(d.keys)


def _holds_parameters(value: ast.AST) -> bool:
    for n in walk(value):
        if isinstance(n, ast.Call) and call_name(n) in {"parameters", "named_parameters"}:
            return True
        if isinstance(n, (ast.Name, ast.Attribute)) and (dotted(n) or "").split(".")[-1] in _PARAM_WORDS:
            return True
    return False


def _keys_read_back(file: FileModel) -> set[str]:
    """String keys this file reads from a dict: ``g["k"]`` (loaded), ``g.get("k")``, ``"k" in g``."""
    def find() -> set[str]:
        out = set()
        for n in file.nodes:
            if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load) and isinstance(n.slice, ast.Constant):
                out.add(n.slice.value)
            elif isinstance(n, ast.Call) and call_name(n) in ("get", "pop", "setdefault") and n.args \
                    and isinstance(n.args[0], ast.Constant):
                out.add(n.args[0].value)
            elif isinstance(n, ast.Compare) and isinstance(n.left, ast.Constant) \
                    and any(isinstance(o, (ast.In, ast.NotIn)) for o in n.ops):
                out.add(n.left.value)
        return {k for k in out if isinstance(k, str)}
    return file.memo("tb301_read_back", find)


@functools.lru_cache(maxsize=64)
def _project_texts(root: Path) -> tuple[str, ...]:
    out: list[str] = []
    for p in root.rglob("*.py"):
        if any(part in (".venv", "venv", "site-packages", "node_modules", ".git", "tests", "test") for part in p.parts):
            continue
        if len(out) > 3000:
            break
        try:
            out.append(p.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
    return tuple(out)


_BUILDS_GROUP = re.compile(r"""["']params["']\s*:""")


def _read_in_project(file: FileModel, key: str) -> str:
    """Why a group without 'params' may be meant: another module of the project reads the key back from a group
    (``group["named_params"]``, ``.get("named_params")``) and builds groups with 'params' itself: an optimizer
    wrapper of the project that turns it into 'params' (nanotron's ``NamedOptimizer``).  Test folders are not
    read."""
    root = project_root(file.path)
    if root is None:
        return ""
    q = re.escape(key)
    read = re.compile(rf"""\[\s*["']{q}["']\s*\]|\.(get|pop)\(\s*["']{q}["']|["']{q}["']\s+(not\s+)?in\b""")
    for p_text in _project_texts(root):
        if read.search(p_text) and _BUILDS_GROUP.search(p_text):
            return (f" (uncertain: a module of this project reads {key!r} back from the group: a wrapper of its own "
                    "may turn it into 'params')")
    return ""


def _literal(value: ast.AST) -> bool:
    """A constant, or a list / tuple holding a string (``["complexity.params", "params (M)", fn]``): no tensors."""
    if isinstance(value, (ast.List, ast.Tuple)):
        return any(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts)
    return isinstance(value, ast.Constant)


def _looks_like_group(d: ast.Dict | ast.Call) -> bool:
    keys = {k for k, _, _ in _keys(d)}
    if "params" in keys and len(keys) > 1:
        # a table of labels that happens to have a 'params' entry (a sweep's metric names) holds no tensors
        return not any(k == "params" and _literal(v) for k, _, v in _keys(d))
    return bool(keys & {"lr", "weight_decay"}) and any(_holds_parameters(v) for _, _, v in _keys(d))


@rule(
    "TB301",
    "param-group-key",
    fix="name the tensors 'params' and use torch's hyper-parameter keys (lr, weight_decay, ...)",
)
def param_group_key(file: FileModel) -> Iterator[Hit]:
    """An optimizer param-group dict has its tensors under a key other than ``'params'``, or a
    misspelled hyper-parameter key.

    A key the same file reads back from a group (``if group["fix_lr"]: ...``, ``group.get("fix_lr")``,
    ``"fix_lr" in group``) is the program's own key, not a typo.  Hyper-parameter typos are checked against
    torch.optim's names for torch's optimizers only: an optimizer class of the file or of another package has
    names of its own (``epsilon``, ``beta3``).  A group dict whose optimizer is not in sight gives a
    low-confidence typo finding.

    ``torch.optim`` reads the tensors of a group from ``'params'`` only (``{'model': ...}`` or
    ``{'parameters': ...}`` fails or trains nothing) and keeps unknown keys silently: a group with
    ``'learning_rate'`` or ``'wd'`` uses the optimizer's default ``lr`` / ``weight_decay``.  The
    groups are checked where they are written: in the optimizer call, in a list built before it
    (``groups = [...]``, ``groups.append({...})``, ``self.groups``, a local helper that returns
    them), as dict literals or as ``dict(params=..., lr=...)``.

    A dict of optimizers (``{"pretrained": opt_a, "new": opt_b}``) is no param group.

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
    for d, owner in _param_group_dicts(file):
        keys = _keys(d)
        if not keys or len(keys) != _n_keys(d) or _holds_optimizers(d):
            continue
        names = {k for k, _, _ in keys}
        if "params" not in names:
            bad = next(((k, node) for k, node, v in keys if k not in _HYPER and _holds_parameters(v)), None) \
                or next(((k, node) for k, node, _ in keys if k not in _HYPER), None)
            if bad:
                why = _read_in_project(file, bad[0])
                yield Hit(bad[1], f"param group holds its tensors under {bad[0]!r}; torch.optim reads 'params'{why}",
                          confidence="low" if why else "high")
            continue
        if owner == "own":
            continue  # an optimizer with hyper-parameter names of its own (``epsilon``, ``beta3``): not typos
        read = _keys_read_back(file)
        for k, node, _ in keys:
            if k in read:
                continue  # the file's own key, read back from the group (``if group["fix_lr"]: ...``)
            meant = _HYPER_TYPOS.get(k) or next((h for h in _HYPER if k not in _HYPER and len(k) > 3
                                                 and edit_distance(k, h) <= 2), None)
            if meant and k not in _HYPER:
                yield Hit(node, f"param-group key {k!r} is ignored by torch.optim (did you mean {meant!r}?)",
                          confidence="high" if owner == "torch" else "low")
