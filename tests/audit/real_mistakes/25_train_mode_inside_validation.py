# Reconstructed after pliang279/MultiBench issue #26 ("Did you forget switch model train/eval state?"): the
# validation block called model.eval() and then, a few lines later, model.train() before the forward passes, so
# validation ran in training mode; fixed by removing the model.train() call from validation.
import torch


def train(model, train_dataloader, valid_dataloader, optimizer, criterion, total_epochs, device):
    for _epoch in range(total_epochs):
        model.train()
        for j in train_dataloader:
            optimizer.zero_grad()
            out = model([i.float().to(device) for i in j[:-1]])
            loss = criterion(out, j[-1].to(device))
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            totalloss = 0.0
            for j in valid_dataloader:
                model.train()
                out = model([i.float().to(device) for i in j[:-1]])  # expect: TB201
                totalloss += criterion(out, j[-1].to(device)).item()
        print(totalloss)
