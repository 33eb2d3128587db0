"""Runtime set-up: seeding, determinism, device selection and distributed initialisation.

Everything that touches global state of Python, NumPy, torch or the CUDA driver lives here,
so the rest of trickbag can stay free of side effects.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import math
import os
import random
import time
import warnings
from typing import Any, cast

import numpy as np
import torch

from trickbag.errors import TrickbagError

__all__ = [
    "DistInfo",
    "seed_everything",
    "seed_worker",
    "detached_worker",
    "make_generator",
    "configure_determinism",
    "select_device",
    "set_visible_devices",
    "get_rng_state",
    "set_rng_state",
    "dist_info",
    "init_distributed",
    "shutdown_distributed",
    "is_main_process",
    "torch_distributed_initialized",
    "move_to",
    "trick_generator",
    "fork_generator",
    "omp_threads",
    "choose_threads",
    "usable_cores",
    "CpuSample",
    "sample_cpu",
    "busy_elsewhere",
    "AutoThreads",
]


# --------------------------------------------------------------------------- seeding
def seed_everything(seed: int) -> None:
    """Seed Python's ``random``, NumPy's global generator and torch (CPU and every CUDA device).

    >>> seed_everything(0); a = torch.rand(2)
    >>> seed_everything(0); torch.equal(a, torch.rand(2))
    True
    """
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # also seeds every CUDA device, lazily


def seed_worker(worker_id: int) -> None:  # noqa: ARG001 - DataLoader calls it with the id
    """``worker_init_fn`` for DataLoader: seed ``random`` and NumPy in each worker from torch's seed.

    torch already gives each worker ``base_seed + worker_id``; Python's and NumPy's generators
    would otherwise be copies of the parent's and produce identical augmentations in every worker.
    """
    worker_seed = torch.initial_seed() % 2**32
    np.random.seed(worker_seed)
    random.seed(worker_seed)


def detached_worker(worker_id: int) -> None:
    """:func:`seed_worker`, and the worker leaves its parent's process group (``os.setpgrp``).

    A Ctrl-C or a ``kill`` of the process group then reaches only the training process, which can
    finish its update, write its checkpoint and shut its workers down; a worker killed by the
    signal would turn that clean stop into a "DataLoader worker ... killed by signal" traceback.
    A worker still ends with its parent (DataLoader's watchdog) and on its parent's ``terminate()``.
    """
    seed_worker(worker_id)
    if hasattr(os, "setpgrp"):
        os.setpgrp()


def make_generator(seed: int) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded with ``seed`` (for samplers, augmentation, tricks).

    >>> make_generator(3).initial_seed()
    3
    """
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def get_rng_state() -> dict[str, Any]:
    """Capture Python, NumPy, torch and CUDA RNG states as a dict of plain types and tensors.

    The result survives ``torch.save`` / ``torch.load(weights_only=True)`` (no NumPy objects).
    """
    # the legacy global RandomState is MT19937, whose state is this tuple (numpy's annotation adds the dict
    # form other bit generators give)
    np_state = cast("tuple[str, np.ndarray, int, int, float]", np.random.get_state())
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": {
            "name": str(np_state[0]),
            "keys": torch.from_numpy(np.asarray(np_state[1], dtype=np.int64)),
            "pos": int(np_state[2]),
            "has_gauss": int(np_state[3]),
            "cached_gaussian": float(np_state[4]),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore the states captured by :func:`get_rng_state`.

    >>> s = get_rng_state(); a = (random.random(), np.random.rand(), torch.rand(1))
    >>> set_rng_state(s); b = (random.random(), np.random.rand(), torch.rand(1))
    >>> a[0] == b[0] and a[1] == b[1] and torch.equal(a[2], b[2])
    True
    """
    py = state["python"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    n = state["numpy"]
    np.random.set_state(
        (n["name"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached_gaussian"])
    )
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        # one state per GPU the saving process saw: restore those this process has (a checkpoint written on
        # an 8-GPU node resumes on a 1-GPU machine; set_rng_state_all would index past the last device)
        for index, cuda_state in enumerate(list(state["cuda"])[: torch.cuda.device_count()]):
            torch.cuda.set_rng_state(cuda_state, index)


def trick_generator(seed: int, trick: str, rank: int = 0) -> torch.Generator:
    """A CPU generator seeded from ``(seed, trick, rank)``: reproducible, distinct per trick and rank.

    >>> a, b = trick_generator(0, "mix"), trick_generator(0, "mix")
    >>> torch.equal(torch.rand(3, generator=a), torch.rand(3, generator=b))
    True
    >>> trick_generator(0, "mix").initial_seed() != trick_generator(0, "cutout").initial_seed()
    True
    """
    digest = hashlib.sha256(f"{seed}/{trick}/{rank}".encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") & (2**63 - 1))


def fork_generator(generator: torch.Generator, rank: int) -> None:
    """Reseed ``generator`` in place from one draw of its own stream and ``rank`` (rank 0: untouched).

    A checkpoint holds rank 0's generator (rank 0 writes it). After every rank restored it, rank 0
    continues that stream exactly; each rank ``r > 0`` moves to a stream of its own, so resumed ranks
    still draw different masks and partners, and deterministically so.

    >>> g0, g1 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    >>> fork_generator(g0, 0); fork_generator(g1, 1)
    >>> g0.initial_seed() == 5 and g1.initial_seed() != 5
    True
    """
    if rank <= 0:
        return
    base = int(torch.randint(0, 2**62, (1,), generator=generator).item())
    digest = hashlib.sha256(f"{base}/{rank}".encode()).digest()
    generator.manual_seed(int.from_bytes(digest[:8], "little") & (2**63 - 1))


# --------------------------------------------------------------------------- determinism
def configure_determinism(deterministic: bool, benchmark: bool = False) -> None:
    """Switch deterministic algorithms and the cuDNN flags together.

    Deterministic mode sets ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` (the variable cuBLAS reads; it must
    be set before the first cuBLAS call), ``torch.use_deterministic_algorithms(True)``,
    ``cudnn.deterministic=True`` and ``cudnn.benchmark=False``. ``benchmark=True`` lets cuDNN pick
    the fastest kernels for fixed input shapes and is refused together with determinism.
    """
    if deterministic and benchmark:
        raise TrickbagError(
            "train.deterministic=true and train.benchmark=true cannot be combined: "
            "cuDNN autotuning picks kernels non-deterministically; set one of them to false"
        )
    if deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    if torch.are_deterministic_algorithms_enabled() != deterministic:
        # only on a change: the call imports torch._inductor (seconds of start-up for every run)
        torch.use_deterministic_algorithms(deterministic)
    torch.backends.cudnn.deterministic = deterministic
    torch.backends.cudnn.benchmark = benchmark


# --------------------------------------------------------------------------- CPU threads
#: a core counts as free for one more intra-op thread when other processes use at most this much of it
SPARE_CORE_BUSY = 0.3


def omp_threads(value: str | None) -> int | None:
    """The thread count an ``OMP_NUM_THREADS`` value asks for (its first number), None when unset or not one.

    >>> omp_threads("4"), omp_threads("4,2"), omp_threads(""), omp_threads("0"), omp_threads("many")
    (4, 4, None, None, None)
    """
    first = (value or "").split(",")[0].strip()
    return int(first) if first.isdigit() and int(first) >= 1 else None


def choose_threads(cores: int, busy: float, omp_num_threads: str | None = None) -> int:
    """The intra-op thread count ``train.threads: auto`` picks: ``OMP_NUM_THREADS`` when it is set to
    a positive number, else one thread per core that other processes leave free, and at least one.

    A core counts as free while other processes keep at most :data:`SPARE_CORE_BUSY` of it busy. The
    rule leans to fewer threads because the two mistakes cost differently: a thread on a core that is
    busy elsewhere stalls every parallel op at OpenMP's barrier until the scheduler runs it again (on
    2 cores at load 4, 2 threads trained a small CNN 14x slower than 1), while one thread too few at
    most gives up what the extra core would have added.

    Args:
        cores: cores this process may run on (``len(os.sched_getaffinity(0))``).
        busy: cores' worth of CPU time other processes spend on those cores (0 idle, ``cores`` all busy).
        omp_num_threads: ``OMP_NUM_THREADS`` (None when unset); its first number wins (``"4,2"`` -> 4).

    >>> choose_threads(2, 0.1), choose_threads(2, 1.0), choose_threads(2, 3.5), choose_threads(8, 2.0, "3")
    (2, 1, 1, 3)
    """
    omp = omp_threads(omp_num_threads)
    if omp is not None:
        return omp
    free = max(0, cores) - max(0.0, busy)
    return max(1, min(max(1, cores), math.floor(free + SPARE_CORE_BUSY)))


def _usable_cpus() -> set[int]:
    """The CPU ids this process may run on (its affinity where the OS has one, else all of them)."""
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS has one, else the CPU count)."""
    return len(_usable_cpus())


@dataclasses.dataclass(frozen=True)
class CpuSample:
    """CPU counters at one moment: wall clock, busy CPU seconds of the process's cores (all processes;
    None where ``/proc/stat`` is missing) and this process's own CPU seconds (all its threads)."""

    wall: float
    busy: float | None
    own: float


def _busy_seconds(cpus: set[int], stat: str = "/proc/stat") -> float | None:
    """Busy CPU seconds (all but idle and iowait) on ``cpus`` since boot, from ``/proc/stat``."""
    try:
        with open(stat, encoding="ascii") as fh:
            lines = [ln.split() for ln in fh if ln.startswith("cpu") and ln[3:4].isdigit()]
        ticks = [[int(x) for x in ln[1:9]] for ln in lines if int(ln[0][3:]) in cpus]
    except (OSError, ValueError):
        return None
    if not ticks:
        return None
    return sum(sum(t) - t[3] - t[4] for t in ticks) / os.sysconf("SC_CLK_TCK")


def sample_cpu() -> CpuSample:
    """Read the counters :func:`busy_elsewhere` compares (about 50 us on Linux)."""
    return CpuSample(time.monotonic(), _busy_seconds(_usable_cpus()), time.process_time())


def busy_elsewhere(before: CpuSample, after: CpuSample) -> float:
    """Cores' worth of CPU other processes used on this process's cores between two samples.

    From ``/proc/stat`` (busy time of the cores minus this process's own CPU time); elsewhere from
    the 1-minute load average minus this process's recent use. 0.0 when neither can be read.
    """
    wall = max(after.wall - before.wall, 1e-6)
    own = max(0.0, after.own - before.own) / wall
    if before.busy is not None and after.busy is not None:
        return max(0.0, (after.busy - before.busy) / wall - own)
    try:
        return max(0.0, os.getloadavg()[0] - own)
    except (AttributeError, OSError):
        return 0.0


class AutoThreads:
    """``train.threads: auto``: sets torch's intra-op thread count from :func:`choose_threads` on the
    machine's counters, first over a short window, then (:meth:`recheck`) over the time since the last
    check, so a check costs two small file reads and no waiting.

    Fewer threads are taken at once, more only when two checks in a row agree (the same asymmetry as
    in :func:`choose_threads`: a pause in another job's work is no reason to put a thread on its core).

    >>> auto = AutoThreads(min_window_s=0.01)
    >>> n = auto.start(); n == torch.get_num_threads() and n >= 1
    True
    """

    def __init__(self, *, min_window_s: float = 0.1, env: dict[str, str] | None = None) -> None:
        self.min_window_s = min_window_s
        self.env = os.environ if env is None else env
        self.cores = usable_cores()
        self.last = sample_cpu()
        self.threads = 0
        self.busy = 0.0
        self._more: int | None = None  # a larger count seen once: taken if the next check agrees

    def _decide(self, now: CpuSample) -> int:
        self.busy = busy_elsewhere(self.last, now)
        self.last = now
        return choose_threads(self.cores, self.busy, self.env.get("OMP_NUM_THREADS"))

    def start(self) -> int:
        """Choose over the time since construction (waiting for ``min_window_s`` if less) and set it."""
        left = self.min_window_s - (time.monotonic() - self.last.wall)
        if left > 0:
            time.sleep(left)
        self.threads = self._decide(sample_cpu())
        torch.set_num_threads(self.threads)
        return self.threads

    def recheck(self, min_window_s: float = 0.2) -> int | None:
        """Decide again over the time since the last check; the new count when it changed, else None
        (also when less than ``min_window_s`` passed: the window then grows until the next call)."""
        now = sample_cpu()
        if now.wall - self.last.wall < min_window_s:
            return None
        n = self._decide(now)
        if n > self.threads and self._more != n:
            self._more = n
            return None
        self._more = None
        if n == self.threads:
            return None
        self.threads = n
        torch.set_num_threads(n)
        return n

    def describe(self) -> str:
        """Why the current count, e.g. ``auto -> 1 (2 cores, 1.0 busy with other processes)``."""
        omp = self.env.get("OMP_NUM_THREADS")
        if omp_threads(omp) is not None:
            return f"auto -> {self.threads} (OMP_NUM_THREADS={omp})"
        return f"auto -> {self.threads} ({self.cores} cores, {self.busy:.1f} busy with other processes)"


# --------------------------------------------------------------------------- devices
def set_visible_devices(ids: str) -> bool:
    """Set ``CUDA_VISIBLE_DEVICES`` if CUDA has not been initialised yet; return whether it took effect.

    Once the CUDA driver is initialised the variable is ignored, so setting it then would silently do
    nothing; this function warns instead.
    """
    if torch.cuda.is_initialized():
        warnings.warn(
            f"CUDA_VISIBLE_DEVICES={ids!r} not applied: CUDA is already initialised in this process; "
            "set it in the environment before starting Python",
            RuntimeWarning,
            stacklevel=2,
        )
        return False
    os.environ["CUDA_VISIBLE_DEVICES"] = ids
    return True


def select_device(spec: str = "auto", *, local_rank: int | None = None) -> torch.device:
    """Resolve a device string: ``auto`` (CUDA, else MPS, else CPU), ``cpu``, ``cuda``, ``cuda:N``, ``mps``.

    Under torchrun each process takes ``cuda:LOCAL_RANK``. A device that does not exist raises a
    :class:`TrickbagError` naming the devices that do.

    >>> select_device("cpu")
    device(type='cpu')
    """
    spec = spec.strip().lower()
    cuda_n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    mps_ok = bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())
    available = ["cpu"] + [f"cuda:{i}" for i in range(cuda_n)] + (["mps"] if mps_ok else [])
    if spec == "auto":
        if cuda_n:
            return torch.device("cuda", local_rank if local_rank is not None else 0)
        return torch.device("mps") if mps_ok else torch.device("cpu")
    try:
        dev = torch.device(spec)
    except RuntimeError:
        raise TrickbagError(
            f"train.device={spec!r} is not a device name; allowed: auto, {', '.join(available)}"
        ) from None
    if dev.type == "cuda":
        index = dev.index if dev.index is not None else (local_rank or 0)
        if index >= cuda_n:
            raise TrickbagError(
                f"train.device={spec!r} does not exist on this machine; available: {', '.join(available)}"
            )
        return torch.device("cuda", index)
    if dev.type == "mps" and not mps_ok:
        raise TrickbagError(f"train.device='mps' is not available; available: {', '.join(available)}")
    if dev.type not in ("cpu", "cuda", "mps"):
        raise TrickbagError(f"train.device={spec!r} is not supported; allowed: auto, {', '.join(available)}")
    return dev


def move_to(obj: Any, device: torch.device, non_blocking: bool = False) -> Any:
    """``obj`` with every tensor in it (also inside tuples, lists and dicts) moved to ``device``.

    >>> move_to((torch.zeros(1), [torch.ones(1)], {"k": 2}), torch.device("cpu"))
    (tensor([0.]), [tensor([1.])], {'k': 2})
    """
    if isinstance(obj, torch.Tensor):
        return obj.to(device, non_blocking=non_blocking)
    if isinstance(obj, (list, tuple)):
        return type(obj)(move_to(o, device, non_blocking) for o in obj)
    if isinstance(obj, dict):
        return {k: move_to(v, device, non_blocking) for k, v in obj.items()}
    return obj


# --------------------------------------------------------------------------- distributed
@dataclasses.dataclass(frozen=True)
class DistInfo:
    """Where this process sits in a (possibly single-process) job."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def dist_info() -> DistInfo:
    """Read rank / local rank / world size from an initialised process group or torchrun's env vars."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return DistInfo(
            rank=torch.distributed.get_rank(),
            local_rank=int(os.environ.get("LOCAL_RANK", 0)),
            world_size=torch.distributed.get_world_size(),
        )
    return DistInfo(
        rank=int(os.environ.get("RANK", 0)),
        local_rank=int(os.environ.get("LOCAL_RANK", 0)),
        world_size=int(os.environ.get("WORLD_SIZE", 1)),
    )


def torch_distributed_initialized() -> bool:
    """Whether a default process group exists in this process."""
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def is_main_process() -> bool:
    """True on rank 0 (and in a single-process run)."""
    return dist_info().is_main


def init_distributed(backend: str = "auto", timeout_s: float = 600.0) -> DistInfo:
    """Initialise the default process group from torchrun's environment, if there is one.

    ``backend="auto"`` picks NCCL when CUDA is available and gloo otherwise. Returns the
    :class:`DistInfo`; a plain single-process run returns rank 0 of 1 and initialises nothing.
    """
    info = dist_info()
    if info.world_size <= 1 or torch.distributed.is_initialized():
        return info
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl" and torch.cuda.is_available():
        torch.cuda.set_device(info.local_rank)
    torch.distributed.init_process_group(
        backend=backend, timeout=datetime.timedelta(seconds=timeout_s)
    )
    return dist_info()


def shutdown_distributed(wait: bool = True) -> None:
    """Destroy the default process group, after a barrier when ``wait`` (no-op without a group).

    Call it once every rank is done; pass ``wait=False`` on an error path, where another rank may
    never reach the barrier.
    """
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return
    if wait and torch.distributed.get_world_size() > 1:
        if torch.distributed.get_backend() == "nccl":
            torch.distributed.barrier(device_ids=[torch.cuda.current_device()])
        else:
            torch.distributed.barrier()
    torch.distributed.destroy_process_group()
