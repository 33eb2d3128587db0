import torch


class Seq2SeqTrainer:
    def __init__(self, model, optimizer, scheduler, accum_steps=4):
        self.model = model
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.accum_steps = accum_steps

    def run_epoch(self, batches):
        accum_count = 0
        for src, tgt in batches:
            out = self.model(src, tgt[:, :-1])
            loss = self.model.criterion(out, tgt[:, 1:])
            loss.backward()  # expect: TB105
            accum_count += 1
            if accum_count == self.accum_steps:
                self.optimizer.step()
                self.scheduler.step()
                self.optimizer.zero_grad()
                accum_count = 0
