import torch
from torch.optim.swa_utils import AveragedModel


def train(model, loader, loss_fn, epochs=30):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    swa_model = AveragedModel(model)
    for epoch in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            swa_model.update_parameters(model)  # expect: TB108
            optimizer.step()
