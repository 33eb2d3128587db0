# Reconstructed after ray-project/ray PR #40940 ("Make sure that loss can be freed after every iteration",
# merged, closes #40714): the DeepSpeed fine-tuning template summed `loss_sum += loss` over the epoch, keeping
# every step's graph alive; the fix sums loss.item().
import torch


def training_function(model, optimizer, lr_scheduler, train_dataloader, accelerator, num_epochs):
    for epoch in range(num_epochs):
        loss_sum = torch.tensor(0.0)
        model.train()
        for batch in train_dataloader:
            with accelerator.accumulate(model):
                outputs = model(**batch)
                loss = outputs.loss
                loss_sum += loss  # expect: TB204
                accelerator.backward(loss)
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()
        print(epoch, loss_sum.item() / len(train_dataloader))
