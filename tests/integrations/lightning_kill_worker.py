"""Run by test_lightning_resume.py: ``straight <out>`` trains 3 epochs; ``killed <dir>`` trains with a
ModelCheckpoint and is SIGKILLed right after the checkpoint at the end of epoch 1; ``resume <dir> <out>`` continues
with ``fit(ckpt_path="last")``. Argument 4: the loader's num_workers."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.integrations.conftest import clone, data, flat, loader, net  # noqa: E402

TRICKS = {"ema": {"decay": 0.8}, "mix": {"mixup_alpha": 0.4, "cutmix_alpha": 0.0}}


def module() -> Any:
    import lightning.pytorch as pl

    class Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.model = clone(net())
            # dropout draws from the global RNG: the resume must restore it
            self.drop = torch.nn.Dropout(float(os.environ.get("TB_DROP", "0.2")))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.model(self.drop(x))

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            return self.trickbag_loss(self(batch[0]), batch[1])

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.2, momentum=0.9)

    return Module()


def main(mode: str, where: str, out: str, workers: int) -> None:
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import Callback, ModelCheckpoint

    from trickbag.integrations.lightning import TricksCallback

    class Kill(Callback):
        def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
            if trainer.current_epoch == 1:  # the epoch-end checkpoint of epoch 0 is on disk
                os.kill(os.getpid(), signal.SIGKILL)

    torch.set_num_threads(1)
    torch.manual_seed(7)
    callbacks: list[Any] = [TricksCallback(tricks=TRICKS, seed=0)]
    if mode != "straight":
        callbacks.append(ModelCheckpoint(dirpath=where, save_last=True))
    if mode == "killed":
        callbacks.append(Kill())
    m = module()
    trainer = pl.Trainer(max_epochs=3, accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                         enable_model_summary=False, num_sanity_val_steps=0, callbacks=callbacks,
                         enable_checkpointing=mode != "straight")
    ckpt = str(Path(where) / "last.ckpt") if mode == "resume" else None
    seed = int(os.environ["TB_SHUFFLE"]) if os.environ.get("TB_SHUFFLE") else None
    trainer.fit(m, loader(data(), 8, seed=seed, num_workers=workers), ckpt_path=ckpt)
    torch.save(flat(m.model), out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
