# Reconstructed after rsommerfeld/trocr issue #9 ("During training you don't use model.eval() when you call to
# validate() function"; the maintainer: "thanks for noticing this! I will push a new commit shortly"): the
# per-epoch validation computed the character accuracy of generated text with the model still in train mode
# (dropout active).
import torch


def validate(model, processor, val_dataloader, compute_cer):
    total = 0.0
    with torch.no_grad():
        for batch in val_dataloader:
            outputs = model.generate(batch["pixel_values"])  # expect: TB201
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
