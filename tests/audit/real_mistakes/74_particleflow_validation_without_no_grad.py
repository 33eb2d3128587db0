# Reconstructed after jpata/particleflow PR #290 ("fix torch no grad": "no_grad is required around the model
# forward pass in the validation loop to allow larger batch sizes not to OOM", merged): the shared train/valid
# epoch function ran the validation forward passes with gradients enabled.
import torch  # noqa: F401


def train_and_valid(model, optimizer, loader, is_train, loss_fn):
    if is_train:
        model.train()
    else:
        model.eval()
    epoch_loss = 0.0
    for batch in loader:
        ypred = model(batch["X"], batch["mask"])  # expect: TB203
        loss = loss_fn(ypred, batch["ytarget"])
        if is_train:
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        epoch_loss += loss.detach().item()
    return epoch_loss / len(loader)
