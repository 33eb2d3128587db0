# Reconstructed after ivadomed/ivadomed PR #55 ("Fix scheduler updating": "Scheduler was incorrectly stepped in the
# batch loop instead of in the epoch loop ... causing the LR to be updated after each batch instead of after each
# epoch", merged): a cosine schedule whose horizon is the number of epochs was stepped after every batch.
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
            scheduler.step()  # expect: TB115
