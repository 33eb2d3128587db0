"""FSDP2 for the trainer: the model split over the processes with ``torch.distributed.fsdp.fully_shard``, and
sharded checkpoints written and read with ``torch.distributed.checkpoint`` (DCP).

**Wrapping** (:func:`shard_model`): each repeated block (the ones ``train.activation_checkpointing`` finds, or
the classes ``dist.shard_modules`` names) is one FSDP unit, the root holds the rest. Every sharded tensor is a
``DTensor`` placed ``Shard(0)`` on a one-dimensional mesh of all processes (FSDP2's layout); buffers (BatchNorm
statistics) stay whole on every process. Parameters keep their names, so param groups, freezing and layer decay
resolve by name (:func:`remap_param_groups`: ``fully_shard`` replaces the parameter objects).

**Checkpoints.** A resume checkpoint of a sharded model is two things beside each other: the ``.pt`` file that
rank 0 writes atomically (counters, RNG, scheduler, plug-in settings, every whole tensor) where each sharded
tensor is a placeholder (``{"__sharded__": key, "shape": [...], "dtype": "float32"}``), and the folder
``<file>.shards-<update>-<nonce>`` beside it in which every rank wrote its own shards (DCP); the ``.pt`` names
its folder under ``"shards"``. The ``.pt`` is written last, after every rank finished its shards, so a save
killed midway leaves the previous ``.pt`` and the folder it names whole; folders no ``.pt`` names are removed
(:func:`prune_shards`). Because a placeholder records the global shape, the shards load into any number of
processes (DCP re-slices them) or into plain tensors in one process (:func:`fill_shards` with ``mesh=None``):
``trickbag eval`` / ``predict`` / ``export`` / ``verify-resume`` read a sharded checkpoint like any other.
``best.pt`` (weights only) holds the full tensors, gathered from every rank (:func:`gather_full`).
"""

from __future__ import annotations

import contextlib
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

__all__ = [
    "PLACEHOLDER",
    "is_sharded",
    "mesh_of",
    "shard_model",
    "remap_param_groups",
    "split_sharded",
    "has_placeholders",
    "fill_shards",
    "save_shards",
    "gather_full",
    "shards_of",
    "prune_shards",
    "broadcast_buffers",
    "to_local",
    "is_dtensor",
    "load_full",
    "eval_batches_missing",
]

PLACEHOLDER = "__sharded__"
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _dtensor_type() -> type | None:
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # a torch built without distributed support
        return None
    return DTensor


def is_dtensor(t: Any) -> bool:
    """Whether ``t`` is a ``DTensor`` (a sharded tensor of FSDP2)."""
    dtensor = _dtensor_type()
    return dtensor is not None and isinstance(t, dtensor)


def to_local(t: torch.Tensor) -> torch.Tensor:
    """The part of ``t`` this process holds (the tensor itself when it is not sharded)."""
    return t.to_local() if is_dtensor(t) else t  # type: ignore[attr-defined]


def is_sharded(model: nn.Module) -> bool:
    """Whether ``model``'s parameters are sharded (``DTensor``), i.e. it went through ``fully_shard``."""
    return any(is_dtensor(p) for p in model.parameters())


def mesh_of(model: nn.Module) -> Any:
    """The device mesh of ``model``'s sharded parameters, or None for a plain model."""
    return next((p.device_mesh for p in model.parameters() if is_dtensor(p)), None)  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- wrapping
def _units(model: nn.Module, classes: list[str]) -> list[str]:
    """Names of the submodules that become FSDP units: of the classes named, else the repeated blocks."""
    if not classes:
        from trickbag.nn.activation_checkpointing import find_blocks

        return find_blocks(model)
    wanted, out = set(classes), []

    def walk(module: nn.Module, prefix: str) -> None:
        for name, child in module.named_children():
            if type(child).__name__ in wanted:
                out.append(f"{prefix}{name}")
            else:
                walk(child, f"{prefix}{name}.")

    walk(model, "")
    return out


