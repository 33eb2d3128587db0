# Reconstructed after snap-stanford/GraphGym PR #11 ("add torch.no_grad() before evaluation", merged): the evaluation
# epoch of the training loop switched to eval mode and ran the model over the validation and test loaders with
# gradients enabled.


def train_epoch(loader, model, optimizer, scheduler, loss_fn):
    model.train()
    for batch in loader:
        optimizer.zero_grad()
        pred, true = model(batch)
        loss = loss_fn(pred, true)
        loss.backward()
        optimizer.step()
    scheduler.step()


def eval_epoch(loader, model, loss_fn):
    model.eval()
    total = 0.0
    for batch in loader:
        pred, true = model(batch)  # expect: TB203
        total += loss_fn(pred, true).item()
    return total / len(loader)


def train(loaders, model, optimizer, scheduler, loss_fn, max_epoch):
    for _ in range(max_epoch):
        train_epoch(loaders[0], model, optimizer, scheduler, loss_fn)
        for loader in loaders[1:]:
            eval_epoch(loader, model, loss_fn)
