# Reconstructed after KellerJordan/modded-nanogpt PR #31 ("Correcting gradient accumulation in the training
# section", https://github.com/KellerJordan/modded-nanogpt/pull/31): train_gpt2.py ran each micro-batch's forward
# pass outside DDP's no_sync() and wrapped only loss.backward() in `with model.no_sync():`.  DDP decides during the
# forward whether the following backward all-reduces, so gradients were still synchronised on every accumulation
# micro-step.  The PR puts the forward pass inside the no_sync() context together with the backward; the
# maintainer reviewed it ("this might be slightly slower ... will have to check") and merged it.
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
            # forward pass
            with ctx:
                _, loss = model(x, y, return_logits=False)
                train_loss = loss.detach()
            # advance the dataset for the next batch
            x, y = train_loader.next_batch()
            # backward pass
            if i < train_accumulation_steps:
                with model.no_sync():  # expect: TB111
                    loss.backward()
            else:
                loss.backward()  # just sync on the last step
        for p in model.parameters():
            p.grad /= train_accumulation_steps
        optimizer.step()
        scheduler.step()
        model.zero_grad(set_to_none=True)
        dist.all_reduce(train_loss, op=dist.ReduceOp.AVG)
