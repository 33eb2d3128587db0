from collections import defaultdict


def train(model, loader, optimizer, criterion):
    stats = defaultdict(float)
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        stats["loss"] += loss  # expect: TB204
    return stats
