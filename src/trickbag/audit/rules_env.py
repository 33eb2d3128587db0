"""Lint rules on the environment and files: environment-variable typos, CUDA_VISIBLE_DEVICES set too
late, unsafe ``torch.load``, pickled modules, cuDNN benchmark next to determinism (codes TB4xx),
and the syntax-error pseudo-rule TB001."""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterator

from trickbag.audit import _roles as R
from trickbag.audit._ast import Imports, call_name, const_value, dotted, edit_distance
from trickbag.audit._flow import FileModel, FunctionModel
from trickbag.audit._project import OLD_TORCH
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []

KNOWN_ENV = {
    "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_LAUNCH_BLOCKING", "CUBLAS_WORKSPACE_CONFIG", "CUDA_HOME",
    "CUDA_MODULE_LOADING", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_NO_CUDA_MEMORY_CACHING", "PYTORCH_ENABLE_MPS_FALLBACK",
    "PYTORCH_MPS_HIGH_WATERMARK_RATIO", "PYTORCH_NVML_BASED_CUDA_CHECK", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS", "NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_P2P_DISABLE",
    "NCCL_IB_DISABLE", "NCCL_SOCKET_IFNAME", "NCCL_BLOCKING_WAIT", "NCCL_ASYNC_ERROR_HANDLING",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_BLOCKING_WAIT", "TORCH_DISTRIBUTED_DEBUG", "TORCH_CPP_LOG_LEVEL",
    "TORCH_SHOW_CPP_STACKTRACES", "TORCH_USE_CUDA_DSA", "TORCH_HOME", "TORCH_LOGS", "MASTER_ADDR", "MASTER_PORT",
    "WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK", "TOKENIZERS_PARALLELISM",
    "PYTHONHASHSEED", "HF_HOME", "HF_DATASETS_CACHE", "TRANSFORMERS_CACHE", "HF_HUB_OFFLINE", "WANDB_MODE",
    "WANDB_PROJECT", "WANDB_API_KEY", "LD_LIBRARY_PATH", "KMP_DUPLICATE_LIB_OK", "XLA_FLAGS",
    "TF_CPP_MIN_LOG_LEVEL", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS", "TORCHELASTIC_RUN_ID", "ROLE_RANK",
    "ROLE_WORLD_SIZE", "ROLE_NAME", "CUDNN_HOME", "CUDA_PATH", "CUDA_ROOT", "NCCL_ALGO", "NCCL_PROTO",
    "TORCH_CUDA_ARCH_LIST", "MAX_JOBS", "CUDA_CACHE_PATH", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
    "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "PYTORCH_JIT", "OMP_PROC_BIND", "KMP_AFFINITY",
    "NVIDIA_TF32_OVERRIDE", "HF_TOKEN", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE", "WANDB_DIR", "WANDB_ENTITY",
    "WANDB_SILENT", "MLFLOW_TRACKING_URI", "TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_NCCL_DUMP_ON_TIMEOUT"}
_KNOWN_MISTAKES = {"CUBLAS_WORKSPACE": "CUBLAS_WORKSPACE_CONFIG", "CUDA_DEVICES": "CUDA_VISIBLE_DEVICES",
                   "VISIBLE_DEVICES": "CUDA_VISIBLE_DEVICES", "CUDA_VISIBLE": "CUDA_VISIBLE_DEVICES",
                   "CUDA_DEVICE": "CUDA_VISIBLE_DEVICES", "GPU_VISIBLE_DEVICES": "CUDA_VISIBLE_DEVICES",
                   "PYTORCH_CUDA_ALLOC_CONFIG": "PYTORCH_CUDA_ALLOC_CONF", "CUDA_ALLOC_CONF": "PYTORCH_CUDA_ALLOC_CONF",
                   "CUBLAS_WORKSPACE_CONF": "CUBLAS_WORKSPACE_CONFIG", "OMP_THREADS": "OMP_NUM_THREADS"}
