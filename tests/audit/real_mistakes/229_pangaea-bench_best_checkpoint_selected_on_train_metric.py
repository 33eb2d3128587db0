# Reconstructed after VMarsocci/pangaea-bench issue #28 ("Save best model based on validation performance, not train performance", closed-as-fixed, labelled bug, https://github.com/VMarsocci/pangaea-bench/issues/28) / PR #32 ("Save best model by evaluate performance, fixes #28", merged, https://github.com/VMarsocci/pangaea-bench/pull/32): in engine/trainer.py SegTrainer.train_one_epoch() picked the "best" checkpoint by comparing the running average of the training-batch mIoU (self.training_metrics['mIoU'], computed on training batches in train mode) with best_metric, while the validation metrics returned by self.evaluator(...) in Trainer.train() were discarded (`_, used_time = ...`), so checkpoint_*_best.pth was the epoch with the best training mIoU. The merged fix keeps the evaluator's metrics and selects the best checkpoint from them via set_best_checkpoint(metrics, epoch).
import os

import torch
from torch.cuda.amp import GradScaler

from utils.logger import RunningAverageMeter


class Trainer():
    def __init__(self, args, model, train_loader, criterion, optimizer, lr_scheduler, evaluator, exp_dir, device):
        self.args = args
        self.rank = int(os.environ["RANK"])
        self.criterion = criterion
        self.model = model
        self.train_loader = train_loader
        self.optimizer = optimizer
        self.lr_scheduler = lr_scheduler
        self.evaluator = evaluator
        self.training_stats = {name: RunningAverageMeter(length=len(self.train_loader)) for name in ['loss', 'data_time', 'batch_time', 'eval_time']}
        self.training_metrics = {}
        self.best_ckpt = None
        self.exp_dir = exp_dir
        self.device = device
        self.enable_mixed_precision = args.fp16 or args.bf16
        self.precision = torch.float16 if args.fp16 else torch.bfloat16
        self.scaler = GradScaler(enabled=self.enable_mixed_precision)
        self.start_epoch = 0
        self.epochs = args.epochs

    def train(self):
        for epoch in range(self.start_epoch, self.epochs):
            if epoch % self.args.eval_interval == 0:
                _, used_time = self.evaluator(self.model, f'epoch {epoch}')
                self.training_stats['eval_time'].update(used_time)

            self.train_loader.sampler.set_epoch(epoch)
            self.train_one_epoch(epoch)
            if epoch % self.args.ckpt_interval == 0 and epoch != self.start_epoch:
                self.save_model(epoch)

        self.evaluator(self.model, 'final model')

        self.save_model(self.epochs, is_final=True)

        if self.best_ckpt:
            self.save_model(self.best_ckpt["epoch"], is_best=True, checkpoint=self.best_ckpt)

    def train_one_epoch(self, epoch):
        self.model.train()
        for batch_idx, data in enumerate(self.train_loader):
            image, target = data['image'], data['target']
            image = {k: v.to(self.device) for k, v in image.items()}
            target = target.to(self.device)

            with torch.cuda.amp.autocast(enabled=self.enable_mixed_precision, dtype=self.precision):
                logits = self.model(image, output_shape=target.shape[-2:])
                loss = self.compute_loss(logits, target)
                self.compute_logging_metrics(logits.detach().clone(), target.detach().clone())

            self.optimizer.zero_grad()
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
            self.lr_scheduler.step()

    
    def get_checkpoint(self, epoch):
        checkpoint = {
            "model": self.model.module.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "lr_scheduler": self.lr_scheduler.state_dict(),
            "scaler": self.scaler.state_dict(),
            "epoch": epoch,
            "args": self.args,
        }
        return checkpoint

    def save_model(self, epoch, is_final=False, is_best=False, checkpoint=None):
        if self.rank != 0:
            return
        checkpoint = self.get_checkpoint(epoch) if checkpoint is None else checkpoint
        suffix = '_best' if is_best else '_final' if is_final else ''
        checkpoint_path = os.path.join(self.exp_dir, f"checkpoint_{epoch}{suffix}.pth")
        torch.save(checkpoint, checkpoint_path)

    @torch.no_grad()
    def compute_logging_metrics(self, logits, target):
        pass


class SegTrainer(Trainer):
    def __init__(self, args, model, train_loader, criterion, optimizer, scheduler, evaluator, exp_dir, device):
        super().__init__(args, model, train_loader, criterion, optimizer, scheduler, evaluator, exp_dir, device)
        self.training_metrics = {name: RunningAverageMeter(length=100) for name in ['Acc', 'mAcc', 'mIoU']}
        self.best_metric = float('-inf')

    def train_one_epoch(self, epoch):
        super().train_one_epoch(epoch)

        if self.training_metrics['mIoU'].avg > self.best_metric:  # expect: TB???
            self.best_metric = self.training_metrics['mIoU'].avg
            self.best_ckpt = self.get_checkpoint(epoch)

    def compute_loss(self, logits, target):
        return self.criterion(logits, target)

    @torch.no_grad()
    def compute_logging_metrics(self, logits, target):
        num_classes = logits.shape[1]
        pred = torch.argmax(logits, dim=1)
        valid = target != -1
        ious = []
        for c in range(num_classes):
            inter = ((pred == c) & (target == c) & valid).sum()
            union = (((pred == c) | (target == c)) & valid).sum()
            ious.append(inter / union)
        miou = torch.nanmean(torch.stack(ious)) * 100
        self.training_metrics['mIoU'].update(miou.item())
