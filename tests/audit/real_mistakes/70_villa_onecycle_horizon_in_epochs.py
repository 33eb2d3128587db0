# Reconstructed after ScrollPrize/villa PR #1495 ("Fix per-iteration LR schedulers being given an epoch count as
# their horizon": "_get_scheduler passes max_steps=self.mgr.max_epoch, but onecycle ... are stepped once per
# optimizer step", merged): a OneCycleLR whose total_steps was the number of epochs, stepped after every update.
import torch


def train(model, loss_fn, loader, max_epoch, lr):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, total_steps=max_epoch)
    for epoch in range(max_epoch):  # noqa: B007
        for batch in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(batch["image"]), batch["label"])
            loss.backward()
            optimizer.step()
            scheduler.step()  # expect: TB115
