import torch


def train(model, train_dl, val_dl, optimizer, loss_fn, eval_every=200):
    global_step = 0
    for epoch in range(3):
        model.train()
        for xb, yb in train_dl:
            optimizer.zero_grad()
            loss_fn(model(xb), yb).backward()
            optimizer.step()
            global_step += 1
            if global_step % eval_every == 0:
                model.eval()  # expect: TB202
                with torch.no_grad():
                    val = sum(loss_fn(model(x), y).item() for x, y in val_dl)
                print(global_step, val)
