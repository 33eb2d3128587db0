"""Harness for the DDP tests: run named scenarios in 2 spawned CPU processes (gloo) and collect results.

All scenarios run in one spawn (one process group), because starting a process that imports
torch costs seconds. Each scenario returns a dict per rank, saved with ``torch.save``; a scenario
that raises ends the job (the other rank is torn down) and its traceback is reported. A hard
deadline kills the processes, so a hang fails the tests instead of stalling the suite.

The single-process references are computed in the test process with the same recipe and twice
the per-process batch (see :func:`reference_run`).
"""

from __future__ import annotations

import datetime
import io
import os
import random
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

WORLD = 2
PER_RANK_BATCH = 4
GLOO_TIMEOUT_S = 60  # a collective that waits longer than this raises instead of hanging

#: fake data: 64 train / 12 val / 20 test samples of shape [1, 4, 4], 4 classes
BASE = [
    "data.name=fake",
    "data.num_samples=96",
    "data.shape=[1,4,4]",
    "data.val_fraction=0.15",
    "data.augment=false",
    "train.epochs=2",
    "train.seed=3",
    "optim.lr=0.1",
    "schedule.warmup_epochs=0",
    "log.tensorboard=false",
    "run.progress=false",
    "run.plots=false",
]


# --------------------------------------------------------------------------- models
class Net(nn.Module):
    """Tiny classifier for [N, 1, 4, 4]: an MLP, or a conv net with BatchNorm2d and BatchNorm1d."""

    def __init__(self, num_classes: int, kind: str = "mlp", hidden: int = 16) -> None:
        super().__init__()
        if kind == "mlp":
            self.net = nn.Sequential(nn.Flatten(), nn.Linear(16, hidden), nn.Tanh(), nn.Linear(hidden, num_classes))
        elif kind == "bn":
            self.net = nn.Sequential(
                nn.Conv2d(1, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU(),
                nn.Flatten(), nn.Linear(64, hidden), nn.BatchNorm1d(hidden), nn.ReLU(), nn.Linear(hidden, num_classes),
            )
        else:
            raise ValueError(f"kind must be 'mlp' or 'bn', got {kind!r}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def make_net(num_classes: int, kind: str = "mlp", hidden: int = 16) -> nn.Module:
    return Net(num_classes, kind, hidden)


MODEL = f"model.name={__name__}:make_net"


def recipe(overrides: list[str], batch_size: int = PER_RANK_BATCH) -> Any:
    from trickbag.recipe import load_recipe

    return load_recipe("digits", BASE + [MODEL, f"data.batch_size={batch_size}"] + list(overrides))


def weights(model: nn.Module) -> dict[str, torch.Tensor]:
    from trickbag.nn import unwrap as _unwrap

    return {k: v.detach().clone() for k, v in _unwrap(model).state_dict().items()}


class Recorder:
    """Plug-in factory recording per-update values (grad norm, loss) at STEP."""

    @staticmethod
    def make() -> Any:
        from trickbag.plugin.interface import Plugin

        class _Rec(Plugin):
            def __init__(self) -> None:
                self.grad_norms: list[float] = []
                self.steps = 0

            def on_step(self, state: Any) -> None:
                self.steps += 1
                if state.grad_norm is not None:
                    self.grad_norms.append(float(state.grad_norm))

        return _Rec()


def train(overrides: list[str], batch_size: int = PER_RANK_BATCH, setup: Callable | None = None) -> dict[str, Any]:
    """build() + fit() of the recipe; returns final weights, history and per-update records."""
    from trickbag.train.build import build

    trainer, ctx = build(recipe(overrides, batch_size))
    rec = Recorder.make()
    trainer.add_plugin(rec)
    extra = setup(trainer, ctx) if setup is not None else None
    state = trainer.fit()
    return {
        "weights": weights(trainer.model),
        "history": [dict(h) for h in state.history],
        "steps": state.step,
        "grad_norms": rec.grad_norms,
        "stop_reason": state.stop_message,
        "epoch": state.epoch,
        "extra": extra() if callable(extra) else extra,
        "model_type": type(trainer.model).__name__,
        "modules": sorted({type(m).__module__ + "." + type(m).__name__ for m in trainer.model.modules()}),
    }


def reference_run(overrides: list[str]) -> dict[str, Any]:
    """The single-process run with the global batch (WORLD x per-rank batch), in this process."""
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        if key in os.environ:
            raise RuntimeError(f"reference_run must run outside torchrun ({key} is set)")
    return train(overrides, batch_size=WORLD * PER_RANK_BATCH)


# --------------------------------------------------------------------------- scenarios
SCENARIOS: dict[str, Callable[[int, Path], dict[str, Any]]] = {}


def scenario(fn: Callable[[int, Path], dict[str, Any]]) -> Callable[[int, Path], dict[str, Any]]:
    SCENARIOS[fn.__name__] = fn
    return fn


@scenario
def plain(rank: int, out: Path) -> dict[str, Any]:
    return train([])


@scenario
def accumulate(rank: int, out: Path) -> dict[str, Any]:
    """accumulate=3 over 8 micro-batches per epoch (groups 3, 3, 2), counting DDP all-reduces."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    calls = {"buckets": 0, "passes": 0, "micro_batches": 0}

    def setup(trainer: Any, ctx: Any) -> Callable[[], dict[str, int]]:
        def hook(state, bucket):  # noqa: ANN001 - DDP rejects annotations other than dist.GradBucket
            calls["buckets"] += 1
            calls["passes"] += int(bucket.is_last())  # one gradient all-reduce pass ends with the last bucket
            return default_hooks.allreduce_hook(None, bucket)

        trainer.model.register_comm_hook(None, hook)
        calls["micro_batches"] = len(ctx.train_loader) * ctx.recipe.train.epochs
        return lambda: dict(calls)

    return train(["train.accumulate=3"], setup=setup)


@scenario
def clip(rank: int, out: Path) -> dict[str, Any]:
    return train(["train.clip=0.05"])


@scenario
def clip_trick(rank: int, out: Path) -> dict[str, Any]:
    return train(["tricks.clip.enabled=true", "tricks.clip.max_norm=0.05", "tricks.grad_norm.enabled=true"])


@scenario
def sam(rank: int, out: Path) -> dict[str, Any]:
    return train(["tricks.sam.enabled=true", "tricks.sam.rho=0.1", "train.accumulate=2"])


EMA = ["tricks.ema.enabled=true", "tricks.ema.decay=0.9", "tricks.ema.warmup=false"]


@scenario
def ema(rank: int, out: Path) -> dict[str, Any]:
    # the EMA plug-in copies the average into the model at FIT_END: "weights" are the EMA weights
    return train(EMA)


@scenario
def mix(rank: int, out: Path) -> dict[str, Any]:
    def setup(trainer: Any, ctx: Any) -> Callable[[], dict[str, Any]]:
        plugin = next(p for p in trainer.plugins if getattr(p, "name", "") == "mix")
        seed = plugin.generator.initial_seed()
        return lambda: {"generator_seed": seed}

    return train(["tricks.mix.enabled=true"], setup=setup)


@scenario
def sync_bn(rank: int, out: Path) -> dict[str, Any]:
    return train(["dist.sync_bn=true", "model.kwargs={kind: bn}"])


def sync_bn_layer_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    """Global batch [8, 3, 5] and loss weights; rank r holds samples 4r..4r+3."""
    g = torch.Generator().manual_seed(0)
    return 2.0 + 3.0 * torch.randn(8, 3, 5, generator=g), torch.randn(8, 3, 5, generator=g)


@scenario
def sync_bn_layer(rank: int, out: Path) -> dict[str, Any]:
    """trickbag's SyncBatchNorm layer alone: forward, running stats and gradients on each rank's half."""
    from trickbag.train.distributed import SyncBatchNorm

    x, w = sync_bn_layer_inputs()
    x = x[4 * rank: 4 * rank + 4].clone().requires_grad_(True)
    bn = SyncBatchNorm(3, momentum=0.3)
    with torch.no_grad():
        bn.weight.copy_(torch.tensor([0.5, 1.0, 2.0]))
        bn.bias.copy_(torch.tensor([0.1, -0.2, 0.3]))
    y = bn(x)
    (y * w[4 * rank: 4 * rank + 4]).sum().backward()
    return {"y": y.detach(), "x_grad": x.grad, "weight_grad": bn.weight.grad, "bias_grad": bn.bias.grad,
            "running_mean": bn.running_mean.clone(), "running_var": bn.running_var.clone()}


@scenario
def eval_uneven(rank: int, out: Path) -> dict[str, Any]:
    """13 validation samples, eval batches of 3: rank 0 holds 7 (3 batches), rank 1 holds 6 (2)."""
    import torch.nn.functional as F

    from trickbag.nn import unwrap as _unwrap
    from trickbag.train.build import build

    r = recipe(["data.num_samples=80", "data.val_fraction=0.2", "data.eval_batch_size=3", "model.kwargs={kind: bn}"])
    trainer, ctx = build(r)
    metrics = trainer.evaluate(ctx.val_loader)
    model = _unwrap(trainer.model).eval()
    with torch.no_grad():  # naive reference: every validation sample once, in one process
        xs = torch.stack([ctx.data.val[i][0] for i in range(len(ctx.data.val))])
        ys = torch.tensor([int(ctx.data.val[i][1]) for i in range(len(ctx.data.val))])
        logits = model(xs)
    return {
        "metrics": metrics,
        "val_size": len(ctx.data.val),
        "batches": len(ctx.val_loader),
        "naive_acc": float((logits.argmax(1) == ys).double().mean()),
        "naive_loss": float(F.cross_entropy(logits, ys)),
    }


@scenario
def seeds(rank: int, out: Path) -> dict[str, Any]:
    """After build(): the model is the same on every rank; the global RNG streams are per rank."""
    from trickbag.train.build import build

    trainer, ctx = build(recipe(["train.seed=11"]))
    return {
        "weights": weights(trainer.model),
        "torch": torch.rand(4),
        "python": random.random(),
        "numpy": float(np.random.rand()),
        "loader_seed": ctx.train_loader.generator.initial_seed(),
    }


@scenario
def early_stop(rank: int, out: Path) -> dict[str, Any]:
    # val/loss in mode max with patience 1: stops as soon as the validation loss does not go up
    return train(["train.epochs=6", "train.early_stopping_patience=1", "train.monitor=val/loss", "train.mode=max"])


def _stopper(at_step: int | None, at_epoch_end: int | None) -> Any:
    from trickbag.plugin.interface import Plugin
    from trickbag.plugin.state import StopReason

    class RankZeroBudget(Plugin):
        """Stops the run on the rank it is added to only (like a plug-in that decides on rank 0)."""

        def on_step(self, state: Any) -> None:
            if at_step is not None and state.step == at_step:
                state.stop(StopReason.REQUESTED, f"budget: {at_step} updates")

        def on_epoch_end(self, state: Any) -> None:
            if at_epoch_end is not None and state.epoch == at_epoch_end:
                state.stop(StopReason.REQUESTED, f"budget: {at_epoch_end + 1} epochs")

    return RankZeroBudget()


@scenario
def rank0_stops_mid_epoch(rank: int, out: Path) -> dict[str, Any]:
    def setup(trainer: Any, ctx: Any) -> None:
        if rank == 0:
            trainer.add_plugin(_stopper(at_step=3, at_epoch_end=None))

    return train(["train.epochs=3"], setup=setup)


@scenario
def rank0_stops_at_epoch_end(rank: int, out: Path) -> dict[str, Any]:
    def setup(trainer: Any, ctx: Any) -> None:
        if rank == 0:
            trainer.add_plugin(_stopper(at_step=None, at_epoch_end=0))

    return train(["train.epochs=3"], setup=setup)


@scenario
def runs(rank: int, out: Path) -> dict[str, Any]:
    """run_recipe twice (2 epochs, then resumed to 3) and once straight to 3 epochs."""
    from trickbag import _files
    from trickbag.runs import run as run_mod
    from trickbag.train.trainer import Trainer

    class RecordingOs:  # os as trickbag._files sees it: every atomic write's temporary file is recorded
        def __getattr__(self, name: str) -> Any:
            return getattr(os, name)

        def replace(self, src: Any, dst: Any) -> None:
            writes.append(Path(src).name)
            os.replace(src, dst)

    writes: list[str] = []
    added: list[str] = []
    original_add = Trainer.add_plugin

    def add_plugin(self: Trainer, plugin: Any, *args: Any, **kw: Any) -> None:
        added.append(type(plugin).__name__)
        original_add(self, plugin, *args, **kw)

    def refuse(*args: Any, **kw: Any) -> Any:
        raise AssertionError(f"rank {rank} read the run directory")

    runs_dir = out / "runs"
    common = ["schedule.name=constant", f"run.dir={runs_dir}"]
    _files.os = RecordingOs()
    Trainer.add_plugin = add_plugin  # type: ignore[method-assign]
    try:
        buf = io.StringIO()
        first = run_mod.run_recipe(
            recipe(common + ["log.tensorboard=true", "run.plots=true", "run.progress=true"]), out=buf
        )
        added_first = list(added)
        saved = run_mod.find_resume_checkpoint, run_mod.load_checkpoint
        if rank != 0:  # rank 0 alone reads the checkpoint and hands it over
            run_mod.find_resume_checkpoint = refuse
            run_mod.load_checkpoint = refuse
        try:
            resumed = run_mod.resume_run(first.run_dir, ["train.epochs=3"], out=io.StringIO())
        finally:
            run_mod.find_resume_checkpoint, run_mod.load_checkpoint = saved
        straight = run_mod.run_recipe(recipe(common + ["train.epochs=3", "run.name=straight"]), out=io.StringIO())
    finally:
        _files.os = os
        Trainer.add_plugin = original_add  # type: ignore[method-assign]
    return {
        "run_dir": str(first.run_dir),
        "resumed_dir": str(resumed.run_dir),
        "straight_dir": str(straight.run_dir),
        "printed": buf.getvalue(),
        "writes": writes,
        "plugins": added_first,
        "history_resumed": resumed.history,
        "history_straight": straight.history,
        "test_resumed": resumed.test,
        "test_straight": straight.test,
    }


@scenario
def muon(rank: int, out: Path) -> dict[str, Any]:
    """optim.name=muon (Muon on the hidden matrix, AdamW on the rest) under DDP."""
    return train(["optim.name=muon", "optim.lr=0.01"])


@scenario
def exact_accumulation(rank: int, out: Path) -> dict[str, Any]:
    """A hand-built Trainer over DDP, uneven everywhere: rank 0 holds 6 samples in micro-batches [4, 2], rank 1
    holds 4 in [3, 1]; one update of accumulate=2 on each rank (the reference is the 10-sample batch)."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    from trickbag.train.trainer import Trainer

    torch.manual_seed(0)
    x, y = torch.randn(10, 6), torch.randint(0, 3, (10,))
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    init = weights(model)
    parts = [[(0, 4), (4, 6)], [(6, 9), (9, 10)]][rank]
    wrapped = DDP(model)
    Trainer(wrapped, torch.optim.SGD(wrapped.parameters(), lr=0.5), [(x[a:b], y[a:b]) for a, b in parts],
            accumulate=2, device="cpu", progress=False).fit()
    return {"weights": weights(model), "init": init, "x": x, "y": y}


@scenario
def micro_auto_oom_on_rank1(rank: int, out: Path) -> dict[str, Any]:
    """micro_batch_size=auto with an out-of-memory error on rank 1 only (BatchNorm, dropout): both ranks must halve
    together (no hang), then the same run with micro_batch_size at the size auto ended at, for comparison."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    from tests.reliability.oom_models import net
    from trickbag.train.trainer import Trainer

    g = torch.Generator().manual_seed(5)
    x, y = torch.randn(64, 2, 4, generator=g), torch.randint(0, 3, (64,), generator=g)
    shard = [(x[a:a + 8], y[a:a + 8]) for a in range(rank * 32, rank * 32 + 32, 8)]
    result: dict[str, Any] = {}
    for micro in ("auto", 2):
        torch.manual_seed(0)
        model = net(3, "backward", first=2, ranks=(1,))
        wrapped = DDP(model)
        torch.manual_seed(1 + rank)
        t = Trainer(wrapped, torch.optim.SGD(wrapped.parameters(), lr=0.1, momentum=0.9), shard, max_epochs=2,
                    accumulate=2, device="cpu", progress=False, micro_batch_size=micro)
        t.fit()
        result[str(micro)] = {"weights": weights(model), "size": t.micro.size, "raised": list(model[5].raised)}
    return result


@scenario
def spike_on_rank1(rank: int, out: Path) -> dict[str, Any]:
    """train.spike=skip with the spikes planted on rank 1's batches only: every rank must skip the same updates."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    from tests.reliability.test_spike import Spikes
    from trickbag.train.trainer import Trainer

    g = torch.Generator().manual_seed(5)
    x = torch.randn(640, 10, generator=g)
    y = (x[:, :3].sum(1) > 0).long()
    shard = [(x[a:a + 16], y[a:a + 16]) for a in range(rank * 320, rank * 320 + 320, 16)]
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 2))
    wrapped = DDP(model)
    at = {(2, 3), (3, 7)} if rank == 1 else set()
    t = Trainer(wrapped, torch.optim.SGD(wrapped.parameters(), lr=0.1, momentum=0.9), shard, max_epochs=4,
                device="cpu", progress=False, spike="skip", plugins=[Spikes(at)])
    t.fit()
    assert t.spike is not None
    return {"weights": weights(model), "spikes": t.spike.spikes, "skipped": t.state.skipped_steps}


