# Fixed version of ../98_captioning_validate_without_no_grad.py: silent on the codes that file expects.
import torch


def validate(val_loader, encoder, decoder, criterion):
    decoder.eval()
    if encoder is not None:
        encoder.eval()
    losses = []
    with torch.no_grad():
        for imgs, caps, caplens, _allcaps in val_loader:
            imgs, caps, caplens = imgs.cuda(), caps.cuda(), caplens.cuda()
            if encoder is not None:
                imgs = encoder(imgs)
            scores, caps_sorted, decode_lengths, alphas, sort_ind = decoder(imgs, caps, caplens)  # not: TB203
            targets = caps_sorted[:, 1:]
            scores_copy = scores.clone()
            scores = torch.nn.utils.rnn.pack_padded_sequence(scores, decode_lengths, batch_first=True).data
            targets = torch.nn.utils.rnn.pack_padded_sequence(targets, decode_lengths, batch_first=True).data
            loss = criterion(scores, targets)
            losses.append(loss.item())
            del scores_copy
    return sum(losses) / len(losses)


def main(train_loader, val_loader, encoder, decoder, criterion, decoder_optimizer, epochs):
    for _ in range(epochs):
        decoder.train()
        for imgs, caps, caplens in train_loader:
            scores, caps_sorted, decode_lengths, alphas, sort_ind = decoder(encoder(imgs), caps, caplens)
            loss = criterion(scores, caps_sorted[:, 1:])
            decoder_optimizer.zero_grad()
            loss.backward()
            decoder_optimizer.step()
        validate(val_loader, encoder, decoder, criterion)
