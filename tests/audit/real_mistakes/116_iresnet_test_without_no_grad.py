# Reconstructed after jhjacobsen/invertible-resnet issue #15 ("Classifier OOM when computing on test set": the
# function test() "computes loss on test set without turning gradient computations off"; the maintainer: "Thank you,
# will add a fix shortly"): the CIFAR utilities' test() after model.eval(), called after every training epoch.
import torch.nn as nn


def test(model, testloader, epoch, use_cuda=True):
    model.eval()
    criterion = nn.CrossEntropyLoss()
    test_loss, correct, total = 0.0, 0, 0
    for inputs, targets in testloader:
        if use_cuda:
            inputs, targets = inputs.cuda(), targets.cuda()
        out = model(inputs)  # expect: TB203
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
