# Reconstructed after fredzzhang/atlas PR #26 ("normalise the loss by the number of accumulation steps", merged):
# the fine-tuning loop accumulated gradients over several batches without dividing each batch's loss.
import torch


def finetune(args, model, loss_fn, data_loader, optimizer, scheduler, num_batches):
    model.train()
    for i, batch in enumerate(data_loader):
        step = i // args.num_grad_accumulation
        inputs, labels = batch["images"].cuda(), batch["labels"].cuda()
        logits = model(inputs)
        loss = loss_fn(logits, labels)
        loss.backward()  # expect: TB105
        if (i + 1) % args.num_grad_accumulation == 0:
            scheduler(step)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()
