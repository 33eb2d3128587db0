# Reconstructed after PolymathicAI/the_well PR #60 ("fix: stop overwriting `best.pt` every validation", merged, https://github.com/PolymathicAI/the_well/pull/60): in Trainer.train() (the_well/benchmark/trainer/training.py) the best-checkpoint test `if self.best_val_loss is None or val_loss < self.best_val_loss:` saved best.pt but never assigned self.best_val_loss, which stays None from __init__, so the condition was always true and best.pt was overwritten by every validation (it was really the latest model), and the stored "best_validation_loss" was always None. The merged fix sets self.best_val_loss = val_loss after saving best.pt.
import logging
import os

import torch
import wandb
from torch.utils.data import DataLoader

logger = logging.getLogger(__name__)


class Trainer:
    def save_model(self, epoch: int, validation_loss: float, output_path: str):
        torch.save(
            {
                "epoch": epoch,
                "model_state_dict": self.model.state_dict(),
                "optimizer_state_dit": self.optimizer.state_dict(),
                "validation_loss": validation_loss,
                "best_validation_loss": self.best_val_loss,
            },
            output_path,
        )

    def load_checkpoint(self, checkpoint_path: str):
        logger.info(f"Loading checkpoint from {checkpoint_path}")
        checkpoint = torch.load(checkpoint_path, weights_only=False)
        if self.model is not None:
            self.model.load_state_dict(checkpoint["model_state_dict"])
        if self.optimizer is not None:
            self.optimizer.load_state_dict(checkpoint["optimizer_state_dit"])
        self.best_val_loss = checkpoint["best_validation_loss"]
        self.starting_val_loss = checkpoint["validation_loss"]
        self.starting_epoch = checkpoint["epoch"] + 1

    def train_one_epoch(self, epoch: int, dataloader: DataLoader) -> float:
        self.model.train()
        epoch_loss = 0.0
        train_logs = {}
        for i, batch in enumerate(dataloader):
            with torch.autocast(
                self.device.type, enabled=self.enable_amp, dtype=self.amp_type
            ):
                y_pred, y_ref = self.rollout_model(self.model, batch, self.formatter)
                loss = self.loss_fn(y_pred, y_ref, self.dset_metadata).mean()
            self.grad_scaler.scale(loss).backward()
            self.grad_scaler.step(self.optimizer)
            self.grad_scaler.update()
            self.optimizer.zero_grad()
            epoch_loss += loss.item() / len(dataloader)
        train_logs["train_loss"] = epoch_loss
        if self.lr_scheduler:
            self.lr_scheduler.step()
            train_logs["lr"] = self.lr_scheduler.get_last_lr()[-1]
        return epoch_loss, train_logs

    def train(self):
        train_dataloader = self.datamodule.train_dataloader()
        val_dataloder = self.datamodule.val_dataloader()
        test_dataloader = self.datamodule.test_dataloader()
        val_loss = self.starting_val_loss

        for epoch in range(self.starting_epoch, self.max_epoch + 1):
            if self.is_distributed:
                train_dataloader.sampler.set_epoch(epoch)
            logger.info(f"Epoch {epoch}/{self.max_epoch}: starting training")
            train_loss, train_logs = self.train_one_epoch(epoch, train_dataloader)
            train_logs |= {"train": train_loss, "epoch": epoch}
            wandb.log(train_logs, step=epoch)
            self.save_model(
                epoch, val_loss, os.path.join(self.checkpoint_folder, "recent.pt")
            )
            if (
                self.checkpoint_frequency >= 1
                and epoch % self.checkpoint_frequency == 0
            ):
                self.save_model(
                    epoch,
                    val_loss,
                    os.path.join(self.checkpoint_folder, f"checkpoint_{epoch}.pt"),
                )
            if epoch % self.val_frequency == 0 or (epoch == self.max_epoch):
                logger.info(f"Epoch {epoch}/{self.max_epoch}: starting validation")
                val_loss, val_loss_dict = self.validation_loop(
                    val_dataloder, full=epoch == self.max_epoch, epoch=epoch
                )
                val_loss_dict |= {"valid": val_loss, "epoch": epoch}
                wandb.log(val_loss_dict, step=epoch)
                if self.best_val_loss is None or val_loss < self.best_val_loss:  # expect: TB410
                    self.save_model(
                        epoch, val_loss, os.path.join(self.checkpoint_folder, "best.pt")
                    )

        test_loss, test_logs = self.validation_loop(
            test_dataloader,
            valid_or_test="test",
            full=True,
            epoch=epoch + 1000,
        )
        logger.info(f"Test loss {test_loss}")
        test_logs |= {"test": test_loss, "epoch": epoch}
        wandb.log(test_logs, step=epoch)
