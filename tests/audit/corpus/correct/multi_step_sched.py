import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402


def train(model, loader, criterion, epochs=90):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    warmup = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda it: min(1.0, (it + 1) / 500))
    decay = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[30, 60], gamma=0.1)
    it = 0
    for epoch in range(epochs):
        model.train()
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            if it < 500:
                warmup.step()
            it += 1
        decay.step()
