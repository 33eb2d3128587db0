# Fixed version of ../54_trocr_validate_without_eval.py: silent on the codes that file expects.
import torch


def validate(model, processor, val_dataloader, compute_cer):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for batch in val_dataloader:
            outputs = model.generate(batch["pixel_values"])  # not: TB201
            total += compute_cer(processor, outputs, batch["labels"])
    return total / len(val_dataloader)


def train(model, processor, optimizer, train_dataloader, val_dataloader, compute_cer, epochs):
    for epoch in range(epochs):
        model.train()
        for batch in train_dataloader:
            loss = model(**batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        print(epoch, validate(model, processor, val_dataloader, compute_cer))
