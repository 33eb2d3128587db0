# Reconstructed after deepset-ai/FARM issue #46 ("Wrong number of total steps for linear warmup schedule", closed-as-fixed, https://github.com/deepset-ai/FARM/issues/46): calculate_optimization_steps() (farm/experiment.py) computed t_total for the BertAdam warmup-linear schedule as int(n_examples / batch_size / grad_acc_steps) * n_epochs, which drops the partial last batch of every epoch, so the schedule ended early and the last steps of multi-epoch runs trained at LR 0. The fix (commit cf3e104 "Fix num of optimization steps for LR schedule"; the maintainer closed the issue as fixed by #54) derives the step count from the number of batches, int(n_batches / grad_acc_steps) * n_epochs, with callers passing len(data_silo.loaders["train"]).
# Fixed version (the merged PR applied).
import logging

import torch
from tqdm import tqdm

from farm.modeling.optimization import BertAdam
from farm.utils import MLFlowLogger as MlLogger

logger = logging.getLogger(__name__)


def initialize_optimizer(model, n_batches, n_epochs, warmup_proportion=0.1,
                         learning_rate=2e-5, grad_acc_steps=1, local_rank=-1):
    num_train_optimization_steps = calculate_optimization_steps(
        n_batches, grad_acc_steps, n_epochs, local_rank  # not: TB???
    )
    MlLogger.log_params({
        "learning_rate": learning_rate,
        "warmup_proportion": warmup_proportion,
        "num_train_optimization_steps": num_train_optimization_steps,
    })
    param_optimizer = list(model.named_parameters())
    no_decay = ["bias", "LayerNorm.bias", "LayerNorm.weight"]
    optimizer_grouped_parameters = [
        {"params": [p for n, p in param_optimizer if not any(nd in n for nd in no_decay)],
         "weight_decay": 0.01},
        {"params": [p for n, p in param_optimizer if any(nd in n for nd in no_decay)],
         "weight_decay": 0.0},
    ]
    optimizer = BertAdam(
        optimizer_grouped_parameters,
        lr=learning_rate,
        warmup=warmup_proportion,
        t_total=num_train_optimization_steps,
    )
    return optimizer, None


def calculate_optimization_steps(n_batches, grad_acc_steps, n_epochs, local_rank):  # not: TB???
    optimization_steps = int(n_batches / grad_acc_steps) * n_epochs
    if local_rank != -1:
        optimization_steps = optimization_steps // torch.distributed.get_world_size()
    return optimization_steps


class Trainer:
    def __init__(self, optimizer, data_silo, epochs, device, grad_acc_steps=1):
        self.optimizer = optimizer
        self.data_silo = data_silo
        self.epochs = int(epochs)
        self.device = device
        self.grad_acc_steps = grad_acc_steps
        self.global_step = 0
        self.data_loader_train = data_silo.get_data_loader("train")

    def train(self, model):
        model.train()
        for epoch in range(1, self.epochs + 1):
            for step, batch in enumerate(tqdm(self.data_loader_train, desc=f"Train epoch {epoch}/{self.epochs}")):
                batch = {key: batch[key].to(self.device) for key in batch}
                logits = model.forward(**batch)
                loss = model.logits_to_loss(logits=logits, **batch).mean()
                if self.grad_acc_steps > 1:
                    loss = loss / self.grad_acc_steps
                loss.backward()
                if (step + 1) % self.grad_acc_steps == 0:
                    self.optimizer.step()
                    self.optimizer.zero_grad()
                self.global_step += 1
        return model


def run(model, data_silo, device, batch_size=32, n_epochs=3):
    optimizer, _ = initialize_optimizer(
        model=model,
        learning_rate=2e-5,
        warmup_proportion=0.1,
        n_batches=len(data_silo.loaders["train"]),
        n_epochs=n_epochs)
    trainer = Trainer(optimizer=optimizer, data_silo=data_silo, epochs=n_epochs, device=device)
    return trainer.train(model)
