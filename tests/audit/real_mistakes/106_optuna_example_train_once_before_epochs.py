# Reconstructed after optuna/optuna PR #1725 ("model.train() should be called every epoch before training, because
# the model.eval() below has changed the mode of the model", merged with the maintainers' "Good catch!"): the PyTorch
# example called model.train() once before the epoch loop and validated with model.eval() at the end of each epoch.
import torch
import torch.nn.functional as F


def objective(model, optimizer, train_loader, valid_loader, epochs):
    model.train()
    accuracy = 0.0
    for _epoch in range(epochs):
        for data, target in train_loader:
            optimizer.zero_grad()
            output = model(data)  # also-ok: TB202
            loss = F.nll_loss(output, target)
            loss.backward()
            optimizer.step()

        model.eval()  # expect: TB202
        correct = 0
        with torch.no_grad():
            for data, target in valid_loader:
                pred = model(data).argmax(dim=1, keepdim=True)
                correct += pred.eq(target.view_as(pred)).sum().item()
        accuracy = correct / len(valid_loader.dataset)
    return accuracy
