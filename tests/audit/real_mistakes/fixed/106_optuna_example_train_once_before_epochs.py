# Fixed version of ../106_optuna_example_train_once_before_epochs.py: silent on the codes that file expects.
import torch
import torch.nn.functional as F


def objective(model, optimizer, train_loader, valid_loader, epochs):
    accuracy = 0.0
    for _epoch in range(epochs):
        model.train()
        for data, target in train_loader:
            optimizer.zero_grad()
            output = model(data)  # not: TB202
            loss = F.nll_loss(output, target)
            loss.backward()
            optimizer.step()

        model.eval()
        correct = 0
        with torch.no_grad():
            for data, target in valid_loader:
                pred = model(data).argmax(dim=1, keepdim=True)
                correct += pred.eq(target.view_as(pred)).sum().item()
        accuracy = correct / len(valid_loader.dataset)
    return accuracy