def shard_model(model: nn.Module, device: torch.device, *, classes: list[str] | None = None,
                reshard_after_forward: bool = True, param_dtype: str = "float32",
                reduce_dtype: str = "float32") -> list[str]:
    """``fully_shard`` ``model`` in place over every process of the default group: each unit (see the module
    docstring), then the root. Returns the units' names. Collective (every rank calls it with the same model).

    ``param_dtype`` / ``reduce_dtype``: FSDP2's ``MixedPrecisionPolicy`` (the shards stay in their own dtype,
    float32 for trickbag's models: the optimizer and EMA see float32 weights).
    """
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    policy = MixedPrecisionPolicy(param_dtype=_DTYPES[param_dtype], reduce_dtype=_DTYPES[reduce_dtype])
    units = _units(model, list(classes or []))
    if param_dtype != "float32":  # BatchNorm keeps float32 weights beside its float32 statistics (autocast runs it)
        keep = MixedPrecisionPolicy(param_dtype=torch.float32, reduce_dtype=_DTYPES[reduce_dtype])
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm) and any(True for _ in m.parameters()):
                fully_shard(m, mesh=mesh, reshard_after_forward=reshard_after_forward, mp_policy=keep)
    for name in units:
        fully_shard(model.get_submodule(name), mesh=mesh, reshard_after_forward=reshard_after_forward,
                    mp_policy=policy)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard_after_forward, mp_policy=policy)
    return units


def remap_param_groups(groups: list[dict[str, Any]], names: dict[int, str], model: nn.Module) -> list[dict[str, Any]]:
    """``groups`` (built on the model before ``fully_shard``) with each parameter replaced by the sharded one of the
    same name; ``names`` maps ``id(old parameter)`` to its name, taken before sharding."""
    now = dict(model.named_parameters())
    return [{**g, "params": [now[names[id(p)]] for p in g["params"]]} for g in groups]


@contextlib.contextmanager
def single_process_group(device: torch.device) -> Iterator[None]:
    """A process group of one (gloo, or NCCL on CUDA) while none exists, so one process can run FSDP2 too."""
    import torch.distributed as dist

    if dist.is_initialized():
        yield
        return
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


# --------------------------------------------------------------------------- checkpoints
def split_sharded(obj: Any, key: str = "") -> tuple[Any, dict[str, Any]]:
    """``obj`` (a checkpoint dict) with every ``DTensor`` replaced by a placeholder, and ``{key: DTensor}``."""
    found: dict[str, Any] = {}

    def walk(x: Any, k: str) -> Any:
        if is_dtensor(x):
            found[k] = x.detach()
            return {PLACEHOLDER: k, "shape": list(x.shape), "dtype": str(x.dtype).removeprefix("torch.")}
        if isinstance(x, dict):
            return {kk: walk(v, f"{k}/{kk}") for kk, v in x.items()}
        if isinstance(x, (list, tuple)):
            out = [walk(v, f"{k}/{i}") for i, v in enumerate(x)]
            return out if isinstance(x, list) else tuple(out)
        return x

    return walk(obj, key), found


def _is_placeholder(x: Any) -> bool:
    return isinstance(x, dict) and PLACEHOLDER in x and "shape" in x