_ENV_METHODS = {"get", "setdefault", "pop", "__getitem__", "__setitem__"}


def meant_env(key: str) -> str | None:
    """The known variable a misspelled environment-variable name was meant to be (None if fine)."""
    if key in KNOWN_ENV or not key:
        return None
    if key != key.strip() and key.strip().upper() in KNOWN_ENV | set(_KNOWN_MISTAKES):
        return meant_env(key.strip().upper()) or key.strip().upper()
    if not key.replace("_", "").isalnum():
        return None
    if key.upper() in KNOWN_ENV:
        return key.upper()
    if key.upper() in _KNOWN_MISTAKES:
        return _KNOWN_MISTAKES[key.upper()]
    if len(key) < 8:
        return None
    near = sorted((edit_distance(key.upper(), k), k) for k in KNOWN_ENV if len(k) >= 8)
    if near and near[0][0] <= (2 if len(key) >= 12 else 1):
        return near[0][1]
    prefixed = [k for k in KNOWN_ENV if k.startswith(key.upper() + "_") and len(key) >= 10]
    return prefixed[0] if len(prefixed) == 1 else None


def _is_environ(node: ast.AST, file: FileModel) -> bool:
    return file.imports.qualname(node) == "os.environ"


def env_keys(file: FileModel) -> Iterator[tuple[str, ast.AST, bool]]:
    """(variable name, node, is_write) for every environment variable the file reads or sets."""
    for node in file.nodes:
        if isinstance(node, ast.Subscript) and _is_environ(node.value, file):
            if isinstance(const_value(node.slice), str):
                yield node.slice.value, node, isinstance(node.ctx, ast.Store)
        elif isinstance(node, ast.Call):
            yield from _env_call_keys(node, file)
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)) \
                and _is_environ(node.comparators[0], file) and isinstance(const_value(node.left), str):
            yield node.left.value, node, False


def _env_call_keys(node: ast.Call, file: FileModel) -> Iterator[tuple[str, ast.AST, bool]]:
    func, name = node.func, call_name(node)
    qual = file.imports.qualname(func)
    on_environ = isinstance(func, ast.Attribute) and _is_environ(func.value, file)
    if (on_environ and name in _ENV_METHODS) or qual in ("os.getenv", "os.putenv", "os.unsetenv"):
        if node.args and isinstance(const_value(node.args[0]), str):
            yield node.args[0].value, node, name in ("setdefault", "putenv", "__setitem__")
    if (on_environ and name == "update") or (name == "dict" and node.args and _is_environ(node.args[0], file)):
        for k in node.keywords:
            if k.arg:
                yield k.arg, node, True
        for d in node.args:
            if isinstance(d, ast.Dict):
                for key in d.keys:
                    if isinstance(const_value(key), str):
                        yield key.value, key, True


def _environ_copy(node: ast.AST | None, file: FileModel) -> bool:
    """``dict(os.environ)``, ``os.environ.copy()``, ``copy.copy(os.environ)``, ``{**os.environ, ...}``."""
    if isinstance(node, ast.Dict):
        return any(k is None and _is_environ(v, file) for k, v in zip(node.keys, node.values))
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if call_name(node) == "copy" and isinstance(func, ast.Attribute) and _is_environ(func.value, file):
        return True
    return call_name(node) in ("dict", "copy", "deepcopy") and bool(node.args) and _is_environ(node.args[0], file)


def _dict_keys(d: ast.Dict) -> Iterator[tuple[str, ast.AST, bool]]:
    for key in d.keys:
        if isinstance(const_value(key), str):
            yield key.value, key, True


