# Reconstructed after meta-pytorch/opacus issue #93 ("Problem with zero_grad() and virtual_step() in the
# tutorials"): the CIFAR-10 example zeroed the gradients before every batch, also between virtual steps, which
# erased the accumulated per-sample gradients; fixed by zeroing only after a real step.
def train(model, train_loader, optimizer, criterion, n_accumulation_steps):
    model.train()
    losses = []
    for i, (images, target) in enumerate(train_loader):
        optimizer.zero_grad()  # expect: TB103
        output = model(images)
        loss = criterion(output, target)
        loss.backward()
        if ((i + 1) % n_accumulation_steps == 0) or ((i + 1) == len(train_loader)):
            optimizer.step()
        else:
            optimizer.virtual_step()
        losses.append(loss.item())
    return losses