# --------------------------------------------------------------------------- harness
def _entry(rank: int, names: list[str], out_dir: str) -> None:
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(WORLD))  # as torchrun sets them
    torch.set_num_threads(1)
    # rendezvous through a file: no TCP port to pick in advance (gloo's own sockets bind free ports)
    dist.init_process_group("gloo", init_method=f"file://{Path(out_dir) / 'rendezvous'}", rank=rank,
                            world_size=WORLD, timeout=datetime.timedelta(seconds=GLOO_TIMEOUT_S))
    out = Path(out_dir)
    try:
        for name in names:
            work = out / f"work-{name}"
            work.mkdir(exist_ok=True)
            try:
                result = SCENARIOS[name](rank, work)
            except BaseException:
                torch.save({"error": traceback.format_exc()}, out / f"{name}.{rank}.pt")
                raise
            torch.save(result, out / f"{name}.{rank}.pt")
            dist.barrier()
    finally:
        dist.destroy_process_group()


def run_ranks(names: list[str], out_dir: Path, timeout_s: float = 240.0) -> dict[str, Any]:
    """Run ``names`` in order in WORLD spawned processes; ``{name: [rank0, rank1] or error text}``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "rendezvous").unlink(missing_ok=True)  # a stale rendezvous file would confuse the new job
    failure: str | None = None
    ctx = mp.start_processes(
        _entry, args=(list(names), str(out_dir)), nprocs=WORLD, join=False, start_method="spawn"
    )
    deadline = time.monotonic() + timeout_s
    try:
        while not ctx.join(timeout=1.0):
            if time.monotonic() > deadline:
                failure = f"the 2-process job did not finish within {timeout_s:.0f} s (hang?)"
                break
    except Exception as exc:  # a rank failed: torch.multiprocessing already terminated the others
        failure = f"a rank failed: {str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}"
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.kill()
                p.join(5)
    results: dict[str, Any] = {}
    for name in names:
        per_rank = []
        for rank in range(WORLD):
            path = out_dir / f"{name}.{rank}.pt"
            per_rank.append(torch.load(path, weights_only=False) if path.exists() else None)  # noqa: TB403 (our own worker results)
        errors = [r["error"] for r in per_rank if isinstance(r, dict) and "error" in r]
        if errors:
            results[name] = "scenario raised:\n" + errors[0]
        elif any(r is None for r in per_rank):
            results[name] = f"scenario did not finish ({failure or 'no result written'})"
        else:
            results[name] = per_rank
    return results
