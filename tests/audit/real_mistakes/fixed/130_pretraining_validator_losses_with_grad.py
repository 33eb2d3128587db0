# Fixed version of ../130_pretraining_validator_losses_with_grad.py: silent on the codes that file expects.
import math

import torch


def compute_losses(model, batches, device):
    model.to(device)
    model.eval()
    losses = []
    with torch.no_grad():
        for batch in batches:
            try:
                inputs = batch.to(device)
                logits = model(inputs).logits  # not: TB203
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
