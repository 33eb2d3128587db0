# Fixed version of ../63_ivadomed_epoch_scheduler_stepped_per_batch.py: silent on the codes that file expects.
import torch.optim as optim


def train(model, loss_fn, train_loader, initial_lr, num_epochs):
    optimizer = optim.Adam(model.parameters(), lr=initial_lr)
    scheduler = optim.lr_scheduler.CosineAnnealingLR(optimizer, num_epochs)
    for epoch in range(1, num_epochs + 1):  # noqa: B007
        model.train()
        for batch in train_loader:
            input_samples, gt_samples = batch["input"], batch["gt"]
            preds = model(input_samples)
            loss = loss_fn(preds, gt_samples)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        scheduler.step()  # not: TB115
