import math

import torch
import torch.nn.functional as F
from torch.backends import cudnn as cdnn
from torch.optim.lr_scheduler import LambdaLR as Lambda

cdnn.deterministic = True
cdnn.benchmark = False


class WarmCosine:
    def __init__(self, warmup, total):
        self.warmup, self.total = warmup, total

    def __call__(self, step):
        if step < self.warmup:
            return (step + 1) / self.warmup
        t = (step - self.warmup) / max(1, self.total - self.warmup)
        return 0.5 * (1 + math.cos(math.pi * t))


def limit_gradients(params, value):
    torch.nn.utils.clip_grad_norm_(params, value)


class RunningStats:
    def __init__(self):
        self.total = 0.0
        self.seen = 0

    def log(self, batch_loss, count):
        self.total += float(batch_loss) * count
        self.seen += count


class AmpAccumTrainer:
    def __init__(self, net, opt, micro=8, warmup=100, total=10000):
        self.net, self.opt, self.micro = net, opt, micro
        self.scaler = torch.cuda.amp.GradScaler()
        self.sched = Lambda(opt, WarmCosine(warmup, total))
        self.stats = RunningStats()

    def _drop_grads(self):
        self.opt.zero_grad(set_to_none=True)

    def evaluate(self, loader):
        was_training = self.net.training
        self.net.eval()
        correct = 0
        with torch.no_grad():
            for x, y in loader:
                probs = self.net(x).softmax(-1)
                correct += (probs.view(-1, probs.size(-1)).argmax(-1) == y.view(-1)).sum().item()
        self.net.train(was_training)
        return correct

    def epoch(self, batches, val_loader):
        self.net.train()
        for it, (x, y) in enumerate(batches):
            with torch.autocast("cuda", dtype=torch.float16):
                logp = F.log_softmax(self.net(x), -1)
                loss = F.nll_loss(logp.view(-1, logp.size(-1)), y.view(-1)) / self.micro
            self.scaler.scale(loss).backward()
            self.stats.log(loss.detach(), x.shape[0])
            if (it + 1) % self.micro == 0:
                self.scaler.unscale_(self.opt)
                limit_gradients(self.net.parameters(), 5.0)
                self.scaler.step(self.opt)
                self.scaler.update()
                self._drop_grads()
                self.sched.step()
        return self.evaluate(val_loader)
