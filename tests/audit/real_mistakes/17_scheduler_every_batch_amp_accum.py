# Reconstructed after h2oai/h2o-llmstudio issue #663 ("Scheduler should consider gradient accumulation"): the
# training loop stepped the optimizer once every grad_accumulation batches but the scheduler on every batch.
import torch


def run_train(model, train_dataloader, optimizer, scheduler, cfg):
    scaler = torch.amp.GradScaler("cuda")
    model.train()
    for itr, batch in enumerate(train_dataloader):
        with torch.autocast("cuda"):
            output_dict = model.forward(batch)
        loss = output_dict["loss"] / cfg.grad_accumulation
        scaler.scale(loss).backward()
        if (itr + 1) % cfg.grad_accumulation == 0:
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
        if scheduler is not None:
            scheduler.step()  # expect: TB102
