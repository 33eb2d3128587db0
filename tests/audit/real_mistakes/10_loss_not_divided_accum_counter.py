# Reconstructed after hirofumi0810/neural_sp issue #168 ("accum_grad loss error"): the ASR training loop
# accumulated gradients over accum_grad_n_steps batches without dividing the loss by that count.
import torch


def train_epoch(model, optimizer, train_set, accum_grad_n_steps, clip_grad_norm):
    model.train()
    accum_n_steps = 0
    for batch in train_set:
        loss, observation = model(batch)
        loss.backward()  # expect: TB105
        loss.detach()
        accum_n_steps += 1
        if accum_n_steps >= accum_grad_n_steps:
            if clip_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip_grad_norm)
            optimizer.step()
            optimizer.zero_grad()
            accum_n_steps = 0
