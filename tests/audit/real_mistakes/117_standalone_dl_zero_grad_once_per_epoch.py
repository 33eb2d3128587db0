# Reconstructed after heartcored98/Standalone-DeepLearning issue #11 (zero_grad() used once per epoch, not before
# every backward(); the maintainer fixed "the same error in several lab codes"): the CIFAR-10 lab's train() zeroed
# the gradients once at the top and then stepped the optimizer on every batch.
import torch.nn as nn


def train(net, partition, optimizer, args):
    trainloader = partition["train"]
    net.train()
    criterion = nn.CrossEntropyLoss()
    optimizer.zero_grad()
    train_loss = 0.0
    for inputs, labels in trainloader:
        outputs = net(inputs)
        loss = criterion(outputs, labels)
        loss.backward()
        optimizer.step()  # expect: TB104
        train_loss += loss.item()
    return net, train_loss / len(trainloader)
