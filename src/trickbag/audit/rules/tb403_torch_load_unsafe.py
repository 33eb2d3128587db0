"""TB403 torch-load-unsafe: ``torch.load`` unpickles a file that may come from someone else.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from trickbag.audit._ast import call_name, const_value, dotted, walk
from trickbag.audit._flow import FileModel, FunctionModel
from trickbag.audit._project import OLD_TORCH
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []



_OUTSIDE = {"args", "argv", "opt", "opts", "flags", "input", "url", "urls", "download", "hub", "hf_hub_download",
            "cached_path", "urlopen", "requests", "environ", "getenv"}


def _from_outside(node: ast.AST | None) -> bool:
    """A path that comes from outside the program: a command-line argument (``args.ckpt``, ``sys.argv[1]``),
    ``input()``, an environment variable, a download or a URL."""
    if node is None:
        return False
    for n in walk(node):
        if isinstance(n, ast.Name) and n.id in _OUTSIDE:
            return True
        if isinstance(n, ast.Attribute) and n.attr in _OUTSIDE:
            return True
        if isinstance(n, ast.Call) and any(w in call_name(n).lower() for w in ("download", "urlopen", "input")):
            return True
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.startswith(("http://", "https://")):
            return True
    return False


def _names(node: ast.AST | None) -> set[str]:
    return {n.id for n in walk(node) if isinstance(n, ast.Name)} if node is not None else set()


def _parameters_around(file: FileModel) -> dict[int, set[str]]:
    """id(call) -> the parameters of the function the call is in: a path a function receives comes from its
    caller (``load(checkpoint_path)`` in a library's API is the user's file)."""
    out: dict[int, set[str]] = {}
    for fm in file.functions:
        args = getattr(fm.node, "args", None)
        if not isinstance(args, ast.arguments):
            continue
        names = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs} - {"self", "cls"}
        for n in fm.nodes:
            if isinstance(n, ast.Call):
                out[id(n)] = names
    return out


def _own_file(node: ast.AST | None) -> bool:
    """A path the program names itself: a literal (``"weights/resnet101.pt"``), or built from one
    (``f"{run_dir}/last.pt"``, ``os.path.join(cache_dir, "labels.cache")``, ``run_dir / "last.pt"``)."""
    if node is None or _from_outside(node):
        return False
    return any(isinstance(n, ast.Constant) and isinstance(n.value, str) for n in walk(node))


_SAVES = {"save", "save_checkpoint", "save_model", "save_state", "save_network", "save_networks"}
_FOLDER = re.compile(r"^[\w.-]+/")
_PATH_MODULES = {"os", "os.path", "osp", "path", "pathlib", "Path", "str"}


def _roots(fm: FunctionModel, node: ast.AST | None, depth: int = 0) -> set[str]:
    """Where a path is made from: the dotted names in it (``args.checkpoint_path``, ``opt.save_dir``) and the
    leading folder of each literal (``"saved_models/%s/G_%d.pth"`` -> ``saved_models/``), following the names
    assigned in the same function (two levels)."""
    if node is None:
        return set()
    if isinstance(node, ast.Attribute):
        d = dotted(node)
        return {d} if d else _roots(fm, node.value, depth)
    if isinstance(node, ast.Constant):
        m = _FOLDER.match(node.value) if isinstance(node.value, str) else None
        return {m.group(0)} if m else set()
    if isinstance(node, ast.Name):
        if depth >= 2:
            return set()
        values = [a.value for a in fm.assigns if a.names == [node.id] and a.op is None and a.value is not None]
        return {r for v in values for r in _roots(fm, v, depth + 1)}
    if isinstance(node, ast.Call):
        parts = [*node.args, *(k.value for k in node.keywords)]
        if isinstance(node.func, ast.Attribute) and dotted(node.func.value) not in _PATH_MODULES:
            parts.append(node.func.value)
        return {r for p in parts for r in _roots(fm, p, depth)}
    return {r for c in ast.iter_child_nodes(node) for r in _roots(fm, c, depth)}


def _save_paths(fm: FunctionModel) -> list[ast.AST]:
    """The path arguments of a function's saves: ``torch.save(obj, PATH)``, ``save_checkpoint(PATH, obj)`` ..."""
    out: list[ast.AST] = []
    for n in fm.nodes:
        if isinstance(n, ast.Call) and call_name(n) in _SAVES:
            args = n.args[1:2] if fm.file.imports.qualname(n.func) == "torch.save" else n.args
            out += list(args) + [k.value for k in n.keywords if k.arg in ("f", "path", "filepath", "filename")]
    return out


