# Reconstructed after google/brax PR #152 ('Remove "memory leak" in PyTorch training example'): the training
# loop summed the loss tensor into total_loss, keeping every iteration's autograd graph alive; fixed with
# float(loss).
def train(model, optimizer, batches, criterion):
    total_loss = 0
    for observation, target in batches:
        optimizer.zero_grad()
        output = model(observation)
        loss = criterion(output, target)
        loss.backward()
        optimizer.step()
        total_loss += loss  # expect: TB204
    return total_loss / len(batches)
