"""The HF resume under ``torch.distributed.run`` (2 gloo CPU processes): ``python -m torch.distributed.run
--nproc_per_node 2 hf_ddp_resume_script.py OUT straight|kill|resume STEP``. ``kill``: every process SIGKILLs
itself right after HF's checkpoint of update STEP is on disk (both processes wrote theirs: a barrier first);
``resume``: ``train(resume_from_checkpoint=True)``; rank 0 writes the final weights to OUT/final.pt.

Everything draws randomness: dropout (the global RNG, a different stream per process), HF's shuffling sampler,
mix (its own generator, per process) and EMA's shadow. 48 samples, 8 per process and batch: 3 updates an epoch,
3 epochs. ``TRICKBAG_TEST_IGNORE_STATE=1`` is the negative control (trickbag's state in the checkpoint is not
loaded)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).parent))
torch.set_num_threads(1)

from hf_models import HFNet, data, hf_args, hf_dataset  # noqa: E402
from transformers import TrainerCallback  # noqa: E402

from trickbag.integrations.hf import TricksCallback, TricksTrainer  # noqa: E402

TRICKS = {"ema": {"decay": 0.9}, "mix": {"mixup_alpha": 0.4, "cutmix_alpha": 1.0}, "clip": {"max_norm": 0.5}}


class DropNet(HFNet):
    """:class:`HFNet` with dropout on its input: the global RNG decides every forward."""

    def __init__(self) -> None:
        super().__init__()
        self.drop = torch.nn.Dropout(float(os.environ.get("TB_DROP", "0.2")))

    def forward(self, pixel_values: torch.Tensor, labels: torch.Tensor | None = None,  # type: ignore[override]
                **kwargs: Any) -> dict[str, torch.Tensor]:
        return super().forward(self.drop(pixel_values), labels, **kwargs)


class PerRankSeed(TrainerCallback):
    """HF seeds every process alike; each process here draws its own dropout masks (a resume restores them from
    HF's rng_state_<rank>.pth, loaded after this hook)."""

    def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        torch.manual_seed(100 + args.process_index)


class KillAfterSave(TrainerCallback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_save(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if state.global_step == self.step:
            torch.distributed.barrier()  # every process's files are written
            os.kill(os.getpid(), signal.SIGKILL)


def main(out: str, mode: str, step: int) -> None:
    if os.environ.get("TRICKBAG_TEST_IGNORE_STATE"):  # the negative control: trickbag's state not restored
        TricksCallback.load_state_dict = lambda self, sd: None  # type: ignore[method-assign]
    torch.manual_seed(0)
    model = DropNet()
    x, y = data(48)
    tricks = {k: v for k, v in TRICKS.items() if k not in os.environ.get("TB_OFF", "").split(",")}
    callbacks: list[Any] = [TricksCallback(tricks), PerRankSeed()]
    if mode == "kill":
        callbacks.append(KillAfterSave(step))
    args = hf_args(out, train_sampling_strategy="random", save_strategy="steps" if mode == "kill" else "no",
                   save_steps=step, num_train_epochs=3, ddp_backend="gloo")
    trainer = TricksTrainer(model=model, args=args, train_dataset=hf_dataset(x, y), callbacks=callbacks)
    assert args.world_size == 2, args.world_size
    trainer.train(resume_from_checkpoint=True if mode == "resume" else None)
    if args.process_index == 0:
        torch.save(model.state_dict(), os.path.join(out, "final.pt"))
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
    from trickbag.cli._common import exit_torchrun_worker

    exit_torchrun_worker(0)  # skip the interpreter's teardown while gloo threads may still hold tensors (SIGABRT)
