import torch


def train(model, loader, criterion, lr=0.01, epochs=3):
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1, 0.9)
    step = 0
    data_iter = iter(loader)
    while step < 1000:
        try:
            x, y = next(data_iter)
        except StopIteration:
            data_iter = iter(loader)
            continue
        scheduler.step()  # expect: TB101
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
        step += 1
