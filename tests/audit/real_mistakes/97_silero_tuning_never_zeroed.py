# Reconstructed after snakers4/silero-vad PR #699 ("fix bug in tuning/utils.py: add optimizer.zero_grad() before
# loss.backward()", merged: "It seems that optimizer.zero_grad() is missing"): the fine-tuning epoch of the VAD
# model stepped the optimizer without ever zeroing the gradients.
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
        loss.backward()
        optimizer.step()  # expect: TB104
        losses.append(loss.item())
    return sum(losses) / len(losses)
