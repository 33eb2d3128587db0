# Fixed version of ../137_lingua_clip_every_micro_step.py: silent on the codes that file expects.
from dataclasses import dataclass

import torch


@dataclass
class TrainState:
    step: int = 0
    acc_step: int = 0


def train(args, model, optimizer, scheduler, data_iterator, train_state: TrainState):
    model.train()
    grad_norm = -1.0
    while train_state.step < args.steps:
        batch = next(data_iterator)
        input_ids = batch["input_ids"].cuda()
        labels = batch["labels"].cuda()

        train_state.acc_step += 1
        train_state.acc_step = train_state.acc_step % args.grad_acc_steps

        loss = model(input_ids, labels)
        loss = loss / args.grad_acc_steps
        loss.backward()
        loss = loss.detach() * args.grad_acc_steps

        if train_state.acc_step == 0:
            grad_norm = torch.nn.utils.clip_grad_norm_(  # not: TB109
                model.parameters(), max_norm=args.optim.clip, foreach=True
            )
            grad_norm = grad_norm.item()
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            train_state.step += 1

        if train_state.step % args.log_freq == 0 and train_state.acc_step == 0:
            print(f"step {train_state.step} loss {loss.item():.4f} grad {grad_norm:.3f}")
