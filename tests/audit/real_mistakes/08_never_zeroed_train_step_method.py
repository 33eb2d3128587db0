# Reconstructed after meta-pytorch/torchforge PR #71 ("[ez] zero grad every step"): the trainer's train_step
# stepped the optimizer and the scheduler but never zeroed the gradients, so every update added all earlier
# gradients; fixed by calling zero_grad() after the step.
class Trainer:
    def __init__(self, model, optimizer, lr_scheduler, loss_fn):
        self.model = model
        self.optimizer = optimizer
        self.lr_scheduler = lr_scheduler
        self.loss_fn = loss_fn

    def train_step(self, inputs, labels):
        logits = self.model(inputs)
        loss = self.loss_fn(logits, labels)
        loss.backward()
        self.optimizer.step()  # expect: TB104
        self.lr_scheduler.step()
        return loss.item()

    def train(self, dataloader, steps):
        for step, (inputs, labels) in enumerate(dataloader):
            if step >= steps:
                break
            self.train_step(inputs, labels)
