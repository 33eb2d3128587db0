# Reconstructed after azavea/raster-vision PR #1029 ("Set drop_last = True in train dataloader", merged, https://github.com/azavea/raster-vision/pull/1029): Learner.setup_data() in rastervision_pytorch_learner/learner.py built the shuffled training DataLoader without drop_last, so whenever len(train_ds) % batch_sz == 1 the last training batch held a single chip and the BatchNorm layers of the torchvision backbone raised "Expected more than 1 value per channel when training" (and small tail batches gave noisy BatchNorm statistics). The merged fix adds drop_last=True to the training DataLoader only.
import logging
from abc import ABC, abstractmethod

import click
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Subset
from torchvision import models

log = logging.getLogger(__name__)


class Learner(ABC):
    def __init__(self, cfg, device='cuda'):
        self.cfg = cfg
        self.device = torch.device(device)
        self.model = self.build_model().to(self.device)
        self.loss = self.build_loss()
        self.opt = torch.optim.Adam(self.model.parameters(), lr=cfg.solver.lr)
        self.step_scheduler = None
        self.epoch_scheduler = None
        self.start_epoch = 0

    @abstractmethod
    def build_model(self) -> nn.Module:
        pass

    @abstractmethod
    def build_loss(self) -> nn.Module:
        pass

    @abstractmethod
    def get_datasets(self):
        pass

    def setup_data(self):
        """Set the the DataSet and DataLoaders for train, validation, and test sets."""
        cfg = self.cfg
        batch_sz = cfg.solver.batch_sz
        num_workers = cfg.data.num_workers

        train_ds, valid_ds, test_ds = self.get_datasets()
        if len(train_ds) < batch_sz:
            raise ValueError('Training dataset has fewer elements than batch size.')

        if cfg.overfit_mode:
            train_ds = Subset(train_ds, range(batch_sz))
            valid_ds = train_ds
            test_ds = train_ds

        collate_fn = self.get_collate_fn()
        train_dl = DataLoader(  # expect: TB???
            train_ds,
            shuffle=True,
            batch_size=batch_sz,
            num_workers=num_workers,
            pin_memory=True,
            collate_fn=collate_fn)
        valid_dl = DataLoader(
            valid_ds,
            shuffle=True,
            batch_size=batch_sz,
            num_workers=num_workers,
            pin_memory=True,
            collate_fn=collate_fn)
        test_dl = DataLoader(
            test_ds, shuffle=True, batch_size=batch_sz, num_workers=num_workers,
            pin_memory=True, collate_fn=collate_fn)

        self.train_ds, self.valid_ds, self.test_ds = train_ds, valid_ds, test_ds
        self.train_dl, self.valid_dl, self.test_dl = train_dl, valid_dl, test_dl

    def get_collate_fn(self):  # overridden by subclasses
        return None

    def to_device(self, x, device):
        if isinstance(x, list):
            return [_x.to(device) for _x in x]
        return x.to(device)

    def train_epoch(self):
        """Train for a single epoch."""
        self.model.train()
        num_samples = 0
        total_loss = 0.0
        with click.progressbar(self.train_dl, label='Training') as bar:
            for batch_ind, (x, y) in enumerate(bar):
                x = self.to_device(x, self.device)
                y = self.to_device(y, self.device)
                self.opt.zero_grad()
                output = self.train_step((x, y), batch_ind)
                loss = output['train_loss']
                loss.backward()
                self.opt.step()
                if self.step_scheduler:
                    self.step_scheduler.step()
                total_loss += loss.item() * x.shape[0]
                num_samples += x.shape[0]
        return {'train_loss': total_loss / num_samples}

    def validate_epoch(self, dl):
        """Validate for a single epoch."""
        self.model.eval()
        num_samples = 0
        total_loss = 0.0
        with torch.no_grad():
            with click.progressbar(dl, label='Validating') as bar:
                for batch_ind, (x, y) in enumerate(bar):
                    x = self.to_device(x, self.device)
                    y = self.to_device(y, self.device)
                    output = self.validate_step((x, y), batch_ind)
                    total_loss += output['val_loss'].item() * x.shape[0]
                    num_samples += x.shape[0]
        return {'val_loss': total_loss / num_samples}

    def train(self):
        """Training loop that will attempt to resume training if appropriate."""
        self.setup_data()
        for epoch in range(self.start_epoch, self.cfg.solver.num_epochs):
            log.info('epoch: {}'.format(epoch))
            train_metrics = self.train_epoch()
            if self.epoch_scheduler:
                self.epoch_scheduler.step()
            valid_metrics = self.validate_epoch(self.valid_dl)
            metrics = dict(epoch=epoch, **train_metrics, **valid_metrics)
            log.info('metrics: {}'.format(metrics))


class ClassificationLearner(Learner):
    def build_model(self):
        pretrained = self.cfg.model.pretrained
        model = getattr(models, self.cfg.model.get_backbone_str())(pretrained=pretrained)
        in_features = model.fc.in_features
        model.fc = nn.Linear(in_features, len(self.cfg.data.class_names))
        return model

    def build_loss(self):
        return nn.CrossEntropyLoss()

    def train_step(self, batch, batch_ind):
        x, y = batch
        out = self.model(x)
        return {'train_loss': self.loss(out, y)}

    def validate_step(self, batch, batch_ind):
        x, y = batch
        out = self.model(x)
        return {'val_loss': self.loss(out, y)}
