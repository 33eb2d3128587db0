# Reconstructed after tomhosking/torchseq issue #8 ("Gradient accumulation bug", closed-as-fixed, https://github.com/tomhosking/torchseq/issues/8): ModelAgent.train_one_epoch() (torchseq/agents/model_agent.py) only called opt.step() once the accumulated sample count reached optim_batch_size, so the gradients of the last batch(es) of an epoch that did not reach the threshold were never applied and were wiped by the zero_grad() at the start of the next epoch. The fix (commit 53c96f3) also steps when batch_idx is the last batch of the loader.
import torch
from tqdm import tqdm

from torchseq.agents.base import BaseAgent
from torchseq.utils.logging import Logger


class ModelAgent(BaseAgent):
    def train(self, data_loader):
        best_loss = 1e10
        epochs_without_improvement = 0
        for epoch in range(self.config.training.num_epochs):
            self.train_one_epoch(data_loader)
            self.current_epoch += 1
            test_loss, best_metrics, _, _ = self.validate(data_loader, save_model=True, training_loop=True)
            Logger().log_scalar("dev/loss", test_loss, self.global_step)
            if test_loss < best_loss:
                best_loss = test_loss
                epochs_without_improvement = 0
            else:
                epochs_without_improvement += 1
            if epochs_without_improvement > self.config.training.get("early_stopping_patience", 3):
                break

    def train_one_epoch(self, data_loader):
        self.model.train()
        self.optimizers.zero_grad()

        steps_accum = [0 for _ in self.optimizers]
        start_step = self.global_step

        pbar = tqdm(data_loader.train_loader, desc="Epoch {:}".format(self.current_epoch + 1), disable=self.silent)

        for batch_idx, batch in enumerate(pbar):
            batch = {k: (v.to(self.device) if k[-5:] != "_text" else v) for k, v in batch.items()}
            curr_batch_size = batch[[k for k in batch.keys() if k[-5:] != "_text"][0]].size()[0]

            loss = (
                self.step_train(batch, self.tgt_field)
                * float(curr_batch_size)
                / float(self.config.training.optim_batch_size)
            )
            loss.backward()

            steps_accum = [steps + curr_batch_size for steps in steps_accum]

            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.training.get("clip_gradient", 1e6))

            for ix, (opt, sched, steps) in enumerate(zip(self.optimizers, self.schedulers, steps_accum)):
                if steps >= opt.optim_batch_size:  # expect: TB???
                    opt.step()
                    opt.zero_grad()
                    sched.step()
                    steps_accum[ix] = 0
                    if ix == len(self.optimizers) - 1:
                        self.global_step += 1

            if self.global_step % self.config.training.log_interval == 0:
                Logger().log_scalar(
                    "train/loss",
                    loss.item() * float(self.config.training.optim_batch_size) / float(curr_batch_size),
                    self.global_step,
                )
                Logger().log_scalar("train/lr", self.optimizers[-1].param_groups[-1]["lr"], self.global_step)

            if (
                self.config.training.get("epoch_steps", 0) > 0
                and self.global_step - start_step >= self.config.training.epoch_steps
            ):
                break

        torch.cuda.empty_cache()
