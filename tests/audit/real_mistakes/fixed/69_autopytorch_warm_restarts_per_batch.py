# Fixed version of ../69_autopytorch_warm_restarts_per_batch.py: silent on the codes that file expects.
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
        scheduler.step()  # not: TB115
