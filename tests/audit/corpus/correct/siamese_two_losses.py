import itertools

import torch
import torch.nn.functional as F


def train(encoder, decoder, loader, epochs=2):
    optimizer = torch.optim.Adam(itertools.chain(encoder.parameters(), decoder.parameters()), lr=1e-3)
    for epoch in range(epochs):
        for x in loader:
            encoder.zero_grad()
            decoder.zero_grad()
            z = encoder(x)
            recon = decoder(z)
            loss = F.mse_loss(recon, x) + 1e-3 * z.pow(2).mean()
            loss.backward()
            optimizer.step()
