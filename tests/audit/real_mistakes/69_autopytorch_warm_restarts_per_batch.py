# Reconstructed after automl/Auto-PyTorch issue #211 ("[bug] LR Scheduler updating at wrong times": schedulers are
# "only happening batch-wise which is incompatible with CosineAnnealingWarmRestarts", with T_0 in 0..20 epochs;
# the maintainers: "I think this is an urgent fix needed"): the base trainer stepped every scheduler after every
# batch, so a warm-restart period meant in epochs restarted every few batches.
import torch


def train(model, criterion, train_loader, epochs, T_0, lr):
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(optimizer, T_0=T_0)
    for epoch in range(epochs):  # noqa: B007
        for data, targets in train_loader:
            optimizer.zero_grad()
            loss = criterion(model(data), targets)
            loss.backward()
            optimizer.step()
            scheduler.step()  # expect: TB115
