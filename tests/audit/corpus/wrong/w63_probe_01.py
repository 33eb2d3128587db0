import torch
ACCUM_STEPS = 4

def compute_loss(model, batch):
    x, y = batch
    return torch.nn.functional.cross_entropy(model(x), y)

def train(model, train_loader, optimizer_ft):
    for batch_idx, batch in enumerate(train_loader):
        loss = compute_loss(model, batch)
        loss.backward()  # expect: TB105
        if (batch_idx + 1) % ACCUM_STEPS == 0 or (batch_idx + 1) == len(train_loader):
            optimizer_ft.step()
            optimizer_ft.zero_grad()
