# Reconstructed after CAREamics/careamics issue #71 ("Best checkpoint doesn't seem to be saved except for the 1st epoch [BUG]", fixed by merged PR #70, https://github.com/CAREamics/careamics/issues/71): Engine.train() in src/careamics_restoration/engine.py appends each epoch's validation loss to val_losses and then calls save_checkpoint(epoch, val_losses, ...), which decided "best" with losses[-1] < min(losses); since min(losses) already includes losses[-1] the test is always False, so after epoch 0 every checkpoint went to <name>_latest.pth and <name>_best.pth stayed the epoch-0 model even while the validation loss kept decreasing. The fix (commit 4561fc36 in PR #70) compares losses[-1] == min(losses).
import logging
from pathlib import Path
from typing import Dict, List

import torch

from .losses import create_loss_function
from .metrics import MetricTracker
from .models import create_model


class Engine:
    def __init__(self, cfg, device=None):
        self.cfg = cfg
        self.device = device or torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.logger = logging.getLogger(__name__)
        self.model, self.optimizer, self.lr_scheduler = create_model(cfg, self.device)
        self.loss_func = create_loss_function(cfg)

    def train(self, train_loader, eval_loader) -> None:
        """Train the network."""
        self.logger.info(f"Starting training for {self.cfg.training.num_epochs} epochs")

        val_losses = []
        try:
            for epoch in range(self.cfg.training.num_epochs):
                train_outputs = self._train_single_epoch(train_loader)

                # Perform validation step
                eval_outputs = self.evaluate(eval_loader)
                self.logger.info(f'Validation loss for epoch {epoch}: {eval_outputs["loss"]}')
                # Add update scheduler rule based on type
                self.lr_scheduler.step(eval_outputs["loss"])
                val_losses.append(eval_outputs["loss"])
                name = self.save_checkpoint(epoch, val_losses, "state_dict")
                self.logger.info(f"Saved checkpoint to {name}")
                self.logger.info(f"Train loss: {train_outputs['loss']}")

        except KeyboardInterrupt:
            self.logger.info("Training interrupted")

    def _train_single_epoch(self, loader: torch.utils.data.DataLoader) -> Dict[str, float]:
        """Runs a single epoch of training."""
        avg_loss = MetricTracker()
        self.model.to(self.device)
        self.model.train()

        for batch, *auxillary in loader:
            self.optimizer.zero_grad()

            outputs = self.model(batch.to(self.device))

            loss = self.loss_func(outputs, *auxillary, self.device)
            loss.backward()

            avg_loss.update(loss.item(), batch.shape[0])

            self.optimizer.step()

        return {"loss": avg_loss.avg}

    def evaluate(self, eval_loader: torch.utils.data.DataLoader) -> Dict[str, float]:
        """Perform evaluation on the validation set."""
        self.model.eval()
        avg_loss = MetricTracker()

        with torch.no_grad():
            for patch, *auxillary in eval_loader:
                outputs = self.model(patch.to(self.device))
                loss = self.loss_func(outputs, *auxillary, self.device)
                avg_loss.update(loss.item(), patch.shape[0])

        return {"loss": avg_loss.avg}

    def save_checkpoint(self, epoch: int, losses: List[float], save_method: str) -> Path:
        """Save the model to a checkpoint file.

        Parameters
        ----------
        epoch : int
            Last epoch.
        losses : List[float]
            List of losses.
        save_method : str
            Method to save the model. Can be 'state_dict', or jit.
        """
        if epoch == 0 or losses[-1] < min(losses):  # expect: TB???
            name = f"{self.cfg.experiment_name}_best.pth"
        else:
            name = f"{self.cfg.experiment_name}_latest.pth"
        workdir = self.cfg.working_directory
        workdir.mkdir(parents=True, exist_ok=True)

        if save_method == "state_dict":
            checkpoint = {
                "epoch": epoch,
                "model_state_dict": self.model.state_dict(),
                "optimizer_state_dict": self.optimizer.state_dict(),
                "scheduler_state_dict": self.lr_scheduler.state_dict(),
                "loss": losses[-1],
                "config": self.cfg.model_dump(),
            }
            torch.save(checkpoint, workdir / name)
        else:
            raise NotImplementedError("Invalid save method")

        return self.cfg.working_directory.absolute() / name
