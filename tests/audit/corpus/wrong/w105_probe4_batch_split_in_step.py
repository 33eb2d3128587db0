"""One optimizer step over a batch split into micro-batches inside the step function, the micro-batch
losses summed, not averaged (and zeroing / clipping inside the split loop)."""
import torch


class Trainer:
    def __init__(self, model, optimizer, data_iter, grad_accum=4):
        self.model = model
        self.optimizer = optimizer
        self.data_iter = data_iter
        self.grad_accum = grad_accum

    def optimizer_update(self):
        self.optimizer.zero_grad(set_to_none=True)
        for _ in range(self.grad_accum):
            batch = next(self.data_iter)
            out = self.model(**batch)
            out.loss.backward()  # expect: TB105
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()


def sharded_step(net, opt, images, targets, n_shards=2):
    pieces = torch.tensor_split(images, n_shards)
    labels = torch.tensor_split(targets, n_shards)
    for xs, ys in zip(pieces, labels):
        opt.zero_grad()  # expect: TB103
        loss = torch.nn.functional.cross_entropy(net(xs), ys) / n_shards
        loss.backward()
        torch.nn.utils.clip_grad_value_(net.parameters(), 0.5)  # expect: TB109
    opt.step()
