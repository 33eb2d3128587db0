import torch


def train(model, get_batch, loss_fn, iters=1000, micro_batches=4):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for it in range(iters):
        for micro in range(micro_batches):
            x, y = get_batch()
            loss = loss_fn(model(x), y)
            loss.backward()  # expect: TB105
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
