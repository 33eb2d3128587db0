"""Run by test_lightning_ddp.py: Lightning ``strategy="ddp"`` with 2 gloo CPU processes and the TricksCallback;
rank 0 writes the final weights to argv[1]. Lightning starts the second process by running this file again."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.integrations.conftest import data, flat, loader, net  # noqa: E402
from tests.integrations.test_lightning_ddp import DDP_TRICKS, lightning_module  # noqa: E402


def main(out: str) -> None:
    import lightning.pytorch as pl

    from trickbag.integrations.lightning import TricksCallback

    torch.set_num_threads(1)
    module = lightning_module(net())
    trainer = pl.Trainer(max_epochs=2, accelerator="cpu", devices=2, strategy="ddp", logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                         num_sanity_val_steps=0, callbacks=[TricksCallback(tricks=DDP_TRICKS, seed=0, num_classes=3)])
    trainer.fit(module, loader(data(), 4))
    if trainer.global_rank == 0:
        torch.save(flat(module.model), out)


if __name__ == "__main__":
    main(sys.argv[1])
