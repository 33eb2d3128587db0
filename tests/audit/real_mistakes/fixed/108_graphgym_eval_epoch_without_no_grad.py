# Fixed version of ../108_graphgym_eval_epoch_without_no_grad.py: silent on the codes that file expects.
import torch


def train_epoch(loader, model, optimizer, scheduler, loss_fn):
    model.train()
    for batch in loader:
        optimizer.zero_grad()
        pred, true = model(batch)
        loss = loss_fn(pred, true)
        loss.backward()
        optimizer.step()
    scheduler.step()


@torch.no_grad()
def eval_epoch(loader, model, loss_fn):
    model.eval()
    total = 0.0
    for batch in loader:
        pred, true = model(batch)  # not: TB203
        total += loss_fn(pred, true).item()
    return total / len(loader)


def train(loaders, model, optimizer, scheduler, loss_fn, max_epoch):
    for _ in range(max_epoch):
        train_epoch(loaders[0], model, optimizer, scheduler, loss_fn)
        for loader in loaders[1:]:
            eval_epoch(loader, model, loss_fn)