def has_placeholders(obj: Any) -> bool:
    """Whether ``obj`` holds a placeholder of a sharded tensor anywhere."""
    if _is_placeholder(obj):
        return True
    if isinstance(obj, dict):
        return any(has_placeholders(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return any(has_placeholders(v) for v in obj)
    return False


def _replace(obj: Any, fn: Any) -> Any:
    if _is_placeholder(obj):
        return fn(obj)
    if isinstance(obj, dict):
        return {k: _replace(v, fn) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_replace(v, fn) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_replace(v, fn) for v in obj)
    return obj


def save_shards(tensors: dict[str, Any], folder: Path) -> None:
    """Every rank writes its shards of ``tensors`` into ``folder`` (DCP; collective)."""
    import torch.distributed.checkpoint as dcp

    dcp.save(tensors, checkpoint_id=str(folder))


def fill_shards(obj: Any, folder: Path, mesh: Any = None) -> Any:
    """``obj`` with its placeholders replaced by the tensors stored in ``folder``: ``DTensor``\\ s sliced for the
    processes of ``mesh`` (collective), or, with ``mesh=None``, whole tensors read by this process alone."""
    import torch.distributed.checkpoint as dcp

    templates: dict[str, Any] = {}

    def template(p: dict[str, Any]) -> Any:
        shape, dtype = tuple(p["shape"]), _DTYPES.get(p["dtype"]) or getattr(torch, p["dtype"])
        if mesh is None:
            t = torch.empty(shape, dtype=dtype)
        else:
            from torch.distributed.tensor import Shard
            from torch.distributed.tensor import empty as dt_empty

            t = dt_empty(shape, dtype=dtype, device_mesh=mesh, placements=[Shard(0)])
        templates[p[PLACEHOLDER]] = t
        return t

    out = _replace(obj, template)
    if templates:
        with warnings.catch_warnings():  # DCP warns that one process reads alone, which is what is asked
            warnings.filterwarnings("ignore", message=".*assuming the intent is to load in a single process")
            dcp.load(templates, checkpoint_id=str(folder), no_dist=mesh is None)
    return out


def gather_full(obj: Any) -> Any:
    """``obj`` with every ``DTensor`` replaced by the whole tensor on the CPU (all-gathers; collective)."""
    if is_dtensor(obj):
        return obj.full_tensor().cpu()
    if isinstance(obj, dict):
        return {k: gather_full(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [gather_full(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(gather_full(v) for v in obj)
    return obj


def shards_of(path: Path) -> list[Path]:
    """The shard folders written for checkpoint file ``path`` (the one it names and any left over)."""
    path = Path(path)
    return sorted(p for p in path.parent.glob(f"{path.name}.shards-*") if p.is_dir())


def prune_shards(path: Path, keep: str | None) -> None:
    """Remove the shard folders of ``path`` except ``keep`` (the one its ``.pt`` names; None: remove all)."""
    for folder in shards_of(path):
        if folder.name != keep:
            shutil.rmtree(folder, ignore_errors=True)


@torch.no_grad()
def broadcast_buffers(model: nn.Module) -> None:
    """Give every rank rank 0's buffers (BatchNorm statistics), as DDP does before each forward; collective."""
    import torch.distributed as dist

    if not (dist.is_initialized() and dist.get_world_size() > 1):
        return
    for b in model.buffers():
        dist.broadcast(b, src=0)


def load_full(model: nn.Module, state: dict[str, Any]) -> None:
    """``model.load_state_dict(state)`` for whole weights (``best.pt``); a sharded model takes its own slice of each
    tensor (every rank holds ``state``; nothing is communicated)."""
    if not is_sharded(model):
        model.load_state_dict(state)
        return
    from torch.distributed.tensor import distribute_tensor

    own = model.state_dict()
    sliced = {}
    for k, v in state.items():
        t: Any = own.get(k)
        if is_dtensor(t) and isinstance(v, torch.Tensor):
            v = distribute_tensor(v.to(t.device, t.dtype), t.device_mesh, t.placements, src_data_rank=None)
        sliced[k] = v
    model.load_state_dict(sliced)


def eval_batches_missing(n: int) -> int:
    """How many more forward passes this rank must run so that every rank runs as many as the busiest one: under
    FSDP each forward gathers the weights with the other ranks (collective)."""
    import torch.distributed as dist

    from trickbag.errors import TrickbagError

    t = torch.tensor([n], dtype=torch.int64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    most = int(t.item())
    if n == 0 and most > 0:
        raise TrickbagError("under dist.strategy=fsdp every process evaluates at least one batch, but an evaluation "
                            f"split has fewer samples than the {dist.get_world_size()} processes; give it more samples")
    return most - n
