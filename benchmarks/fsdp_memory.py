"""FSDP2 against DDP: what each process holds of the model and its optimizer, and the step time, side by side.

For each world size (``--worlds``, default 2 and 4) and strategy (``ddp``, ``fsdp``), the recipe below is built by
trickbag's own path (``trickbag.train.build.build``: the model, the tricks, ``fully_shard`` or DDP, the optimizer)
in that many spawned CPU processes (gloo), trained for ``--steps`` updates, and rank 0 reports:

* **weights / rank**: bytes of the parameters this process holds (its shards under FSDP: ``DTensor.to_local``);
* **optimizer state / rank**: bytes of the optimizer's state tensors on this process (AdamW: two moments);
* **gradients / rank**: bytes of the gradients after backward, before the optimizer step (measured once);
* **step**: the median wall time of one update (forward, backward, reduction, optimizer step) over the measured
  updates, the first ``--warmup`` left out; and the ratio to DDP at the same world size.

The two strategies of a world size run one after the other in fresh processes (each pays its own start-up); the
machine's load is printed with the numbers. Expected: FSDP holds ~1/N of DDP's bytes, for a time cost of the
all-gathers (on the CPU, gloo's copies are slow; on GPUs with NCCL they overlap with compute).

Run: ``.venv/bin/python benchmarks/fsdp_memory.py [--worlds 2 4] [--model resnet18] [--steps 8] [--threads 1]``
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402


def _bytes(tensors: Any) -> int:
    from trickbag.train.sharded import to_local

    return sum(to_local(t).numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


def _recipe(strategy: str, model: str, steps: int, world: int) -> Any:
    from trickbag.recipe import load_recipe

    batch = 16
    return load_recipe("digits", [
        "data.name=fake", f"data.num_samples={int(batch * world * steps / 0.95) + 8}", "data.shape=[3,32,32]",
        "data.val_fraction=0", "data.test_fraction=0.05", f"data.batch_size={batch}", "data.augment=false",
        f"model.name={model}", "model.kwargs={}", "optim.name=adamw", "optim.lr=0.001", "schedule.name=constant",
        "schedule.warmup_epochs=0",
        "train.epochs=1", f"dist.strategy={strategy}", "log.tensorboard=false", "run.progress=false",
        "run.plots=false", "train.threads=1",
    ])


def _worker(rank: int, world: int, strategy: str, args: argparse.Namespace, folder: str) -> None:
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world))
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", init_method=f"file://{folder}/rendezvous-{strategy}-{world}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=600))
    try:
        from trickbag.nn import unwrap
        from trickbag.plugin.interface import Plugin
        from trickbag.train.build import build

        trainer, _ = build(_recipe(strategy, args.model, args.steps, world))
        times: list[float] = []
        grads: list[int] = []

        class Clock(Plugin):
            def on_batch_start(self, state: Any) -> None:
                self.t0 = time.perf_counter()

            def on_after_backward(self, state: Any) -> None:
                if not grads:
                    grads.append(_bytes(p.grad for p in state.model.parameters() if p.grad is not None))

            def on_step(self, state: Any) -> None:
                times.append(time.perf_counter() - self.t0)

        trainer.add_plugin(Clock())
        trainer.fit()
        model = unwrap(trainer.model)
        state = [t for s in trainer.optimizer.state.values() for t in s.values()]
        row = {"weights": _bytes(model.parameters()), "optimizer": _bytes(state), "grads": grads[0],
               "step": statistics.median(times[args.warmup:]), "steps": len(times)}
        if rank == 0:
            torch.save(row, f"{folder}/result-{strategy}-{world}.pt")
    finally:
        dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--model", default="resnet18", help="a built-in or torchvision model (default resnet18)")
    parser.add_argument("--steps", type=int, default=8, help="updates per run (default 8)")
    parser.add_argument("--warmup", type=int, default=2, help="first updates left out of the step time")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per process (default 1)")
    args = parser.parse_args()
    C.setup(args, f"FSDP2 vs DDP: bytes per process and step time ({args.model}, AdamW, CPU/gloo)")
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for world in args.worlds:
            got = {}
            for strategy in ("ddp", "fsdp"):
                mp.start_processes(_worker, args=(world, strategy, args, folder), nprocs=world, start_method="spawn")
                got[strategy] = torch.load(f"{folder}/result-{strategy}-{world}.pt", weights_only=True)
            for strategy in ("ddp", "fsdp"):
                r, d = got[strategy], got["ddp"]
                mb = lambda n: f"{n / 2**20:.1f} MB"  # noqa: E731
                rows.append([world, strategy, mb(r["weights"]), f"{r['weights'] / d['weights']:.2f}",
                             mb(r["optimizer"]), f"{r['optimizer'] / d['optimizer']:.2f}", mb(r["grads"]),
                             f"{r['step'] * 1000:.0f} ms", f"{r['step'] / d['step']:.2f}"])
    print(C.markdown_table(["processes", "strategy", "weights / rank", "vs ddp", "optimizer state / rank", "vs ddp",
                            "gradients / rank", "step", "vs ddp"], rows))
    print(f"\nload after the runs: {os.getloadavg()[0]:.2f} (1 min)")


if __name__ == "__main__":
    main()