def _env_copy_keys(file: FileModel) -> Iterator[tuple[str, ast.AST, bool]]:
    """The keys set in a copy of the environment (``env = os.environ.copy(); env["CUDA_VISIBLE_DEVICES"] = "1"``,
    ``{**os.environ, "K": v}``) and in a dict literal passed as ``env=`` to a call (``subprocess.run``)."""
    for fm in file.functions:
        copies = {a.names[0] for a in fm.assigns + file.module.assigns
                  if len(a.names) == 1 and a.op is None and _environ_copy(a.value, file)}
        for node in fm.nodes:
            if isinstance(node, ast.Dict) and _environ_copy(node, file):
                yield from _dict_keys(node)
            elif isinstance(node, ast.Call):
                for k in node.keywords:
                    if k.arg == "env" and isinstance(k.value, ast.Dict):
                        yield from _dict_keys(k.value)
                func = node.func
                if isinstance(func, ast.Attribute) and dotted(func.value) in copies and node.args:
                    if call_name(node) in ("get", "setdefault", "pop") and isinstance(const_value(node.args[0]), str):
                        yield node.args[0].value, node, call_name(node) == "setdefault"
                    elif call_name(node) == "update" and isinstance(node.args[0], ast.Dict):
                        yield from _dict_keys(node.args[0])
            elif isinstance(node, ast.Subscript) and dotted(node.value) in copies \
                    and isinstance(const_value(node.slice), str):
                yield node.slice.value, node, isinstance(node.ctx, ast.Store)


def _os_typos(file: FileModel) -> Iterator[Hit]:
    for node in file.nodes:
        if not isinstance(node, ast.Attribute):
            continue
        base = file.imports.qualname(node.value)
        module = {"os": os, "os.path": os.path}.get(base)
        if module is None or hasattr(module, node.attr):
            continue
        near = sorted((edit_distance(node.attr, a), a) for a in dir(module) if not a.startswith("_"))
        if near and near[0][0] <= 2:
            yield Hit(node, f"{base}.{node.attr} does not exist (AttributeError): did you mean {base}.{near[0][1]}?",
                      fix=f"use {base}.{near[0][1]}")


@rule("TB401", "env-var-typo", fix="spell the variable exactly, e.g. CUDA_VISIBLE_DEVICES", quiet_in_tests=False)
def env_var_typo(file: FileModel) -> Iterator[Hit]:
    """A misspelled environment variable (or ``os`` attribute).

    Setting ``CUDA_VISIBLE_DEVICE`` (or ``CUBLAS_WORKSPACE``) raises no error: the process just runs
    on every GPU (or non-deterministically).  ``os.envion[...]`` fails at run time, possibly after
    hours of training when it sits in the evaluation code.

    Keys set in a copy of the environment (``env = os.environ.copy()``, ``{**os.environ, ...}``) or in a
    dict literal passed as ``env=`` (``subprocess.run``) count too.

    Wrong::

        os.environ["CUDA_VISIBLE_DEVICE"] = "0"

    Right::

        os.environ["CUDA_VISIBLE_DEVICES"] = "0"
    """
    seen = set()
    for key, node, _ in [*env_keys(file), *_env_copy_keys(file)]:
        meant = meant_env(key)
        if id(node) in seen:
            continue
        seen.add(id(node))
        if meant:
            yield Hit(node, f"environment variable {key!r} is not read by anything: did you mean {meant!r}?",
                      fix=f"use {meant!r}")
    yield from _os_typos(file)


_LAZY_CUDA = {"manual_seed", "manual_seed_all", "seed", "seed_all", "amp", "nvtx", "is_initialized"}


def _cuda_names(fm: FunctionModel) -> set[str]:
    """Names holding a CUDA device: ``dev = "cuda:0"``, ``device = torch.device("cuda")``."""
    out = set()
    for scope in (fm.file.module, fm):
        for a in scope.assigns:
            value = a.value.args[0] if isinstance(a.value, ast.Call) and call_name(a.value) == "device" \
                and a.value.args else a.value
            if len(a.names) == 1 and isinstance(const_value(value), str) and const_value(value).startswith("cuda"):
                out.add(a.names[0])
    return out


