"""TB402 cuda-visible-devices-late: ``CUDA_VISIBLE_DEVICES`` is set after CUDA was initialised.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TypeGuard

from trickbag.audit._ast import call_name, const_value, dotted, opposite_branches, str_const, walk
from trickbag.audit._env_facts import env_call_keys, is_environ
from trickbag.audit._flow import FileModel, FunctionModel
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []



_LAZY_CUDA = {"manual_seed", "manual_seed_all", "seed", "seed_all", "amp", "nvtx", "is_initialized"}


def _cuda_names(fm: FunctionModel) -> set[str]:
    """Names holding a CUDA device: ``dev = "cuda:0"``, ``device = torch.device("cuda")``."""
    out = set()
    for scope in (fm.file.module, fm):
        for a in scope.assigns:
            value = a.value.args[0] if isinstance(a.value, ast.Call) and call_name(a.value) == "device" \
                and a.value.args else a.value
            if len(a.names) == 1 and (str_const(value) or "").startswith("cuda"):
                out.add(a.names[0])
    return out


def _cuda_init(node: ast.AST, file: FileModel, devices: frozenset = frozenset()) -> TypeGuard[ast.Call]:
    """A call that initialises CUDA: ``.cuda()``, ``torch.cuda.*()``, a tensor made on/moved to 'cuda'."""
    if not isinstance(node, ast.Call):
        return False
    if call_name(node) == "to" and node.args and dotted(node.args[0]) in devices:
        return True
    qual = file.imports.qualname(node.func)
    if qual.startswith("torch.cuda."):
        return qual.split(".")[2] not in _LAZY_CUDA
    name = call_name(node)
    if name == "cuda" and isinstance(node.func, ast.Attribute):
        return True
    if name == "device":
        return False
    cuda_str = [a for a in list(node.args) + [k.value for k in node.keywords if k.arg in (None, "device")]
                if (str_const(a) or "").startswith("cuda")]
    return bool(cuda_str) and (name == "to" or any(k.arg == "device" for k in node.keywords))


def _helper_inits_cuda(node: ast.AST, fm: FunctionModel, file: FileModel, depth: int = 0) -> TypeGuard[ast.Call]:
    """A call of a function of this file that touches CUDA (``gpu = freest_gpu()`` calling
    ``torch.cuda.mem_get_info``), through its own local calls too; not a helper that sets
    CUDA_VISIBLE_DEVICES itself."""
    helper = file.resolve(node, fm) if isinstance(node, ast.Call) and depth < 4 else None
    if helper is None or helper is fm:
        return False
    table = file.memo("helper_inits_cuda", dict)
    if id(helper) not in table:
        table[id(helper)] = False  # in progress: a recursive call does not count
        devices = frozenset(_cuda_names(helper))
        table[id(helper)] = not any(_visible_devices_writes(helper, file)) and any(
            _cuda_init(n, file, devices) or _helper_inits_cuda(n, helper, file, depth + 1) for n in helper.nodes)
    return table[id(helper)]


def _visible_devices_writes(fm: FunctionModel, file: FileModel) -> Iterator[ast.Subscript | ast.Call]:
    """The nodes of ``fm`` that set CUDA_VISIBLE_DEVICES (``os.environ[...] =``, ``setdefault``, ``update``)."""
    for node in fm.nodes:
        if (
            isinstance(node, ast.Subscript)
            and is_environ(node.value, file)
            and isinstance(node.ctx, ast.Store)
            and const_value(node.slice) == "CUDA_VISIBLE_DEVICES"
            or isinstance(node, ast.Call)
            and any(key == "CUDA_VISIBLE_DEVICES" and write for key, _, write in env_call_keys(node, file))
        ):
            yield node


def _counts_devices_on_one_branch(fm: FunctionModel, node: ast.AST) -> bool:
    """``torch.cuda.device_count()`` on one branch only (``if args.gpu == 'all': ... range(device_count())``, ``n =
    device_count() if args.ngpu is None else args.ngpu``): there every device is made visible anyway (no change),
    and the other branch sets the variable before any CUDA call."""
    if not (isinstance(node, ast.Call) and call_name(node) == "device_count"):
        return False
    for n in fm.nodes:
        sides: list[list[ast.AST]]
        if isinstance(n, ast.If):
            sides = [list(n.body), list(n.orelse)]
        elif isinstance(n, ast.IfExp):
            sides = [[n.body], [n.orelse]]
        else:
            continue
        inside = [any(node is x for st in side for x in walk(st)) for side in sides]
        if any(inside) and not all(inside):
            return True
    return False


@rule(
    "TB402",
    "cuda-visible-devices-late",
    fix="set CUDA_VISIBLE_DEVICES before anything touches CUDA (first lines, or the shell)",
)
def cuda_visible_devices_late(file: FileModel) -> Iterator[Hit]:
    """``CUDA_VISIBLE_DEVICES`` is set after CUDA was initialised.

    The CUDA driver reads the variable once, when CUDA is first used (``torch.cuda.is_available()``,
    ``.cuda()``, a tensor on ``"cuda"``).  Setting it afterwards changes nothing: the process keeps
    seeing every GPU and usually lands on GPU 0.  ``torch.cuda.device_count()`` on one branch only (``n =
    device_count() if args.ngpu is None else args.ngpu``, then every device up to ``n`` made visible) changes
    nothing there, and the other branch sets the variable before any CUDA call: not reported.  Nor is a write in one
    branch of an ``if`` whose other branch holds the CUDA call (``if len(gpu_ids) > 1: model.cuda() ... else:
    os.environ["CUDA_VISIBLE_DEVICES"] = ...``): one run takes one of them.

    Wrong::

        device = "cuda" if torch.cuda.is_available() else "cpu"
        os.environ["CUDA_VISIBLE_DEVICES"] = "1"

    Right::

        os.environ["CUDA_VISIBLE_DEVICES"] = "1"
        device = "cuda" if torch.cuda.is_available() else "cpu"
    """
    for fm in file.functions:
        writes = list(_visible_devices_writes(fm, file))
        if not writes:
            continue
        devices = frozenset(_cuda_names(fm))
        inits = [n for n in fm.nodes if (_cuda_init(n, file, devices) or _helper_inits_cuda(n, fm, file))
                 and not _counts_devices_on_one_branch(fm, n)]
        for w in writes:
            earlier = [n.lineno for n in inits if n.lineno < w.lineno and not opposite_branches(fm.nodes, n, w)]
            if earlier:
                yield Hit(w, f"CUDA_VISIBLE_DEVICES is set after CUDA was initialised (line {min(earlier)}): "
                             f"it has no effect")
