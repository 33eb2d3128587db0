# Reconstructed after ThilinaRajapakse/pytorch-transformers-classification issue #21 ("Detected call of
# lr_scheduler.step() before optimizer.step()"): the old pytorch-transformers training loop called
# scheduler.step() before optimizer.step() in the accumulation branch; fixed by swapping the two calls. The same
# loop clipped after every backward, not once per update (huggingface/transformers issue #1563, fixed by PR #1580).
import torch


def train(args, model, train_dataloader, optimizer, scheduler):
    model.train()
    tr_loss = 0.0
    for step, batch in enumerate(train_dataloader):
        inputs = {"input_ids": batch[0], "attention_mask": batch[1], "labels": batch[3]}
        outputs = model(**inputs)
        loss = outputs[0]
        if args.gradient_accumulation_steps > 1:
            loss = loss / args.gradient_accumulation_steps
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)  # expect: TB109
        tr_loss += loss.item()
        if (step + 1) % args.gradient_accumulation_steps == 0:
            scheduler.step()  # expect: TB101
            optimizer.step()
            model.zero_grad()
    return tr_loss
