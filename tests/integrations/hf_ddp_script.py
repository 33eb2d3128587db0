"""The HF Trainer with tricks under ``torch.distributed.run`` (gloo, CPU): ``python -m torch.distributed.run
--nproc_per_node 2 hf_ddp_script.py OUT``; rank 0 writes the final weights to OUT/final.pt. Run directly (one
process) with ``OUT single`` it trains the same global batch in one process."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
torch.set_num_threads(1)

from hf_models import HFNet, data, hf_args, hf_dataset  # noqa: E402

from trickbag.integrations.hf import TricksCallback, TricksTrainer  # noqa: E402

TRICKS = {"ema": {"decay": 0.9}, "label_smoothing": {"eps": 0.1}, "clip": {"max_norm": 0.5},
          "layer_decay": {"decay": 0.5, "depth": 2}, "sam": {"rho": 0.05}}


def main(out: str, single: bool) -> None:
    torch.manual_seed(0)
    model = HFNet()
    x, y = data(48)  # 48 = 3 global batches of 16: no rank pads its last batch
    args = hf_args(out, per_device_train_batch_size=16 if single else 8, ddp_backend=None if single else "gloo")
    trainer = TricksTrainer(model=model, args=args, train_dataset=hf_dataset(x, y),
                            callbacks=[TricksCallback(TRICKS)])
    assert args.world_size == (1 if single else 2), args.world_size
    trainer.train()
    if args.process_index == 0:
        torch.save(model.state_dict(), os.path.join(out, "final.pt"))
    if torch.distributed.is_initialized():  # close the group before exit: a gloo thread still running when the
        torch.distributed.barrier()  # interpreter ends aborts the process ("terminate called ...", SIGABRT)
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], len(sys.argv) > 2 and sys.argv[2] == "single")
    from trickbag.cli._common import exit_torchrun_worker

    exit_torchrun_worker(0)  # skip the interpreter's teardown while gloo threads may still hold tensors (SIGABRT)
