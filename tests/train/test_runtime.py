"""Runtime: seeding, RNG state capture/restore (through a weights_only checkpoint), devices, determinism."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from trickbag import runtime
from trickbag.errors import TrickbagError
from trickbag.train.checkpoint_files import load_checkpoint, save_checkpoint


def draw() -> tuple:
    return (random.random(), random.randint(0, 10**9), float(np.random.rand()), np.random.randn(3).tolist(),
            torch.rand(4), torch.randn(2, 2))


def same(a: tuple, b: tuple) -> bool:
    return all(torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y for x, y in zip(a, b))


def test_seed_everything_makes_python_numpy_and_torch_reproducible():
    runtime.seed_everything(123)
    a = draw()
    runtime.seed_everything(123)
    b = draw()
    runtime.seed_everything(124)
    c = draw()
    assert same(a, b)
    for x, y in zip(a, c):  # every generator depends on the seed
        assert not (torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y)


def test_seed_everything_matches_the_libraries_own_seeding():
    runtime.seed_everything(7)
    got = (random.random(), float(np.random.rand()), torch.rand(3))
    random.seed(7)
    np.random.seed(7)
    torch.manual_seed(7)
    assert got[:2] == (random.random(), float(np.random.rand())) and torch.equal(got[2], torch.rand(3))


@pytest.mark.parametrize("seed", [1.5, "3", True, None])
def test_seed_must_be_an_int(seed):
    with pytest.raises(TypeError, match="seed must be an int"):
        runtime.seed_everything(seed)


def test_large_seeds_are_accepted():
    runtime.seed_everything(2**40 + 3)  # NumPy's legacy seeding takes < 2**32: reduced, not an error


def test_rng_state_round_trip_through_a_weights_only_checkpoint(tmp_path):
    runtime.seed_everything(5)
    np.random.randn()  # a cached Gaussian in NumPy's state (has_gauss=1) must survive too
    random.gauss(0, 1)
    draw()
    state = runtime.get_rng_state()
    expected = draw()
    save_checkpoint(tmp_path / "rng.pt", {"rng": state})
    draw()  # move every generator on
    runtime.set_rng_state(load_checkpoint(tmp_path / "rng.pt")["rng"])
    assert same(draw(), expected)


def test_make_generator_is_independent_of_the_global_rng():
    torch.manual_seed(0)
    a = torch.randperm(10, generator=runtime.make_generator(3))
    torch.manual_seed(1)
    b = torch.randperm(10, generator=runtime.make_generator(3))
    assert torch.equal(a, b)


class _WorkerRandom(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return torch.tensor([random.random(), float(np.random.rand())])


def test_seed_worker_gives_each_worker_its_own_python_and_numpy_streams():
    def run(seed):
        dl = DataLoader(_WorkerRandom(), batch_size=1, num_workers=2, worker_init_fn=runtime.seed_worker,
                        generator=runtime.make_generator(seed))
        return torch.cat(list(dl))

    a, b = run(0), run(0)
    assert torch.equal(a, b)  # reproducible from the loader's generator
    # worker 0 serves samples 0, 2 and worker 1 samples 1, 3: their first draws must differ
    assert not torch.equal(a[0], a[1])
    assert not torch.equal(run(1), a)


def test_select_device_resolves_cpu_and_auto():
    assert runtime.select_device("cpu") == torch.device("cpu")
    assert runtime.select_device(" CPU ") == torch.device("cpu")
    expected = "cuda" if torch.cuda.is_available() else (
        "mps" if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available() else "cpu")
    assert runtime.select_device("auto").type == expected


@pytest.mark.parametrize(
    "spec,match",
    [
        ("cuda:64", "does not exist on this machine; available: cpu"),
        ("gpu0", "not a device name; allowed: auto, cpu"),
        ("meta", "not supported; allowed: auto, cpu"),
    ],
)
def test_select_device_errors_name_the_available_devices(spec, match):
    with pytest.raises(TrickbagError, match=match) as info:
        runtime.select_device(spec)
    assert spec in str(info.value)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_select_device_cuda_without_cuda_is_an_error():
    with pytest.raises(TrickbagError, match="'cuda'.*available: cpu"):
        runtime.select_device("cuda")


@pytest.mark.skipif(torch.cuda.is_initialized(), reason="CUDA already initialised in this process")
def test_set_visible_devices_before_cuda_init(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert runtime.set_visible_devices("1") is True
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "1"


def test_set_visible_devices_after_cuda_init_warns_and_changes_nothing(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    with pytest.warns(RuntimeWarning, match="already initialised"):
        assert runtime.set_visible_devices("1") is False
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0"


def test_configure_determinism_switches_torch_flags_together(monkeypatch):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    try:
        runtime.configure_determinism(True)
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
        runtime.configure_determinism(False, benchmark=True)
        assert not torch.are_deterministic_algorithms_enabled() and torch.backends.cudnn.benchmark
    finally:
        runtime.configure_determinism(False)
    with pytest.raises(TrickbagError, match="deterministic.*benchmark"):
        runtime.configure_determinism(True, benchmark=True)


def test_dist_info_reads_torchrun_environment(monkeypatch):
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "4")
    info = runtime.dist_info()
    assert (info.rank, info.local_rank, info.world_size, info.distributed, info.is_main) == (3, 1, 4, True, False)
    for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(k)
    info = runtime.dist_info()
    assert (info.rank, info.world_size, info.distributed, info.is_main) == (0, 1, False, True)
    assert runtime.init_distributed() == info  # one process: nothing to initialise


def test_configure_determinism_calls_torch_only_on_a_change(monkeypatch):
    """torch.use_deterministic_algorithms imports torch._inductor (seconds); the default (off) skips it."""
    calls = []
    real = torch.use_deterministic_algorithms
    monkeypatch.setattr(torch, "use_deterministic_algorithms", lambda mode, **kw: (calls.append(mode), real(mode)))
    assert not torch.are_deterministic_algorithms_enabled()
    try:
        runtime.configure_determinism(False)
        assert calls == []
        runtime.configure_determinism(True)
        runtime.configure_determinism(True)
        assert calls == [True] and torch.are_deterministic_algorithms_enabled()
    finally:
        runtime.configure_determinism(False)
    assert calls == [True, False] and not torch.are_deterministic_algorithms_enabled()


@pytest.mark.skipif(not torch.distributed.is_available() or not torch.distributed.is_gloo_available(),
                    reason="torch built without distributed/gloo support")
def test_shutdown_distributed_destroys_the_group_and_is_a_no_op_without_one(tmp_path):
    import torch.distributed as dist

    if dist.is_initialized():
        pytest.skip("a process group is already initialised in this process")
    runtime.shutdown_distributed()  # nothing to close: no error
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rdzv'}", rank=0, world_size=1)
    try:
        assert dist.is_initialized()
        runtime.shutdown_distributed(wait=True)
        assert not dist.is_initialized()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
