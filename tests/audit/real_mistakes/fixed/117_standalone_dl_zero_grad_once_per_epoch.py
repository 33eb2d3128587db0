# Fixed version of ../117_standalone_dl_zero_grad_once_per_epoch.py: silent on the codes that file expects.
import torch.nn as nn


def train(net, partition, optimizer, args):
    trainloader = partition["train"]
    net.train()
    criterion = nn.CrossEntropyLoss()
    train_loss = 0.0
    for inputs, labels in trainloader:
        optimizer.zero_grad()
        outputs = net(inputs)
        loss = criterion(outputs, labels)
        loss.backward()
        optimizer.step()  # not: TB104
        train_loss += loss.item()
    return net, train_loss / len(trainloader)
