# Reconstructed after facebookresearch/vilbert-multi-task PR #37 ("[fix] Optimizer step order", merged as b51d5f1, https://github.com/facebookresearch/vilbert-multi-task/pull/37): in train_tasks.py the multi-task loop called warmup_scheduler.step() before optimizer.step() at every accumulation boundary, so (with PyTorch >= 1.1 schedulers) the first value of the warmup/linear schedule was skipped and each update used the learning rate meant for the next step. The maintainers' merged fix moves optimizer.step() and model.zero_grad() in front of warmup_scheduler.step().
# Fixed version (the merged PR applied).
import numpy as np
import torch
from tqdm import tqdm
from pytorch_transformers.optimization import AdamW, WarmupConstantSchedule, WarmupLinearSchedule
from torch.optim.lr_scheduler import CosineAnnealingLR

from vilbert.task_utils import ForwardModelsTrain


def train(args, model, optimizer_grouped_parameters, base_lr, task_ids, task_cfg, device, task_dataloader_train,
          task_losses, loss_scale, task_stop_controller, median_num_iter, num_train_optimization_steps, tbLogger,
          default_gpu):
    optimizer = AdamW(optimizer_grouped_parameters, lr=base_lr, correct_bias=False)

    warmpu_steps = args.warmup_proportion * num_train_optimization_steps

    if args.lr_scheduler == "warmup_linear":
        warmup_scheduler = WarmupLinearSchedule(
            optimizer, warmup_steps=warmpu_steps, t_total=num_train_optimization_steps
        )
    else:
        warmup_scheduler = WarmupConstantSchedule(optimizer, warmup_steps=warmpu_steps)

    if args.lr_scheduler == "cosine":
        lr_scheduler = CosineAnnealingLR(
            optimizer, T_max=median_num_iter * args.num_train_epochs
        )

    startIterID = 0
    global_step = 0
    start_epoch = 0

    task_iter_train = {name: None for name in task_ids}
    task_count = {name: 0 for name in task_ids}
    for epochId in tqdm(range(start_epoch, args.num_train_epochs), desc="Epoch"):
        model.train()
        for step in range(median_num_iter):
            iterId = startIterID + step + (epochId * median_num_iter)
            first_task = True
            for task_id in task_ids:
                is_forward = False
                if (not task_stop_controller[task_id].in_stop) or (
                    iterId % args.train_iter_gap == 0
                ):
                    is_forward = True

                if is_forward:
                    loss, score = ForwardModelsTrain(
                        args,
                        task_cfg,
                        device,
                        task_id,
                        task_count,
                        task_iter_train,
                        task_dataloader_train,
                        model,
                        task_losses,
                    )

                    loss = loss * loss_scale[task_id]
                    if args.gradient_accumulation_steps > 1:
                        loss = loss / args.gradient_accumulation_steps

                    loss.backward()
                    if (step + 1) % args.gradient_accumulation_steps == 0:
                        optimizer.step()  # not: TB101
                        model.zero_grad()
                        if first_task and (
                            global_step < warmpu_steps
                            or args.lr_scheduler == "warmup_linear"
                        ):
                            warmup_scheduler.step()  # not: TB101
                        if first_task:
                            global_step += 1
                            first_task = False

                        if default_gpu:
                            tbLogger.step_train(
                                epochId,
                                iterId,
                                float(loss),
                                float(score),
                                optimizer.param_groups[0]["lr"],
                                task_id,
                                "train",
                            )

            if "cosine" in args.lr_scheduler and global_step > warmpu_steps:
                lr_scheduler.step()
    return model
