# Reconstructed after catalyst-team/catalyst issue #799 ("Mistake in averaging of total epoch loss",
# https://github.com/catalyst-team/catalyst/issues/799): the runner averaged the per-batch loss (and metric) values
# into the epoch value without taking the batch size into account, so when the dataset size is not divisible by the
# batch size the small last batch "still enters the average with the same weight as all other batch".  The
# maintainer (Scitator) agreed ("Agreed, thanks for noting.") and asked for a PR; the fix feeds each batch value to
# the meter weighted by the current batch size.
from collections import defaultdict

import torch


class AverageValueMeter:
    def __init__(self):
        self.sum = 0.0
        self.n = 0

    def add(self, value, n=1):
        self.sum += value * n
        self.n += n

    def mean(self):
        return self.sum / max(self.n, 1)


class SupervisedRunner:
    def __init__(self, model, criterion, optimizer, device):
        self.model = model
        self.criterion = criterion
        self.optimizer = optimizer
        self.device = device
        self.loader_metrics = {}

    def _run_batch(self, batch, is_train):
        features, targets = (t.to(self.device) for t in batch)
        with torch.set_grad_enabled(is_train):
            logits = self.model(features)
            loss = self.criterion(logits, targets)
            if is_train:
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
        accuracy = (logits.argmax(dim=1) == targets).float().mean()
        return {"loss": loss.item(), "accuracy": accuracy.item()}, features.shape[0]

    def _run_loader(self, loader, is_train):
        self.model.train(is_train)
        meters = defaultdict(AverageValueMeter)
        for batch in loader:
            batch_metrics, batch_size = self._run_batch(batch, is_train)
            for key, value in batch_metrics.items():
                meters[key].add(value)  # expect: TB114
        self.loader_metrics = {key: meter.mean() for key, meter in meters.items()}
        return self.loader_metrics

    def run_epoch(self, loaders):
        epoch_metrics = {}
        for name, loader in loaders.items():
            epoch_metrics[name] = self._run_loader(loader, is_train=name.startswith("train"))
        return epoch_metrics
