"""Run by test_lightning_resume.py: ``straight <dir> <out> <workers> <kill>`` trains 3 epochs of 5 batches;
``killed`` trains with a ModelCheckpoint and is SIGKILLed right after a checkpoint; ``resume`` continues with
``fit(ckpt_path=<dir>/last.ckpt)``; the final weights go to ``<out>``. ``<kill>``: ``epoch`` (the checkpoint at the end
of epoch 0) or ``step<N>`` (``ModelCheckpoint(every_n_train_steps=N)``, killed once update N is on disk).

Environment: ``TB_DROP`` the dropout probability, ``TB_SHUFFLE`` the shuffling loader's seed (unset: in order),
``TB_NOISE=1`` a random transform in the dataset (drawn in the loader's workers, or in the main process),
``TB_ACCUMULATE`` Lightning's accumulate_grad_batches, ``TB_DDP=1`` ``strategy="ddp"`` with 2 gloo CPU processes
(each with its own RNG stream; rank 0 writes the weights; each process kills itself at the same point),
``TB_VAL=1`` a validation loader (Lightning's checkpoints are then written at validation's end, before the epoch's
end), ``TB_SWA=1`` SWA instead of EMA, ``TRICKBAG_TEST_IGNORE_STATE=1`` the negative control (the callback's state
in the checkpoint is not loaded)."""

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
#: ``TB_SWA=1``: SWA (averaged at each epoch's end, its own LR schedule) instead of EMA
SWA_TRICKS = {"swa": {"start_epoch": 0, "update_bn": False}, "mix": {"mixup_alpha": 0.4, "cutmix_alpha": 0.0}}


class Noisy(torch.utils.data.Dataset):
    """A random transform: noise from torch's global RNG (a worker's own, seeded by the loader)."""

    def __init__(self, ds: Any) -> None:
        self.ds = ds

    def __len__(self) -> int:
        return len(self.ds)

    def __getitem__(self, i: int) -> Any:
        x, y = self.ds[i]
        return x + 0.1 * torch.randn_like(x), y


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

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            self.log("val_loss", torch.nn.functional.cross_entropy(self(batch[0]), batch[1]))

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.2, momentum=0.9)

    return Module()


def main(mode: str, where: str, out: str, workers: int, kill: str) -> None:
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import Callback, ModelCheckpoint

    from trickbag.integrations.lightning import TricksCallback

    every = int(kill[4:]) if kill.startswith("step") else None

    class Kill(Callback):
        def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
            if every is None and trainer.current_epoch == 1:  # the epoch-end checkpoint of epoch 0 is on disk
                os.kill(os.getpid(), signal.SIGKILL)

        def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
            if every is not None and trainer.global_step == every:  # update `every`'s checkpoint is on disk
                os.kill(os.getpid(), signal.SIGKILL)

    if os.environ.get("TRICKBAG_TEST_IGNORE_STATE"):  # the negative control: trickbag's state not restored
        TricksCallback.load_state_dict = lambda self, sd: None  # type: ignore[method-assign]
    torch.set_num_threads(1)
    torch.manual_seed(7)
    callbacks: list[Any] = [TricksCallback(tricks=SWA_TRICKS if os.environ.get("TB_SWA") else TRICKS, seed=0)]
    if mode != "straight":
        callbacks.append(ModelCheckpoint(dirpath=where, save_last=True, every_n_train_steps=every))
    if mode == "killed":
        callbacks.append(Kill())
    m = module()
    ddp = bool(os.environ.get("TB_DDP"))
    if ddp:  # the processes draw different dropout masks and noise
        torch.manual_seed(100 + int(os.environ.get("LOCAL_RANK", "0")))
    trainer = pl.Trainer(max_epochs=3, accelerator="cpu", devices=2 if ddp else 1, strategy="ddp" if ddp else "auto",
                         logger=False, enable_progress_bar=False,
                         enable_model_summary=False, num_sanity_val_steps=0, callbacks=callbacks,
                         enable_checkpointing=mode != "straight",
                         accumulate_grad_batches=int(os.environ.get("TB_ACCUMULATE", "1")))
    ckpt = str(Path(where) / "last.ckpt") if mode == "resume" else None
    seed = int(os.environ["TB_SHUFFLE"]) if os.environ.get("TB_SHUFFLE") else None
    ds = Noisy(data()) if os.environ.get("TB_NOISE") else data()
    val = loader(data(), 20) if os.environ.get("TB_VAL") else None  # checkpoints then come at validation's end
    trainer.fit(m, loader(ds, 8, seed=seed, num_workers=workers), val, ckpt_path=ckpt)
    if trainer.global_rank == 0:
        torch.save(flat(m.model), out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] if len(sys.argv) > 5 else "epoch")
