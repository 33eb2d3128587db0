# Reconstructed after lightly-ai/lightly-train PR #301 ("Resume scheduler properly", merged, https://github.com/lightly-ai/lightly-train/pull/301): _train_task_from_config put the model, optimizer, dataloader and step into the checkpointed TrainTaskState but not the LR scheduler, so with resume_interrupted=True the scheduler restarted at last_epoch=-1 and the learning rate reset to the start of warm-up. Reviewed by the maintainer guarin ("Thanks for the contribution! This LGTM") and merged as commit b5d589a, which adds scheduler=scheduler to the saved/loaded state.
# Fixed version (the merged PR applied).
from typing import Any, TypedDict

import torch
from torch.nn import Module
from torch.optim.lr_scheduler import LRScheduler
from torch.optim.optimizer import Optimizer
from torch.utils.data import DataLoader


class TrainTaskState(TypedDict):
    train_model: Module
    optimizer: Optimizer
    scheduler: LRScheduler
    train_dataloader: DataLoader
    step: int


def save_checkpoint(fabric, out_dir, state: TrainTaskState) -> None:
    fabric.save(out_dir / "checkpoints" / "last.ckpt", state)


def load_checkpoint(fabric, out_dir, state: TrainTaskState) -> None:
    fabric.load(out_dir / "checkpoints" / "last.ckpt", state)


def _train_task_from_config(config, fabric, out_dir, train_model, train_dataloader, InfiniteCycleIterator) -> None:
    train_model.set_train_mode()
    optimizer, scheduler = train_model.get_optimizer(total_steps=config.steps)
    train_model, optimizer = fabric.setup(train_model, optimizer)

    state = TrainTaskState(
        train_model=train_model,
        optimizer=optimizer,
        scheduler=scheduler,  # not: TB???
        train_dataloader=train_dataloader,
        step=-1,
    )

    if config.resume_interrupted:
        load_checkpoint(fabric=fabric, out_dir=out_dir, state=state)

    infinite_train_dataloader = InfiniteCycleIterator(iterable=train_dataloader)
    start_step = state["step"] + 1
    for step in range(start_step, config.steps):
        state["step"] = step
        is_last_step = step + 1 == config.steps
        is_save_ckpt_step = (step + 1) % config.save_every_num_steps == 0

        batch = next(infinite_train_dataloader)
        train_result = train_model.training_step(fabric=fabric, batch=batch, step=step)
        fabric.backward(train_result.loss)
        train_model.clip_gradients(fabric=fabric, optimizer=optimizer)
        optimizer.step()
        optimizer.zero_grad()
        scheduler.step()

        if is_save_ckpt_step or is_last_step:
            save_checkpoint(fabric=fabric, out_dir=out_dir, state=state)
