import torch


def train_one_epoch(model, loader, optimizer, loss_fn):
    model.train()
    for x, y in loader:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()


def main(model, loader, loss_fn):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.95)
    for epoch in range(20):
        scheduler.step()  # expect: TB101
        train_one_epoch(model, loader, optimizer, loss_fn)
