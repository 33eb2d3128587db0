# Fixed version of ../159_simplenmt_zero_grad_never_when_no_accumulation.py: silent on the codes that file expects.
import numpy as np
import torch
from ignite.engine import Engine
from torch.cuda.amp import GradScaler, autocast


class MaximumLikelihoodEstimationEngine(Engine):
    def __init__(self, func, model, crit, optimizer, lr_scheduler, config):
        self.model = model
        self.crit = crit
        self.optimizer = optimizer
        self.lr_scheduler = lr_scheduler
        self.config = config
        super().__init__(func)
        self.best_loss = np.inf
        self.scaler = GradScaler()

    @staticmethod
    def train(engine, mini_batch):
        engine.model.train()
        if engine.state.iteration % engine.config.iteration_per_update == 1 or engine.config.iteration_per_update == 1:  # not: TB104
            engine.optimizer.zero_grad()

        device = next(engine.model.parameters()).device
        x = (mini_batch.src[0].to(device), mini_batch.src[1])
        y = mini_batch.tgt[0].to(device)[:, 1:]

        with autocast():
            y_hat = engine.model(x, mini_batch.tgt[0].to(device)[:, :-1])
            loss = engine.crit(y_hat.contiguous().view(-1, y_hat.size(-1)), y.contiguous().view(-1))
            backward_target = loss.div(y.size(0)).div(engine.config.iteration_per_update)

        if engine.config.gpu_id >= 0:
            engine.scaler.scale(backward_target).backward()
        else:
            backward_target.backward()

        word_count = int(mini_batch.tgt[1].sum())
        if engine.state.iteration % engine.config.iteration_per_update == 0:
            if engine.config.gpu_id >= 0:
                engine.scaler.step(engine.optimizer)
                engine.scaler.update()
            else:
                engine.optimizer.step()
            if engine.config.use_noam_decay and engine.lr_scheduler is not None:
                engine.lr_scheduler.step()

        loss = float(loss / word_count)
        return {"loss": loss, "ppl": np.exp(loss)}
