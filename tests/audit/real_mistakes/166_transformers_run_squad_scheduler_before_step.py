# Reconstructed after huggingface/transformers PR #1136 ("swap order of optimizer.step() and scheduler.step()",
# merged, https://github.com/huggingface/transformers/pull/1136): the example run_squad.py train() called
# scheduler.step() before optimizer.step() on every update, which triggers PyTorch's "Detected call of
# `lr_scheduler.step()` before `optimizer.step()`" warning and skips the first value of the learning-rate schedule.
# The maintainer (thomwolf) merged it ("indeed, thanks"); the fix moves scheduler.step() after optimizer.step().
import torch
from torch.utils.data import DataLoader, RandomSampler
from tqdm import tqdm, trange


def train(args, train_dataset, model, optimizer, scheduler):
    train_sampler = RandomSampler(train_dataset)
    train_dataloader = DataLoader(train_dataset, sampler=train_sampler, batch_size=args.train_batch_size)
    global_step = 0
    tr_loss = 0.0
    model.zero_grad()
    for _ in trange(int(args.num_train_epochs), desc="Epoch"):
        epoch_iterator = tqdm(train_dataloader, desc="Iteration")
        for step, batch in enumerate(epoch_iterator):
            model.train()
            batch = tuple(t.to(args.device) for t in batch)
            inputs = {
                "input_ids": batch[0],
                "attention_mask": batch[1],
                "token_type_ids": batch[2],
                "start_positions": batch[3],
                "end_positions": batch[4],
            }
            outputs = model(**inputs)
            loss = outputs[0]
            if args.n_gpu > 1:
                loss = loss.mean()
            if args.gradient_accumulation_steps > 1:
                loss = loss / args.gradient_accumulation_steps
            loss.backward()
            tr_loss += loss.item()
            if (step + 1) % args.gradient_accumulation_steps == 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                scheduler.step()  # expect: TB101
                optimizer.step()
                model.zero_grad()
                global_step += 1
            if args.max_steps > 0 and global_step > args.max_steps:
                epoch_iterator.close()
                break
    return global_step, tr_loss / max(global_step, 1)
