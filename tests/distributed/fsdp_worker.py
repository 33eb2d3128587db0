"""Run under torchrun by test_fsdp.py: build a run's recipe on this many processes with FSDP2, load the run's newest
(sharded) checkpoint into it, and have rank 0 save what every process then holds, gathered whole: the model, the
optimizer state and the EMA shadow. ``python -m torch.distributed.run --nproc-per-node N fsdp_worker.py RUN OUT``"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.distributed as dist


def main(run_dir: str, out: str) -> None:
    from trickbag.nn import unwrap
    from trickbag.recipe import load_run_recipe
    from trickbag.train.build import build
    from trickbag.train.plugins.run_folder import find_resume_checkpoint
    from trickbag.train.sharded import gather_full, is_sharded

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    try:
        recipe = load_run_recipe(Path(run_dir), [])
        trainer, _ = build(recipe)
        assert is_sharded(unwrap(trainer.model)), "the model was not sharded"
        found = find_resume_checkpoint(Path(run_dir))
        assert found is not None
        trainer.load_state_dict(found[1])
        ema = next(p for p in trainer.plugins if p.key == "ema")
        held = {
            "world": dist.get_world_size(),
            "local_numel": sum(p.to_local().numel() for p in unwrap(trainer.model).parameters()),
            "model": gather_full(unwrap(trainer.model).state_dict()),
            "optimizer": gather_full(trainer.optimizer.state_dict()),
            "ema": gather_full(ema.state_dict()),
            "step": trainer.state.step,
        }
        if dist.get_rank() == 0:
            torch.save(held, out)
        dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
    from trickbag.cli._common import exit_torchrun_worker

    exit_torchrun_worker(0)  # skip the interpreter's teardown while gloo threads may still hold tensors (SIGABRT)
