import torch


def train_gan(G, D, loader, bce, nz=100, epochs=5):
    opt_G = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_D = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
    for epoch in range(epochs):
        for real, _ in loader:
            noise = torch.randn(real.size(0), nz)
            fake = G(noise)
            d_loss = bce(D(real), torch.ones(real.size(0), 1)) + bce(D(fake.detach()), torch.zeros(real.size(0), 1))
            opt_D.zero_grad()
            d_loss.backward()
            opt_D.step()
            g_loss = bce(D(fake), torch.ones(real.size(0), 1))
            g_loss.backward()
            opt_G.step()  # expect: TB104
