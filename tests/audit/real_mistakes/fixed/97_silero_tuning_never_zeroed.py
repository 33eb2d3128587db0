# Fixed version of ../97_silero_tuning_never_zeroed.py: silent on the codes that file expects.
import torch


def train(config, loader, jit_model, decoder, criterion, optimizer, device):
    decoder.train()
    losses = []
    for x, targets, masks in loader:
        x, targets, masks = x.to(device), targets.to(device), masks.to(device)
        with torch.no_grad():
            features = jit_model._model.encoder(jit_model._model.stft(x))
        preds = decoder(features).squeeze(1)
        loss = criterion(preds, targets)
        loss = (loss * masks).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()  # not: TB104
        losses.append(loss.item())
    return sum(losses) / len(losses)
