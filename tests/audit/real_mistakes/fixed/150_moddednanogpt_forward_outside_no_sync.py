# Fixed version of ../150_moddednanogpt_forward_outside_no_sync.py: silent on the codes that file expects.
import contextlib

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def train(raw_model, train_loader, optimizer, scheduler, num_iterations: int, train_accumulation_steps: int,
          ddp_local_rank: int):
    model = DDP(raw_model, device_ids=[ddp_local_rank])
    ctx = torch.amp.autocast(device_type="cuda", dtype=torch.bfloat16)
    x, y = train_loader.next_batch()
    for step in range(num_iterations + 1):
        model.train()
        for i in range(1, train_accumulation_steps + 1):
            # forward and backward of all but the last micro-batch run without gradient sync
            sync_ctx = model.no_sync() if i < train_accumulation_steps else contextlib.nullcontext()
            with sync_ctx:  # not: TB111
                with ctx:
                    _, loss = model(x, y, return_logits=False)
                    train_loss = loss.detach()
                # advance the dataset for the next batch
                x, y = train_loader.next_batch()
                loss.backward()
        for p in model.parameters():
            p.grad /= train_accumulation_steps
        optimizer.step()
        scheduler.step()
        model.zero_grad(set_to_none=True)
        dist.all_reduce(train_loss, op=dist.ReduceOp.AVG)
