"""Checkpoints across devices: written on the GPU, read on the CPU (``map_location``), copied there and resumed on
the GPU bit for bit (CUDA RNG, GradScaler and optimizer state included); a run trained on the GPU evaluated on
the CPU from its folder."""

from __future__ import annotations

import math

import pytest
import torch
from torch.utils.data import DataLoader

from trickbag import runtime
from trickbag.data.sampler import EpochSampler
from trickbag.data.sources import TensorDataset
from trickbag.recipe import load_recipe
from trickbag.runs.inference import evaluate_run
from trickbag.runs.run import run_recipe
from trickbag.train.checkpoint_files import load_checkpoint
from trickbag.train.plugins.checkpoints import Checkpointing
from trickbag.train.trainer import Trainer

from .helpers import CUDA_ONLY, FAKE, assert_identical, fresh_net, make_data, weights

pytestmark = CUDA_ONLY

N, BS, EPOCHS = 80, 16, 2


def _noise(x: torch.Tensor, generator=None) -> torch.Tensor:
    return x + 0.1 * torch.randn(x.shape, generator=generator)


def _trainer(precision: str, plugins=()) -> Trainer:
    """Dropout on the GPU (CUDA RNG), per-sample augmentation, momentum SGD, a cosine schedule, 5 updates/epoch."""
    x, y = make_data(N)
    train = DataLoader(TensorDataset(x, y, augment=_noise), batch_size=BS, sampler=EpochSampler(N, seed=5),
                       generator=runtime.make_generator(5))
    val = DataLoader(TensorDataset(x[:32], y[:32]), batch_size=16)
    model = fresh_net(seed=1234, dropout=0.3)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=math.ceil(N / BS) * EPOCHS)
    return Trainer(model, opt, train, val, scheduler=sched, plugins=list(plugins), max_epochs=EPOCHS,
                   precision=precision, device="cuda")


def _devices(tree) -> set[str]:
    if isinstance(tree, torch.Tensor):
        return {tree.device.type}
    if isinstance(tree, dict):
        return set().union(*(_devices(v) for v in tree.values())) if tree else set()
    if isinstance(tree, (list, tuple)):
        return set().union(*(_devices(v) for v in tree)) if tree else set()
    return set()


@pytest.mark.parametrize("precision", ["32", "16"])
def test_cuda_checkpoint_read_on_the_cpu_copied_and_resumed_on_cuda_is_bit_identical(tmp_path, precision, no_tf32):
    runtime.configure_determinism(True)
    runtime.seed_everything(0)
    full = _trainer(precision, [Checkpointing(tmp_path / "ckpt", every_steps=1, keep=100, out=None)])
    full.fit()
    path = tmp_path / "ckpt" / "step-00000007.pt"  # epoch 2, after its 2nd update
    assert "cuda" in _devices(torch.load(path, weights_only=True))  # written from GPU tensors
    on_cpu = load_checkpoint(path)  # map_location="cpu"
    assert _devices(on_cpu) == {"cpu"} and "cuda" in on_cpu["rng"]
    assert on_cpu["counters"]["step"] == 7 and on_cpu["counters"]["batch_idx"] == 2

    # the same weights give the same outputs on the CPU as on the GPU
    x = make_data(16, seed=3)[0]
    cpu_model, gpu_model = fresh_net(dropout=0.3).eval(), fresh_net(dropout=0.3).cuda().eval()
    cpu_model.load_state_dict(on_cpu["model"])
    gpu_model.load_state_dict(on_cpu["model"])
    with torch.no_grad():
        torch.testing.assert_close(cpu_model(x), gpu_model(x.cuda()).cpu(), rtol=1e-5, atol=1e-5)

    torch.save(on_cpu, tmp_path / "copied.pt")  # the file as a CPU-only machine would write it back
    resumed = _trainer(precision)
    runtime.seed_everything(99)  # the resumed process's RNG is elsewhere: the checkpoint's must be restored
    resumed.load_state_dict(load_checkpoint(tmp_path / "copied.pt"))
    assert all(s["momentum_buffer"].is_cuda for s in resumed.optimizer.state.values())
    resumed.fit()
    assert_identical(weights(full.model), weights(resumed.model))
    sa, sb = full.optimizer.state_dict()["state"], resumed.optimizer.state_dict()["state"]
    assert all(torch.equal(sa[k]["momentum_buffer"], sb[k]["momentum_buffer"]) for k in sa)
    assert full.state.scaler.state_dict() == resumed.state.scaler.state_dict()
    assert (full.state.step, full.state.epoch, full.state.scheduler.last_epoch) == (
        resumed.state.step, resumed.state.epoch, resumed.state.scheduler.last_epoch)
    keys = ("train/loss", "val/loss", "val/acc", "lr/group0")
    assert [[h[k] for k in keys] for h in full.state.history] == [[h[k] for k in keys] for h in resumed.state.history]


def test_a_run_trained_on_cuda_evaluates_the_same_on_the_cpu_from_its_folder(tmp_path, no_tf32):
    recipe = load_recipe("digits", [*FAKE, "train.epochs=2", f"run.dir={tmp_path}", "run.name=g",
                                    "tricks.ema.enabled=true", "tricks.ema.decay=0.9", "tricks.tta.enabled=true"])
    result = run_recipe(recipe, quiet=True)
    best = torch.load(result.run_dir / "checkpoints" / "best.pt", weights_only=True)
    assert "cuda" in _devices(best["model"])
    on_cpu = evaluate_run(result.run_dir, device="cpu")
    on_gpu = evaluate_run(result.run_dir, device="cuda")
    for key in ("loss", "acc"):
        ran = result.test[f"test/{key}"]
        assert abs(on_cpu[key] - ran) < 1e-4 and abs(on_gpu[key] - ran) < 1e-4, (key, on_cpu[key], on_gpu[key], ran)


def test_a_checkpoint_saved_by_a_process_that_saw_more_gpus_resumes_here_bit_identically(tmp_path):
    """A run on a node with more GPUs (each visible to the process, as without CUDA_VISIBLE_DEVICES) resumed on a
    machine with fewer: the RNG states of the GPUs this process has are restored, the others are not needed.
    ``runtime.set_rng_state`` hands every saved state to ``torch.cuda.set_rng_state_all``, whose per-device call
    indexes ``torch.cuda.default_generators`` and fails (IndexError) for a device that is not here."""
    runtime.configure_determinism(True)
    runtime.seed_everything(0)
    full = _trainer("32")
    full.fit()
    runtime.seed_everything(0)
    first = _trainer("32")
    first.state.max_epochs = 1  # the full run's schedule, stopped after one epoch
    first.fit()
    ckpt = load_checkpoint(first.save_checkpoint(tmp_path / "one.pt"))
    saved = list(ckpt["rng"]["cuda"])
    assert len(saved) == torch.cuda.device_count()
    ckpt["rng"]["cuda"] = saved + [saved[0].clone()]  # as written by a process that saw one more GPU
    resumed = _trainer("32")
    runtime.seed_everything(99)
    resumed.load_state_dict(ckpt)
    resumed.fit()
    assert_identical(weights(full.model), weights(resumed.model))
