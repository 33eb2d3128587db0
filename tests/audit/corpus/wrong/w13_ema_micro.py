import torch
from timm.utils import ModelEmaV2


def train(model, loader, loss_fn, accum=4):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model_ema = ModelEmaV2(model, decay=0.9998)
    for i, (x, y) in enumerate(loader):
        loss = loss_fn(model(x), y) / accum
        loss.backward()
        model_ema.update(model)  # expect: TB108
        if (i + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()
