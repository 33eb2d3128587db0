# Reconstructed after wenet-e2e/wekws PR #73 ("[fix bug] add optimizer.zero_grad() in kws/utils/executor.py", fixes
# #72, merged after review: "you should add optimizer.zero_grad() above loss.backward()"): the keyword-spotting
# Executor.train() stepped the optimizer every batch without zeroing the gradients.
import torch.nn as nn


class Executor:
    def __init__(self):
        self.step = 0

    def train(self, model, optimizer, data_loader, device, criterion, args):
        model.train()
        clip = args.get("grad_clip", 50.0)
        for batch_idx, batch in enumerate(data_loader):  # noqa: B007
            key, feats, target, feats_lengths = batch
            feats = feats.to(device)
            target = target.to(device)
            logits = model(feats)
            loss, acc = criterion(args.get("criterion", "max_pooling"), logits, target, feats_lengths)
            loss.backward()
            grad_norm = nn.utils.clip_grad_norm_(model.parameters(), clip)  # noqa: F841
            optimizer.step()  # expect: TB104
            self.step += 1
