import torch
import torch.nn.functional as F


def limit_gradients(params, value):
    torch.nn.utils.clip_grad_norm_(params, value)


class RunningStats:
    def __init__(self):
        self.total = 0.0
        self.seen = 0

    def log(self, batch_loss, count):
        self.total += batch_loss * count
        self.seen += count


class AmpAccumTrainer:
    def __init__(self, net, opt, micro=8):
        self.net, self.opt, self.micro = net, opt, micro
        self.scaler = torch.cuda.amp.GradScaler()
        self.stats = RunningStats()

    def _drop_grads(self):
        self.opt.zero_grad(set_to_none=True)

    def epoch(self, batches):
        self.net.train()
        it = 0
        while it < len(batches):
            x, y = batches[it]
            self._drop_grads()  # expect: TB103
            with torch.autocast("cuda", dtype=torch.float16):
                loss = F.cross_entropy(self.net(x), y) / self.micro
            self.scaler.scale(loss).backward()
            self.stats.log(loss, x.shape[0])  # expect: TB204
            if (it + 1) % self.micro == 0:
                limit_gradients(self.net.parameters(), 5.0)  # expect: TB106
                self.scaler.step(self.opt)
                self.scaler.update()
            it += 1
