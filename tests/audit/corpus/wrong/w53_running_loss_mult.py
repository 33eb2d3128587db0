def train_epoch(net, loader, criterion, optimizer):
    running_loss = 0.0
    for inputs, labels in loader:
        optimizer.zero_grad()
        loss = criterion(net(inputs), labels)
        loss.backward()
        optimizer.step()
        running_loss = running_loss + loss * inputs.size(0)  # expect: TB204
    return running_loss / len(loader.dataset)
