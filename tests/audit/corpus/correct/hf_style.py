"""HF-style loops: `if (step + 1) % grad_accum == 0:` blocks, and zero_grad at the top of a plain loop (correct)."""
import torch
from tqdm.auto import tqdm
from transformers import get_linear_schedule_with_warmup


def train(model, train_dataloader, args):
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
    num_update_steps = len(train_dataloader) // args.gradient_accumulation_steps * args.num_train_epochs
    lr_scheduler = get_linear_schedule_with_warmup(optimizer, args.warmup_steps, num_update_steps)
    global_step = 0
    tr_loss = 0.0
    model.zero_grad()
    for epoch in range(args.num_train_epochs):
        for step, batch in enumerate(tqdm(train_dataloader, desc="Iteration")):
            model.train()
            outputs = model(**batch)
            loss = outputs.loss
            if args.gradient_accumulation_steps > 1:
                loss = loss / args.gradient_accumulation_steps
            loss.backward()
            tr_loss += loss.item()
            if (step + 1) % args.gradient_accumulation_steps == 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                optimizer.step()
                lr_scheduler.step()
                model.zero_grad()
                global_step += 1
    return global_step, tr_loss / max(global_step, 1)


def simple(model, loader, optimizer, loss_fn):
    model.train()
    for batch in loader:
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(batch["x"]), batch["y"])
        loss.backward()
        optimizer.step()
