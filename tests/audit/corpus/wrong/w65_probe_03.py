import torch

def gan_epoch(G, D, loader, opt_g, opt_d, sched_g, bce):
    for real in loader:
        z = torch.randn(real.size(0), 128)
        opt_d.zero_grad()
        d_loss = bce(D(real), torch.ones(real.size(0))) + bce(D(G(z).detach()), torch.zeros(real.size(0)))
        d_loss.backward()
        opt_d.step()
        opt_g.zero_grad()
        g_loss = bce(D(G(z)), torch.ones(real.size(0)))
        g_loss.backward()
        sched_g.step()  # expect: TB101
        opt_g.step()
