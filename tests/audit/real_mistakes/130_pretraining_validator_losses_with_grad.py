# Reconstructed after macrocosm-os/pretraining PR #104 ("Use torch.no_grad on loss calculation to save memory.",
# merged): the validator's compute_losses() put each miner's model in eval mode and ran its forward passes over the
# evaluation batches with autograd on, only to read the loss values.
import math

import torch


def compute_losses(model, batches, device):
    model.to(device)
    model.eval()
    losses = []
    for batch in batches:
        try:
            inputs = batch.to(device)
            logits = model(inputs).logits  # expect: TB203
            shift_logits = logits[..., :-1, :].contiguous()
            shift_labels = inputs[..., 1:].contiguous()
            loss_fct = torch.nn.CrossEntropyLoss()
            loss = loss_fct(shift_logits.view(-1, shift_logits.size(-1)), shift_labels.view(-1))
            losses.append(loss.item())
        except Exception:
            losses.append(math.inf)
    return losses


def score_models(models, batches, device):
    return {uid: compute_losses(model, batches, device) for uid, model in models.items()}
