import torch


def train_step(model, batch, optimizer, scheduler, loss_fn):
    optimizer.zero_grad()
    loss = loss_fn(model(batch[0]), batch[1])
    loss.backward()
    scheduler.step()  # expect: TB101
    optimizer.step()
    return loss.item()


class Trainer:
    def step(self, x, y):
        self.optimizer.zero_grad()
        with torch.autocast("cuda"):
            loss = self.crit(self.model(x), y)
        self.scaler.scale(loss).backward()
        self.lr_scheduler.step()  # expect: TB101
        self.scaler.step(self.optimizer)
        self.scaler.update()


def accelerate_step(accelerator, model, batch, optimizer, lr_scheduler):
    loss = model(**batch).loss
    accelerator.backward(loss)
    lr_scheduler.step()  # expect: TB101
    optimizer.step()
    optimizer.zero_grad()
