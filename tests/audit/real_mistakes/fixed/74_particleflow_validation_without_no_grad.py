# Fixed version of ../74_particleflow_validation_without_no_grad.py: silent on the codes that file expects.
import torch


def train_and_valid(model, optimizer, loader, is_train, loss_fn):
    if is_train:
        model.train()
    else:
        model.eval()
    epoch_loss = 0.0
    for batch in loader:
        with torch.set_grad_enabled(is_train):
            ypred = model(batch["X"], batch["mask"])  # not: TB203
            loss = loss_fn(ypred, batch["ytarget"])
        if is_train:
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        epoch_loss += loss.detach().item()
    return epoch_loss / len(loader)
