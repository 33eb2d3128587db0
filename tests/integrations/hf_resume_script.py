"""A small HF run with tricks for the resume tests: ``python hf_resume_script.py OUT straight|kill|resume STEP
WORKERS [SAVE_STEPS]``; ``kill`` SIGKILLs itself right after the checkpoint of update STEP is written; the final
weights go to OUT/final.pt."""

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


class KillAfterSave(TrainerCallback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_save(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if state.global_step == self.step:
            os.kill(os.getpid(), signal.SIGKILL)


def main(out: str, mode: str, step: int, workers: int, save_steps: int) -> None:
    if os.environ.get("TRICKBAG_TEST_IGNORE_STATE"):  # the negative control: trickbag's state not restored
        TricksCallback.load_state_dict = lambda self, sd: None  # type: ignore[method-assign]
    torch.manual_seed(0)
    model = HFNet()
    x, y = data(44)
    callbacks: list = [TricksCallback(TRICKS)]
    if mode == "kill":
        callbacks.append(KillAfterSave(step))
    args = hf_args(out, train_sampling_strategy="random", save_strategy="steps" if mode != "straight" else "no",
                   save_steps=save_steps, dataloader_num_workers=workers, num_train_epochs=2)
    trainer = TricksTrainer(model=model, args=args, train_dataset=hf_dataset(x, y), callbacks=callbacks)
    trainer.train(resume_from_checkpoint=True if mode == "resume" else None)
    torch.save(model.state_dict(), os.path.join(out, "final.pt"))


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], a[1], int(a[2]), int(a[3]), int(a[4]) if len(a) > 4 else int(a[2]))
