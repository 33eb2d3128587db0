# Reconstructed after mlfoundations/open_flamingo PR #19 ("Fixed epoch when resuming training", merged, https://github.com/mlfoundations/open_flamingo/pull/19): src/train.py saved each checkpoint at the end of an epoch with "epoch": epoch (the index of the epoch just completed), but on resume set resume_from_epoch = checkpoint["epoch"] and looped `for epoch in range(resume_from_epoch, args.num_epochs)`, so a resumed run trained the already-finished epoch a second time (with the restored optimizer/LR-scheduler state) and overwrote checkpoint_{epoch}.pt. The merged fix resumes from checkpoint["epoch"] + 1.
import glob
import os

import torch
import wandb
from torch.nn.parallel import DistributedDataParallel as DDP
from transformers import get_constant_schedule_with_warmup

from data import get_data
from distributed import init_distributed_device, world_info_from_env
from open_flamingo import create_model_and_transforms
from train_utils import train_one_epoch, random_seed


def main(args):
  args.local_rank, args.rank, args.world_size = world_info_from_env()
  device_id = init_distributed_device(args)

  random_seed(args.seed)
  model, image_processor, tokenizer = create_model_and_transforms(
    args.vision_encoder_path, args.lm_path)
  random_seed(args.seed, args.rank)

  device_id = args.rank % torch.cuda.device_count()
  model = model.to(device_id)
  ddp_model = DDP(model, device_ids=[device_id])

  train_dataset = get_data(args, image_processor, tokenizer)

  def get_grouped_params(model):
    params_with_wd, params_without_wd = [], []
    apply_decay = lambda x: "gated_cross_attn_layer" in n and "ff_gate" not in n and "attn_gate" not in n and "norm" not in n and "bias" not in n
    for n, p in model.named_parameters():
        if apply_decay(n): params_with_wd.append(p)
        else: params_without_wd.append(p)
    return [{"params": params_with_wd, "weight_decay": args.weight_decay},
            {"params": params_without_wd, "weight_decay": 0.0},]

  optimizer = torch.optim.AdamW(get_grouped_params(ddp_model), lr=args.learning_rate)
  lr_scheduler = get_constant_schedule_with_warmup(optimizer, num_warmup_steps=args.warmup_steps)

  # check if a checkpoint exists for this run
  if os.path.exists(f"{args.run_name}") and args.resume_from_checkpoint is None:
    checkpoint_list = glob.glob(f"{args.run_name}/checkpoint_*.pt")
    if len(checkpoint_list) == 0:
      print(f"Found no checkpoints for run {args.run_name}.")
    else:
      args.resume_from_checkpoint = sorted(checkpoint_list, key=lambda x: int(x.split("_")[-1].split(".")[0]))[-1]
      print(f"Found checkpoint {args.resume_from_checkpoint} for run {args.run_name}.")

  resume_from_epoch = 0
  if args.resume_from_checkpoint is not None:
    print(f"Loading checkpoint from {args.resume_from_checkpoint}")
    checkpoint = torch.load(args.resume_from_checkpoint, map_location="cpu")
    ddp_model.load_state_dict(checkpoint["model_state_dict"])
    optimizer.load_state_dict(checkpoint["optimizer_state_dict"])
    lr_scheduler.load_state_dict(checkpoint["lr_scheduler_state_dict"])
    resume_from_epoch = checkpoint["epoch"]  # expect: TB412

  ddp_model.train()

  for epoch in range(resume_from_epoch, args.num_epochs):
    train_dataset.set_epoch(epoch)
    train_loader = train_dataset.dataloader

    train_one_epoch(args=args,
                    model=ddp_model,
                    tokenizer=tokenizer,
                    optimizer=optimizer,
                    lr_scheduler=lr_scheduler,
                    train_loader=train_loader,
                    device_id=device_id,
                    wandb=wandb)

    if args.rank == 0:
      if not os.path.exists(args.run_name):
        os.makedirs(args.run_name)

      checkpoint_dict = {
          "epoch": epoch,
          "model_state_dict": ddp_model.state_dict(),
          "optimizer_state_dict": optimizer.state_dict(),
          "lr_scheduler_state_dict": lr_scheduler.state_dict(),
      }

      torch.save(checkpoint_dict, f"{args.run_name}/checkpoint_{epoch}.pt")
      if args.report_to_wandb:
        wandb.save(f"{args.run_name}/checkpoint_{epoch}.pt")

  if args.rank == 0:
    if not os.path.exists(args.run_name):
      os.makedirs(args.run_name)
    torch.save(ddp_model.state_dict(), f"{args.run_name}/final_weights.pt")
