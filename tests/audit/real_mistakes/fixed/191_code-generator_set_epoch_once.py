# Reconstructed after pytorch-ignite/code-generator PR #130 ("fix(sampler): call set_epoch every epoch start in distributed training", merged as 0c19ad2, https://github.com/pytorch-ignite/code-generator/pull/130): the generated vision-classification template called dataloader_train.sampler.set_epoch(trainer.state.epoch - 1) once, at setup time before trainer.run(), so every epoch of distributed training reused the same DistributedSampler shuffle. The fix moves the call into an @trainer.on(Events.EPOCH_STARTED) handler so it runs at the start of every epoch.
# Fixed version (the merged PR applied).
from pprint import pformat
from typing import Any, Union

import ignite.distributed as idist
import torch
from data import setup_data
from ignite.engine import Engine, Events
from ignite.metrics import Accuracy, Loss
from ignite.utils import manual_seed
from model import Net
from torch import nn, optim
from torch.utils.data.distributed import DistributedSampler
from utils import log_metrics, setup_logging, setup_output_dir, setup_parser


def setup_trainer(config, model, optimizer, loss_fn, device) -> Engine:
    def train_function(engine: Engine, batch: Any):
        model.train()

        samples = batch[0].to(device, non_blocking=True)
        targets = batch[1].to(device, non_blocking=True)

        outputs = model(samples)
        loss = loss_fn(outputs, targets)

        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

        train_loss = loss.item()
        engine.state.metrics = {"epoch": engine.state.epoch, "train_loss": train_loss}
        return {"train_loss": train_loss}

    return Engine(train_function)


def setup_evaluator(config, model, device) -> Engine:
    @torch.no_grad()
    def eval_function(engine: Engine, batch: Any):
        model.eval()
        samples = batch[0].to(device, non_blocking=True)
        targets = batch[1].to(device, non_blocking=True)
        outputs = model(samples)
        return outputs, targets

    return Engine(eval_function)


def run(local_rank: int, config: Any):
    # make a certain seed
    rank = idist.get_rank()
    manual_seed(config.seed + rank)

    config.output_dir = setup_output_dir(config, rank)

    # donwload datasets and create dataloaders
    dataloader_train, dataloader_eval = setup_data(config)

    # model, optimizer, loss function, device
    device = idist.device()
    model = idist.auto_model(Net())
    optimizer = idist.auto_optim(optim.Adam(model.parameters(), lr=config.lr))
    loss_fn = nn.CrossEntropyLoss().to(device=device)

    trainer = setup_trainer(config, model, optimizer, loss_fn, device)
    evaluator = setup_evaluator(config, model, device)

    accuracy = Accuracy(device=device)
    metrics = {
        "eval_accuracy": accuracy,
        "eval_loss": Loss(loss_fn, device=device),
        "eval_error": (1.0 - accuracy) * 100,
    }
    for name, metric in metrics.items():
        metric.attach(evaluator, name)

    logger = setup_logging(config)
    logger.info("Configuration: \n%s", pformat(vars(config)))
    trainer.logger = evaluator.logger = logger

    # set epoch for distributed sampler
    @trainer.on(Events.EPOCH_STARTED)
    def set_epoch():
        if idist.get_world_size() > 1 and isinstance(
            dataloader_train.sampler, DistributedSampler
        ):
            dataloader_train.sampler.set_epoch(trainer.state.epoch - 1)  # not: TB116

    trainer.add_event_handler(
        Events.ITERATION_COMPLETED(every=config.log_every_iters),
        log_metrics,
        tag="train",
    )

    @trainer.on(Events.EPOCH_COMPLETED(every=1))
    def _():
        evaluator.run(dataloader_eval, epoch_length=config.eval_epoch_length)
        log_metrics(evaluator, "eval")

    trainer.run(
        dataloader_train,
        max_epochs=config.max_epochs,
        epoch_length=config.train_epoch_length,
    )


def main():
    config = setup_parser().parse_args()
    with idist.Parallel(config.backend) as p:
        p.run(run, config=config)


if __name__ == "__main__":
    main()
