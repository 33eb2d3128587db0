"""Loss tensors summed across iterations as ``acc[key] = acc[key] + loss`` / ``self.x = self.x + loss``."""
import torch.nn.functional as F


class SegTrainer:
    def __init__(self, net, optimizer, loader):
        self.net, self.optimizer, self.loader = net, optimizer, loader
        self.epoch_loss = 0.0
        self.log = {"loss": 0.0, "dice": 0.0}

    def train_epoch(self):
        self.net.train()
        for img, mask in self.loader:
            logits = self.net(img)
            ce = F.cross_entropy(logits, mask)
            dice = self.dice_loss(logits, mask)
            total = ce + dice
            self.optimizer.zero_grad()
            total.backward()
            self.optimizer.step()
            self.log["loss"] = self.log["loss"] + total  # expect: TB204
            self.log["dice"] = self.log["dice"] + dice.item()
            self.epoch_loss = self.epoch_loss + ce  # expect: TB204
        return self.log

    def dice_loss(self, logits, mask):
        return 1 - (logits.softmax(1)[:, 1] * mask).sum() / (mask.sum() + 1)


def pretrain(model, opt, loader, key="all"):
    sums = {key: 0.0, "steps": 0}
    for batch in loader:
        out = model(**batch)
        opt.zero_grad()
        out.loss.backward()
        opt.step()
        sums[key] = sums[key] + out.loss  # expect: TB204
        sums["steps"] = sums["steps"] + 1
    return sums
