import torch


def train(model, batches, loss_fn, accum_steps=8, total_steps=10_000):
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total_steps)
    it = 0
    while it < total_steps * accum_steps:
        x, y = next(batches)
        loss = loss_fn(model(x), y) / accum_steps
        loss.backward()
        sched.step()  # expect: TB102
        if it % accum_steps == accum_steps - 1:
            opt.step()
            opt.zero_grad()
        it += 1
