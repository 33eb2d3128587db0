# Reconstructed after kh-kim/simple-nmt PR #22 ("refactoring", https://github.com/kh-kim/simple-nmt/pull/22), whose
# commit 1fd2e56 is titled "hotfix: handle zero_grad in case of iteration_per_update==1.": the ignite training step
# cleared gradients only when `engine.state.iteration % iteration_per_update == 1`, meant as "first micro-batch of
# an accumulation window"; with the default iteration_per_update == 1 that remainder is always 0, so
# optimizer.zero_grad() was never called and every update used the sum of all gradients since the start of
# training.  The maintainer's merged fix adds `or engine.config.iteration_per_update == 1` to the condition.
# (The gradient clipping done before the optimizer step is omitted here.)
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
        if engine.state.iteration % engine.config.iteration_per_update == 1:  # expect: TB104
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
