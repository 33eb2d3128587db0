# Reconstructed after shirley-wu/cross-doc-misinfo-detection issue #1 ("Question about the LR schedule", fixed in commit cef73dc, https://github.com/shirley-wu/cross-doc-misinfo-detection/issues/1): train.py passed the total number of batches as num_warmup_steps and the 100-step warmup as num_training_steps of get_linear_schedule_with_warmup, so the learning rate kept rising for the whole run; the horizon also ignored that the scheduler steps once per --accum-step batches. The maintainer swapped the arguments and divided the horizon by the accumulation steps (the `accum-step` typo of that commit was corrected to `accum_step` by merged PR #2).
# Fixed version (the merged PR applied).
import argparse
import os

import numpy as np
import torch
import torch.nn as nn
import tqdm
from transformers import get_linear_schedule_with_warmup

from data import build_dataloader
from utils import MODEL_CLS_DICT, add_shared_args, calc_metrics, count_event_fake_ratio, set_seed


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument('root')
    parser.add_argument('output')
    parser = add_shared_args(parser)
    parser.add_argument('--event-detection-lambda', default=0.0, type=float)
    parser.add_argument('--lr', default=1e-05, type=float)
    parser.add_argument('--batch-size', default=1, type=int)
    parser.add_argument('--num-epochs', default=12, type=int)
    parser.add_argument('--scheduler', default='linear-warmup', choices=['linear-warmup', ])
    parser.add_argument('--warmup', default=100, type=int)
    parser.add_argument('--grad-clip', default=1.0, type=float)
    parser.add_argument('--accum-step', default=2, type=int)
    return parser.parse_args()


if __name__ == "__main__":
    args = parse_args()
    os.makedirs(args.output, exist_ok=True)
    set_seed(args.seed)

    dataloader_val = build_dataloader(args, "valid")
    dataloader_train = build_dataloader(args, "train")
    model = MODEL_CLS_DICT[args.model](args)
    model = model.cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    assert args.scheduler == 'linear-warmup'
    assert args.warmup > 0
    scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=args.warmup,  # not: TB305
                                                num_training_steps=args.num_epochs * len(dataloader_train) // args.accum_step)
    loss_d_fn = nn.CrossEntropyLoss(reduction="mean", weight=torch.FloatTensor([0.5, 0.5, ]).cuda())
    event_fake_ratio = count_event_fake_ratio(dataloader_train.dataset)
    loss_e_fn = nn.CrossEntropyLoss(
        reduction="mean", weight=torch.FloatTensor([event_fake_ratio, 1 - event_fake_ratio, ]).cuda()
    )

    idx = 0
    for epoch in range(args.num_epochs):
        losses = []
        loss_accum = 0.0
        pbar = tqdm.tqdm(dataloader_train, total=len(dataloader_train), desc="Epoch {:d}".format(epoch))
        for inputs in pbar:
            idx += 1

            logits_d, labels_d, logits_e, labels_e = model(inputs)
            loss_d = loss_d_fn(logits_d, labels_d)
            loss_e = loss_e_fn(logits_e, labels_e)
            loss = (1 - args.event_detection_lambda) * loss_d + args.event_detection_lambda * loss_e

            loss.backward()
            loss_accum += float(loss)

            if idx % args.accum_step == 0:
                if args.grad_clip > 0:
                    nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()

                losses.append(float(loss_accum))
                loss_accum = 0
                pbar.set_postfix({"loss": "{:.2f}".format(losses[-1])})

        print("Epoch {:d}: train loss = {:.2f}".format(epoch, np.mean(losses)))