def _cuda_init(node: ast.AST, file: FileModel, devices: frozenset = frozenset()) -> bool:
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
                if isinstance(const_value(a), str) and const_value(a).startswith("cuda")]
    return bool(cuda_str) and (name == "to" or any(k.arg == "device" for k in node.keywords))


def _helper_inits_cuda(node: ast.AST, fm: FunctionModel, file: FileModel, depth: int = 0) -> bool:
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


def _visible_devices_writes(fm: FunctionModel, file: FileModel) -> Iterator[ast.AST]:
    """The nodes of ``fm`` that set CUDA_VISIBLE_DEVICES (``os.environ[...] =``, ``setdefault``, ``update``)."""
    for node in fm.nodes:
        if (
            isinstance(node, ast.Subscript)
            and _is_environ(node.value, file)
            and isinstance(node.ctx, ast.Store)
            and const_value(node.slice) == "CUDA_VISIBLE_DEVICES"
            or isinstance(node, ast.Call)
            and any(key == "CUDA_VISIBLE_DEVICES" and write for key, _, write in _env_call_keys(node, file))
        ):
            yield node


@rule(
    "TB402",
    "cuda-visible-devices-late",
    fix="set CUDA_VISIBLE_DEVICES before anything touches CUDA (first lines, or the shell)",
)
def cuda_visible_devices_late(file: FileModel) -> Iterator[Hit]:
    """``CUDA_VISIBLE_DEVICES`` is set after CUDA was initialised.

    The CUDA driver reads the variable once, when CUDA is first used (``torch.cuda.is_available()``,
    ``.cuda()``, a tensor on ``"cuda"``).  Setting it afterwards changes nothing: the process keeps
    seeing every GPU and usually lands on GPU 0.

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
        inits = [n.lineno for n in fm.nodes if _cuda_init(n, file, devices) or _helper_inits_cuda(n, fm, file)]
        for w in writes:
            earlier = [line for line in inits if line < w.lineno]
            if earlier:
                yield Hit(w, f"CUDA_VISIBLE_DEVICES is set after CUDA was initialised (line {min(earlier)}): "
                             f"it has no effect")


_OUTSIDE = {"args", "argv", "opt", "opts", "flags", "input", "url", "urls", "download", "hub", "hf_hub_download",
            "cached_path", "urlopen", "requests", "environ", "getenv"}


def _from_outside(node: ast.AST | None) -> bool:
    """A path that comes from outside the program: a command-line argument (``args.ckpt``, ``sys.argv[1]``),
    ``input()``, an environment variable, a download or a URL."""
    if node is None:
        return False
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id in _OUTSIDE:
            return True
        if isinstance(n, ast.Attribute) and n.attr in _OUTSIDE:
            return True
        if isinstance(n, ast.Call) and any(w in call_name(n).lower() for w in ("download", "urlopen", "input")):
            return True
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.startswith(("http://", "https://")):
            return True
    return False


@rule("TB403", "torch-load-unsafe", fix="torch.load(path, map_location=..., weights_only=True)", severity="warning")
def torch_load_unsafe(file: FileModel) -> Iterator[Hit]:
    """``torch.load`` unpickles a file that may come from someone else.

    A checkpoint is a pickle: loading a downloaded file with ``weights_only=False`` runs whatever code
    it contains.  ``weights_only=True`` loads tensors and plain containers only; it is the default from
    torch 2.6.  Reported by default only where the code shows the risk: no ``weights_only`` in a project
    whose packaging files (pyproject.toml, requirements*.txt, setup.py ...) allow a torch older than 2.6,
    or ``weights_only=False`` on a path that comes from outside the program (a command-line argument,
    ``sys.argv``, an environment variable, a download or a URL).  The other calls are low-confidence
    advisories (``--all``): without a version pin a fresh install is current torch, and an explicit
    ``weights_only=False`` on the program's own checkpoint is the user's stated choice.  A
    ``functools.partial(torch.load, ...)`` is reported where the partial is made.

    Wrong::

        state = torch.load(args.checkpoint, map_location="cpu", weights_only=False)

    Right::

        state = torch.load(args.checkpoint, map_location="cpu", weights_only=True)
    """
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
            sure = "high" if file.torch_support == OLD_TORCH else "low"
            yield Hit(node, f"{what} without weights_only=True unpickles (and can run) arbitrary code on torch < 2.6",
                      confidence=sure)
        elif const_value(kw["weights_only"]) is False:
            sure = "high" if _from_outside(path) else "low"
            yield Hit(node, f"{what}(weights_only=False) unpickles (and can run) arbitrary code"
                            f"{' from a path given from outside' if sure == 'high' else ''}; "
                            "load a state_dict with weights_only=True", confidence=sure)


@rule("TB404", "save-whole-module", fix="torch.save(model.state_dict(), path)", severity="warning", opt_in=True)
def save_whole_module(file: FileModel) -> Iterator[Hit]:
    """``torch.save(model)`` pickles the whole module (advisory).

    An advisory, run only when selected (``--select TB404``).  The file then needs the exact same
    class, module path and source to load, only loads with
    ``weights_only=False`` (arbitrary code), and breaks on refactoring.  Save ``state_dict()``.

    Wrong::

        torch.save(model, "model.pt")

    Right::

        torch.save(model.state_dict(), "model.pt")
    """
    for fm in file.functions:
        for node in fm.nodes:
            if isinstance(node, ast.Call) and call_name(node) == "save" \
                    and file.imports.qualname(node.func) == "torch.save" and node.args:
                name = dotted(node.args[0])
                if name and fm.role(name) == R.MODEL:
                    yield Hit(node, f"torch.save({name}) pickles the whole module; save {name}.state_dict()")


def _flag_assignments(file: FileModel) -> Iterator[tuple[str, ast.AST, int]]:
    """('benchmark' | 'deterministic', node, scope id) for the cuDNN flags set to True and determinism
    switched on, with the function (or module body) they are in."""
    for fm in file.functions:
        for node in fm.nodes:
            kind = _flag_kind(node, file.imports)
            if kind:
                yield kind, node, id(fm)


def _flag_kind(node: ast.AST, imports: Imports) -> str | None:
    if isinstance(node, ast.Assign) and const_value(node.value) is True:
        for t in node.targets:
            name = imports.resolve(dotted(t) or "")  # ``cb.deterministic`` after ``... import cudnn as cb``
            if name.endswith("cudnn.benchmark"):
                return "benchmark"
            if name.endswith("cudnn.deterministic"):
                return "deterministic"
    elif isinstance(node, ast.Call) and "use_deterministic_algorithms" in (
            call_name(node), imports.qualname(node.func).split(".")[-1]) and node.args \
            and const_value(node.args[0]) is True:
        return "deterministic"
    return None


def _branches(tree: ast.AST) -> dict[int, list[tuple[int, bool]]]:
    """node id -> the (if id, branch) pairs around it, to tell exclusive branches apart."""
    out: dict[int, list[tuple[int, bool]]] = {}

    def visit(node: ast.AST, path: list[tuple[int, bool]]) -> None:
        out[id(node)] = path
        if isinstance(node, ast.If):
            visit(node.test, path)
            for s in node.body:
                visit(s, path + [(id(node), True)])
            for s in node.orelse:
                visit(s, path + [(id(node), False)])
            return
        for child in ast.iter_child_nodes(node):
            visit(child, path)

    visit(tree, [])
    return out


@rule("TB405", "benchmark-with-determinism", fix="set torch.backends.cudnn.benchmark = False when determinism is on",
      severity="warning")
def benchmark_with_determinism(file: FileModel) -> Iterator[Hit]:
    """``cudnn.benchmark = True`` together with ``cudnn.deterministic = True`` or
    ``torch.use_deterministic_algorithms(True)``.

    Benchmark mode picks convolution algorithms by timing them, which differs from run to run, so
    the results are not reproducible; combined with determinism flags it defeats their purpose
    (and hides the cost of determinism behind a setting that is not honoured).

    Import aliases are followed (``from torch.backends import cudnn as cb``; ``cb.deterministic = True``).
    The flags are process-global: one set in the module body and the other in a function the file calls
    (``set_deterministic()``) conflict too, unless the two run in exclusive branches of one if/else.  An uncalled
    top-level ``main()`` / ``run()`` (an entry point a launcher or ``__main__`` guard runs) counts as run.

    Wrong::

        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = True

    Right::

        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
    """
    flags = list(_flag_assignments(file))
    if not flags:
        return
    paths = _branches(file.tree)
    table = file.call_table()
    for kind, node, scope in flags:
        if kind != "benchmark":
            continue
        for other_kind, other, other_scope in flags:
            if other_kind == "deterministic" and _both_run(node, scope, other, other_scope, paths, table, file):
                yield Hit(node, "cudnn.benchmark = True picks kernels by timing: the run is not deterministic "
                                "despite the determinism settings")
                break


def _run_paths(node: ast.AST, scope: int, paths: dict, table: dict, file: FileModel,
               entry: bool = False) -> list[list[tuple[int, bool]]]:
    """The if-branches ``node`` runs under: its own, prefixed by those of each call site of its function
    (with ``entry``, an uncalled top-level function runs once, after the module body)."""
    own = paths.get(id(node), [])
    if scope == id(file.module) or (entry and not table.get(scope) and _entry_point(file, scope)):
        return [own]
    return [paths.get(id(e.node), []) + own for e in table.get(scope, [])]


_ENTRY_NAME = re.compile(r"(main|run|cli|launch|entry|start|train)(_|$)")


def _entry_point(file: FileModel, scope: int) -> bool:
    """An uncalled top-level function named like an entry point (``main(cfg)`` run by a launcher) that leaves
    ``cudnn.benchmark`` alone: it runs after the module body, whose flags are still in force.  (An uncalled
    ``enable_repro()`` helper may never run.)"""
    fm = next((f for f in file.top.values() if id(f) == scope), None)
    if fm is None or not _ENTRY_NAME.match(fm.name):
        return False
    return not any(isinstance(n, ast.Assign) and any(file.imports.resolve(dotted(t) or "").endswith("cudnn.benchmark")
                                                     for t in n.targets) for n in fm.nodes)


def _both_run(a: ast.AST, a_scope: int, b: ast.AST, b_scope: int, paths: dict, table: dict,
              file: FileModel) -> bool:
    """Can the two flag assignments both run?  The flags are process-global: in one function, or in the
    module body and functions it calls, they conflict unless they sit in exclusive branches of one if/else."""
    if a_scope == b_scope:
        mine, theirs = [paths.get(id(a), [])], [paths.get(id(b), [])]
    else:
        module = id(file.module)
        mine = _run_paths(a, a_scope, paths, table, file, b_scope == module)
        theirs = _run_paths(b, b_scope, paths, table, file, a_scope == module)
    return any(not any(i in dict(m) and dict(m)[i] != br for i, br in t) for m in mine for t in theirs)


@rule("TB001", "syntax-error", fix="fix the syntax error (the file was not checked)")
def syntax_error(file: FileModel) -> Iterator[Hit]:
    """The file does not parse, so nothing else in it was checked.

    Reported by the linter itself with the parser's message and position (``SyntaxError``,
    ``IndentationError``, bytes that do not decode: a file is read as Python reads it, UTF-8 unless
    a BOM or a PEP 263 ``# -*- coding: latin-1 -*-`` line says otherwise), or as "too deeply nested
    to analyse" when an expression or block nests beyond Python's recursion limit (for the parser
    or for the analysis).  Either way it is one line for that file; the other files are checked.

    Wrong::

        for x, y in loader
            loss.backward()

    Right::

        for x, y in loader:
            loss.backward()
    """
    return iter(())

