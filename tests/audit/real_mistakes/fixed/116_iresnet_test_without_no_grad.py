# Fixed version of ../116_iresnet_test_without_no_grad.py: silent on the codes that file expects.
import torch
import torch.nn as nn


def test(model, testloader, epoch, use_cuda=True):
    model.eval()
    criterion = nn.CrossEntropyLoss()
    test_loss, correct, total = 0.0, 0, 0
    with torch.no_grad():
        for inputs, targets in testloader:
            if use_cuda:
                inputs, targets = inputs.cuda(), targets.cuda()
            out = model(inputs)  # not: TB203
            loss = criterion(out, targets)
            test_loss += loss.item()
            correct += out.argmax(1).eq(targets).sum().item()
            total += targets.size(0)
    return test_loss / len(testloader), 100.0 * correct / total


def train(model, trainloader, testloader, optimizer, epochs):
    criterion = nn.CrossEntropyLoss()
    for epoch in range(epochs):
        model.train()
        for inputs, targets in trainloader:
            optimizer.zero_grad()
            criterion(model(inputs), targets).backward()
            optimizer.step()
        test(model, testloader, epoch)
