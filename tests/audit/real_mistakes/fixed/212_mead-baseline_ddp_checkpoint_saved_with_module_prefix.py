# Reconstructed after mead-ml/mead-baseline PR #334 ("This change gets rid of the .module that was saved", merged as 5d4f432, https://github.com/mead-ml/mead-baseline/pull/334): api-examples/pretrain-transformer-lm.py wrapped the model in DistributedDataParallel for --distributed runs but saved each epoch checkpoint with torch.save(model.state_dict(), ...), i.e. the wrapper's state dict whose keys all carry the "module." prefix; --restart_from loads the checkpoint into the bare TransformerLanguageModel before it is wrapped, so distributed checkpoints could not be restored (nor used by the downstream embeddings addon). The maintainer's merged fix saves model.module.state_dict() when args.distributed.
# Fixed version (the merged PR applied).
import logging
import math
import os
import time

import torch
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader
from baseline.pytorch.lm import TransformerLanguageModel
from baseline.pytorch.optz import OptimizerManager

logger = logging.getLogger(__file__)


def checkpoint_for(model_base, epoch):
    return '{}-{}.pth'.format(model_base, epoch+1)


class Average(object):
    def __init__(self, name):
        self.name = name
        self.sum = 0
        self.count = 0
        self.avg = 0

    def update(self, val, n=1):
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


def train(args, embeddings, tgt_key, train_set, valid_set, lr_sched):
    train_sampler = torch.utils.data.distributed.DistributedSampler(train_set) if args.distributed else None
    train_loader = DataLoader(train_set, sampler=train_sampler, batch_size=args.batch_size, shuffle=(not args.distributed))
    valid_loader = DataLoader(valid_set, batch_size=args.batch_size, shuffle=False)

    model = TransformerLanguageModel.create(embeddings, hsz=args.d_model, d_ff=args.d_ff, dropout=args.dropout,
                                            gpu=False, num_heads=args.num_heads, layers=args.num_layers,
                                            src_keys=['x'], tgt_key=tgt_key)
    model.to(args.device)
    loss_function = model.create_loss()
    loss_function.to(args.device)

    steps_per_epoch = len(train_loader)
    global_step = 0
    start_epoch = 0
    if args.restart_from:
        model.load_state_dict(torch.load(args.restart_from))
        start_epoch = int(args.restart_from.split("-")[-1].split(".")[0]) - 1
        global_step = (start_epoch+1) * steps_per_epoch
    optimizer = OptimizerManager(model, global_step, optim='adam', lr=args.lr, lr_function=lr_sched, weight_decay=args.weight_decay)

    # Prepare model for distributed training if needed
    if args.distributed:
        model = DistributedDataParallel(model, device_ids=[args.local_rank], output_device=args.local_rank)

    for epoch in range(start_epoch, args.epochs):
        avg_loss = Average('average_train_loss')
        optimizer.zero_grad()

        if args.distributed:
            train_sampler.set_epoch(epoch)

        start = time.time()
        model.train()
        for i, batch in enumerate(train_loader):
            x, y = batch
            inputs = {'x': x.to(args.device)}
            labels = y.to(args.device).transpose(0, 1).contiguous()
            logits = model(inputs, None)[0].transpose(0, 1).contiguous()
            loss = loss_function(logits[:-1], labels[1:])
            loss.backward()
            avg_loss.update(loss.item())

            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            optimizer.step()
            optimizer.zero_grad()

        train_token_ppl = math.exp(avg_loss.avg)
        model_base = os.path.join(args.basedir, 'checkpoint')
        avg_valid_loss = Average('average_valid_loss')
        model.eval()
        for batch in valid_loader:
            with torch.no_grad():
                x, y = batch
                inputs = {'x': x.to(args.device)}
                labels = y.to(args.device).transpose(0, 1).contiguous()
                logits = model(inputs, None)[0].transpose(0, 1).contiguous()
                loss = loss_function(logits[:-1], labels[1:])
                avg_valid_loss.update(loss.item())

        logger.info({'train_ppl': train_token_ppl, 'valid_ppl': math.exp(avg_valid_loss.avg),
                     'elapsed_min': (time.time() - start) / 60})

        if args.local_rank < 1:
            checkpoint_name = checkpoint_for(model_base, epoch+1)
            logger.info("Creating checkpoint: %s", checkpoint_name)
            if args.distributed:  # not: TB409
                torch.save(model.module.state_dict(), checkpoint_name)
            else:
                torch.save(model.state_dict(), checkpoint_name)