def _own_save(fm: FunctionModel | None, path: ast.AST | None) -> str:
    """Why the loaded file is probably the program's own checkpoint, or '': its path is made from the same
    folder or argument as a path the same function (or module body) saves to."""
    if path is None or fm is None:
        return ""
    shared = _roots(fm, path) & {r for p in _save_paths(fm) for r in _roots(fm, p)}
    if shared:
        return f" (uncertain: the path is made from {sorted(shared)[0]!r}, where this code saves its own checkpoints)"
    return ""


@rule("TB403", "torch-load-unsafe", fix="torch.load(path, map_location=..., weights_only=True)", severity="warning")
def torch_load_unsafe(file: FileModel) -> Iterator[Hit]:
    """``torch.load`` unpickles a file that may come from someone else.

    A checkpoint is a pickle: loading a downloaded file with ``weights_only=False`` runs whatever code
    it contains.  ``weights_only=True`` loads tensors and plain containers only; it is the default from
    torch 2.6.  Reported by default only where the code shows the risk: no ``weights_only`` in a project
    whose packaging files (pyproject.toml, requirements*.txt, setup.py ...) allow a torch older than 2.6,
    on a path the program does not name itself (not a literal, nor built from one: ``run_dir / "last.pt"``
    is the program's own file), or ``weights_only=False`` on a path that comes from outside the program
    (a command-line argument, ``sys.argv``, an environment variable, a download or a URL).  The other
    calls are low-confidence advisories (``--all``): without a version pin a fresh install is current
    torch, and an explicit ``weights_only=False`` on the program's own checkpoint is the user's stated
    choice.  A path made from the same folder or argument as a path the same function saves to
    (``"saved_models/%s/G_%d.pth"`` both loaded and saved, ``scan_checkpoint(args.checkpoint_path)`` beside
    ``torch.save(..., f"{args.checkpoint_path}/g_...")``) is the program's own checkpoint: low confidence, with
    that reason.  The torch version is read from requirements files, pyproject.toml, setup.py, setup.cfg and
    environment.yml (conda pins ``pytorch=1.7.1`` too).  A ``functools.partial(torch.load, ...)`` is reported
    where the partial is made.

    Wrong::

        state = torch.load(args.checkpoint, map_location="cpu", weights_only=False)

    Right::

        state = torch.load(args.checkpoint, map_location="cpu", weights_only=True)
    """
    params = _parameters_around(file)
    owners = {id(n): fm for fm in file.functions for n in fm.nodes if isinstance(n, ast.Call)}
    for node in file.nodes:
        if not isinstance(node, ast.Call):
            continue
        what = file.imports.qualname(node.func)
        path = node.args[0] if node.args else None
        if what in ("functools.partial", "functools.partialmethod") and node.args \
                and file.imports.qualname(node.args[0]) == "torch.load":
            what, path = "partial(torch.load)", node.args[1] if len(node.args) > 1 else None
        elif what != "torch.load":
            continue
        kw = {k.arg: k.value for k in node.keywords}
        if None in kw:
            continue
        path = path if path is not None else kw.get("f")
        if "weights_only" not in kw:
            sure = "high" if file.torch_support == OLD_TORCH and not _own_file(path) else "low"
            why = _own_save(owners.get(id(node)), path) if sure == "high" else ""
            yield Hit(node, f"{what} without weights_only=True unpickles (and can run) arbitrary code on torch < 2.6"
                            f"{why}", confidence="low" if why else sure)
        elif const_value(kw["weights_only"]) is False:
            given = _from_outside(path) or bool(_names(path) & params.get(id(node), set()))
            sure = "high" if given else "low"
            yield Hit(node, f"{what}(weights_only=False) unpickles (and can run) arbitrary code"
                            f"{' from a path given from outside' if sure == 'high' else ''}; "
                            "load a state_dict with weights_only=True", confidence=sure)
