# Reconstructed after lufficc/SSD PR #98 ("In PyTorch >=1.1.0 call `optimizer.step()` after
# `lr_scheduler.step()`", merged, https://github.com/lufficc/SSD/pull/98): ssd/engine/trainer.py do_train() called
# scheduler.step() at the top of every iteration, before the forward pass and optimizer.step(), which fires
# PyTorch's "Detected call of `lr_scheduler.step()` before `optimizer.step()`" warning and shifts the warmup /
# multi-step schedule by one iteration.  The maintainer merged the fix, which steps the scheduler right after
# optimizer.step().
import time

import torch


def do_train(cfg, model, data_loader, optimizer, scheduler, checkpointer, device, arguments, meters, logger):
    max_iter = len(data_loader)
    start_iter = arguments["iteration"]
    model.train()
    start_training_time = time.time()
    end = time.time()
    for iteration, (images, targets, _) in enumerate(data_loader, start_iter):
        iteration = iteration + 1
        arguments["iteration"] = iteration
        scheduler.step()  # expect: TB101

        images = images.to(device)
        targets = targets.to(device)
        loss_dict = model(images, targets=targets)
        loss = sum(loss for loss in loss_dict.values())

        meters.update(total_loss=loss.item(), **{k: v.item() for k, v in loss_dict.items()})

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        batch_time = time.time() - end
        end = time.time()
        meters.update(time=batch_time)
        if iteration % cfg.log_step == 0:
            logger.info(f"iter: {iteration:06d}, lr: {optimizer.param_groups[0]['lr']:.5f}, {meters}")
        if iteration % cfg.save_step == 0:
            checkpointer.save(f"model_{iteration:06d}", **arguments)
        if iteration >= max_iter:
            break

    checkpointer.save("model_final", **arguments)
    total_training_time = int(time.time() - start_training_time)
    logger.info(f"Total training time: {total_training_time}s")
    return model
