import torch

def train(model, loader, opt, crit, accum_iter=4):
    for batch_idx, (x, y) in enumerate(loader):
        with torch.set_grad_enabled(True):
            out = model(x)
            loss = crit(out, y)
        loss.backward()  # expect: TB105
        if ((batch_idx + 1) % accum_iter == 0) or (batch_idx + 1 == len(loader)):
            opt.step()
            opt.zero_grad()
