# Fixed version of ../73_ultralytics_zero_grad_at_epoch_start.py: silent on the codes that file expects.
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
            for i, batch in enumerate(train_loader):
                ni = i + nb * epoch
                loss = self.model(batch)
                self.scaler.scale(loss).backward()
                if ni - last_opt_step >= self.accumulate:
                    self.optimizer_step()  # not: TB103
                    last_opt_step = ni
