import torch


def evaluate_model(net, test_loader):
    correct, total = 0, 0
    with torch.no_grad():
        for images, labels in test_loader:
            outputs = net(images)  # expect: TB201
            _, predicted = torch.max(outputs.data, 1)
            total += labels.size(0)
            correct += (predicted == labels).sum().item()
    return 100 * correct / total


def main(net, trainloader, test_loader, criterion, optimizer):
    for epoch in range(2):
        net.train()
        for inputs, labels in trainloader:
            optimizer.zero_grad()
            loss = criterion(net(inputs), labels)
            loss.backward()
            optimizer.step()
        print(evaluate_model(net, test_loader))
