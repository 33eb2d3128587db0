import torch


def train_step(model, batch, opt, loss_fn):
    x, y = batch
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()  # expect: TB104
    return loss.item()


def main(model, loader, loss_fn):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(10):
        for batch in loader:
            train_step(model, batch, opt, loss_fn)
