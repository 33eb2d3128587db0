# Reconstructed after pytorch-ignite/code-generator PR #60 ("fix: make a seed respect to distributed settings", merged as b17397b, https://github.com/pytorch-ignite/code-generator/pull/60; fixes #61): the GAN template called manual_seed(config.seed) once in main(), in the launching process before idist.Parallel started the per-rank workers, so the seed was either not applied inside the spawned workers or was the same on every rank (identical noise z on every GPU). The fix seeds inside run() with manual_seed(config.seed + rank); the same PR also made only rank 0 download the dataset (barrier) and create the experiment logger.
from argparse import ArgumentParser
from datetime import datetime
from pathlib import Path
from typing import Any

import ignite.distributed as idist
import torch
from config import get_default_parser
from datasets import get_datasets
from handlers import get_handlers, get_logger
from ignite.contrib.handlers.wandb_logger import WandBLogger
from ignite.engine import Engine
from ignite.engine.events import Events
from ignite.utils import manual_seed
from utils import initialize, log_basic_info, log_metrics, setup_logging


def create_trainers(config, netD, netG, optimizerD, optimizerG, loss_fn, device, real_labels, fake_labels):
    def train_function(engine: Engine, batch: Any):
        real = batch[0].to(device, non_blocking=True)
        netD.train()
        netG.train()

        netD.zero_grad()
        output = netD(real)
        errD_real = loss_fn(output, real_labels)
        errD_real.backward()

        # get fake image from generator
        noise = torch.randn(config.batch_size, config.z_dim, 1, 1, device=device)
        fake = netG(noise)
        output = netD(fake.detach())
        errD_fake = loss_fn(output, fake_labels)
        errD_fake.backward()
        errD = errD_real + errD_fake
        optimizerD.step()

        netG.zero_grad()
        output = netD(fake)
        errG = loss_fn(output, real_labels)
        errG.backward()
        optimizerG.step()
        return {"errD": errD.item(), "errG": errG.item()}

    return Engine(train_function)


def run(local_rank: int, config: Any, *args: Any, **kwargs: Any):
    """function to be run by idist.Parallel context manager."""

    train_dataset, num_channels = get_datasets(config.dataset, config.data_path)
    train_dataloader = idist.auto_dataloader(
        train_dataset, batch_size=config.batch_size, num_workers=config.num_workers
    )

    device = idist.device()
    netD, netG, optimizerD, optimizerG, loss_fn, lr_scheduler = initialize(config, num_channels)

    real_labels = torch.ones(config.batch_size, device=device)
    fake_labels = torch.zeros(config.batch_size, device=device)

    train_engine = create_trainers(
        config, netD, netG, optimizerD, optimizerG, loss_fn, device, real_labels, fake_labels
    )

    logger = setup_logging(config)
    log_basic_info(logger, config)
    train_engine.logger = logger

    optimizers = {"optimizerD": optimizerD, "optimizerG": optimizerG}
    logger_handler = get_logger(config=config, train_engine=train_engine, optimizers=optimizers)

    train_engine.add_event_handler(Events.ITERATION_COMPLETED(every=config.log_every_iters), log_metrics, tag="train")

    train_engine.run(train_dataloader, max_epochs=config.max_epochs)

    if isinstance(logger_handler, WandBLogger):
        logger_handler.finish()
    elif logger_handler:
        logger_handler.close()


def main():
    parser = ArgumentParser(parents=[get_default_parser()])
    config = parser.parse_args()
    manual_seed(config.seed)  # expect: TB???

    if config.output_dir:
        now = datetime.now().strftime("%Y%m%d-%H%M%S")
        name = f"{config.dataset}-backend-{idist.backend()}-{now}"
        path = Path(config.output_dir, name)
        path.mkdir(parents=True, exist_ok=True)
        config.output_dir = path

    with idist.Parallel(
        backend=config.backend,
        nproc_per_node=config.nproc_per_node,
        nnodes=config.nnodes,
        node_rank=config.node_rank,
        master_addr=config.master_addr,
        master_port=config.master_port,
    ) as parallel:
        parallel.run(run, config=config)


if __name__ == "__main__":
    main()
