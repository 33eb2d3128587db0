# Reconstructed after ultralytics/ultralytics PR #11217 ("fix double zero_grad call messing up gradient
# accumulation": "optimizer.zero_grad is called both at the start of an epoch and in self.optimizer_step. Since
# optimizer.step is only called when ni - last_opt_step >= self.accumulate, the optimizer.zero_grad at the start of
# the epoch will throw away all gradients of batches at the end of each epoch", merged): the epoch loop zeroed the
# gradients at its top, discarding the micro-batches accumulated since the last step of the previous epoch.
class BaseTrainer:
    def __init__(self, model, optimizer, scaler, accumulate):
        self.model = model
        self.optimizer = optimizer
        self.scaler = scaler
        self.accumulate = accumulate

    def optimizer_step(self):
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad()

    def _do_train(self, train_loader, epochs):
        nb = len(train_loader)
        last_opt_step = -1
        for epoch in range(epochs):
            self.model.train()
            self.optimizer.zero_grad()  # expect: TB103
            for i, batch in enumerate(train_loader):
                ni = i + nb * epoch
                loss = self.model(batch)
                self.scaler.scale(loss).backward()
                if ni - last_opt_step >= self.accumulate:
                    self.optimizer_step()
                    last_opt_step = ni
