"""VAE with a multi-term loss, running sums with .item(), per-epoch logging (correct)."""
import torch
import torch.nn.functional as F


def vae_loss(recon, x, mu, logvar):
    bce = F.binary_cross_entropy(recon, x, reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


def train(model, loader, optimizer, epochs=10):
    for epoch in range(epochs):
        model.train()
        train_loss = 0
        for batch_idx, (data, _) in enumerate(loader):
            optimizer.zero_grad()
            recon_batch, mu, logvar = model(data)
            loss = vae_loss(recon_batch, data, mu, logvar)
            loss.backward()
            train_loss += loss.item()
            optimizer.step()
        print(epoch, train_loss / len(loader.dataset))


def multi_head(model, loader, optimizer, heads):
    for x, targets in loader:
        optimizer.zero_grad()
        outputs = model(x)
        loss = 0
        for head in heads:
            loss += F.cross_entropy(outputs[head], targets[head])
        loss.backward()
        optimizer.step()
