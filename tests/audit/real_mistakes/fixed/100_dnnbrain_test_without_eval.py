# Fixed version of ../100_dnnbrain_test_without_eval.py: silent on the codes that file expects.
import torch


def dnn_test_model(dataloaders, model):
    model_target = []
    actual_target = []
    model.eval()
    with torch.no_grad():
        for stimuli, targets in dataloaders:
            outputs = model(stimuli)  # not: TB201
            _, preds = torch.max(outputs, 1)
            model_target.extend(preds.tolist())
            actual_target.extend(targets.tolist())
    acc = sum(int(m == a) for m, a in zip(model_target, actual_target)) / len(actual_target)
    return model_target, actual_target, acc


def dnn_train_model(dataloaders, model, criterion, optimizer, num_epoches, test_loader):
    for _ in range(num_epoches):
        model.train()
        for inputs, targets in dataloaders:
            optimizer.zero_grad()
            loss = criterion(model(inputs), targets)
            loss.backward()
            optimizer.step()
        dnn_test_model(test_loader, model)
    return model
