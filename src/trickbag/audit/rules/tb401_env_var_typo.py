"""TB401 env-var-typo: A misspelled environment variable (or ``os`` attribute).

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
import functools
import os
from collections.abc import Iterator

from trickbag.audit._ast import call_name, dotted, edit_distance, str_const
from trickbag.audit._env_facts import env_call_keys, is_environ
from trickbag.audit._flow import FileModel
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


@functools.lru_cache(maxsize=4096)
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
    most = 2 if len(key) >= 12 else 1  # edits allowed; a length difference alone costs that many
    near = sorted((edit_distance(key.upper(), k), k) for k in KNOWN_ENV
                  if len(k) >= 8 and abs(len(k) - len(key)) <= most)
    if near and near[0][0] <= most:
        return near[0][1]
    prefixed = [k for k in KNOWN_ENV if k.startswith(key.upper() + "_") and len(key) >= 10]
    return prefixed[0] if len(prefixed) == 1 else None


def env_keys(file: FileModel) -> Iterator[tuple[str, ast.AST, bool]]:
    """(variable name, node, is_write) for every environment variable the file reads or sets."""
    for node in file.nodes:
        if isinstance(node, ast.Subscript) and is_environ(node.value, file):
            if (key := str_const(node.slice)) is not None:
                yield key, node, isinstance(node.ctx, ast.Store)
        elif isinstance(node, ast.Call):
            yield from env_call_keys(node, file)
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)) \
                and is_environ(node.comparators[0], file) and (key := str_const(node.left)) is not None:
            yield key, node, False


def _environ_copy(node: ast.AST | None, file: FileModel) -> bool:
    """``dict(os.environ)``, ``os.environ.copy()``, ``copy.copy(os.environ)``, ``{**os.environ, ...}``."""
    if isinstance(node, ast.Dict):
        return any(k is None and is_environ(v, file) for k, v in zip(node.keys, node.values))
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if call_name(node) == "copy" and isinstance(func, ast.Attribute) and is_environ(func.value, file):
        return True
    return call_name(node) in ("dict", "copy", "deepcopy") and bool(node.args) and is_environ(node.args[0], file)


def _dict_keys(d: ast.Dict) -> Iterator[tuple[str, ast.AST, bool]]:
    for key in d.keys:
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
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
                    if call_name(node) in ("get", "setdefault", "pop") and (key := str_const(node.args[0])) is not None:
                        yield key, node, call_name(node) == "setdefault"
                    elif call_name(node) == "update" and isinstance(node.args[0], ast.Dict):
                        yield from _dict_keys(node.args[0])
            elif isinstance(node, ast.Subscript) and dotted(node.value) in copies \
                    and (key := str_const(node.slice)) is not None:
                yield key, node, isinstance(node.ctx, ast.Store)


def _guarded(file: FileModel, node: ast.AST) -> bool:
    """``node`` sits in the body of a ``try`` that has an ``except`` (a platform check: ``os.lchmod`` exists on
    macOS and BSD only)."""
    table = file.memo("tb401_try_bodies", lambda: {
        id(n) for t in file.nodes if isinstance(t, ast.Try) and t.handlers for st in t.body for n in ast.walk(st)})
    return id(node) in table


def _documented(file: FileModel, key: str, node: ast.AST) -> bool:
    """The file's own text (a docstring, a message) names the variable it reads: its own, chosen on purpose
    (``CUDAHOME`` in the docstring of a setup script that reads it)."""
    return any(isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value != key and key in n.value.split()
               for n in file.nodes)


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
            guarded = _guarded(file, node)
            yield Hit(node, f"{base}.{node.attr} does not exist (AttributeError): did you mean {base}.{near[0][1]}?"
                            + (" (uncertain: inside try/except, a check for an attribute some platforms have)"
                               if guarded else ""),
                      fix=f"use {base}.{near[0][1]}", confidence="low" if guarded else "high")


@rule("TB401", "env-var-typo", fix="spell the variable exactly, e.g. CUDA_VISIBLE_DEVICES", quiet_in_tests=False)
def env_var_typo(file: FileModel) -> Iterator[Hit]:
    """A misspelled environment variable (or ``os`` attribute).

    Setting ``CUDA_VISIBLE_DEVICE`` (or ``CUBLAS_WORKSPACE``) raises no error: the process just runs
    on every GPU (or non-deterministically).  ``os.envion[...]`` fails at run time, possibly after
    hours of training when it sits in the evaluation code.

    Keys set in a copy of the environment (``env = os.environ.copy()``, ``{**os.environ, ...}``) or in a
    dict literal passed as ``env=`` (``subprocess.run``) count too.  Low confidence (``--all``): a variable the
    file reads and names in its own text (a docstring saying it looks for ``CUDAHOME``: its own variable), and a
    missing ``os`` attribute used inside ``try``/``except`` (``os.lchmod`` exists on macOS and BSD only).

    Wrong::

        os.environ["CUDA_VISIBLE_DEVICE"] = "0"

    Right::

        os.environ["CUDA_VISIBLE_DEVICES"] = "0"
    """
    if not any((isinstance(n, ast.Name) and n.id in ("os", "environ", "getenv", "putenv", "unsetenv"))
               or (isinstance(n, ast.keyword) and n.arg == "env") for n in file.nodes):
        return  # nothing in the file reads or sets the environment
    seen = set()
    for key, node, write in [*env_keys(file), *_env_copy_keys(file)]:
        meant = meant_env(key)
        if id(node) in seen:
            continue
        seen.add(id(node))
        if meant:
            own = not write and _documented(file, key, node)
            yield Hit(node, f"environment variable {key!r} is not read by anything: did you mean {meant!r}?"
                            + (f" (uncertain: the file's own text names {key}: a variable of its own)" if own else ""),
                      fix=f"use {meant!r}", confidence="low" if own else "high")
    yield from _os_typos(file)
