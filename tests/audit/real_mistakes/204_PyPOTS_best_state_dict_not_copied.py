# Reconstructed after WenjieDu/PyPOTS issue #667 ("Issue with saving the best model state", closed-as-fixed, https://github.com/WenjieDu/PyPOTS/issues/667) / PR #668 ("Fix the bug that model state not a deep copy", merged, https://github.com/WenjieDu/PyPOTS/pull/668): BaseNNModel._train_model kept the best epoch's weights as `self.best_model_dict = self.model.state_dict()`, which holds references to the live parameter tensors, so the "best" snapshot kept changing with every later optimizer step and fit() reloaded the last epoch's weights instead of the best ones. The maintainer labelled it a bug and the merged PR stores `deepcopy(self.model.state_dict())` instead.
import os
from typing import Optional

import numpy as np
import torch
from torch.cuda.amp import autocast
from torch.utils.data import DataLoader

from pypots.utils.logging import logger


class BaseNNModel:
    def _train_model(
        self,
        training_loader: DataLoader,
        val_loader: Optional[DataLoader] = None,
    ) -> None:
        # each training starts from the very beginning, so reset the loss and model dict here
        self.best_model_dict = None

        if self.validation_metric.lower_better:
            self.best_loss = float("inf")
        else:
            self.best_loss = float("-inf")

        training_step = 0
        for epoch in range(1, self.epochs + 1):
            self.model.train()
            epoch_train_loss_collector = []
            for idx, data in enumerate(training_loader):
                training_step += 1
                inputs = self._assemble_input_for_training(data)

                with autocast(enabled=self.amp_enabled):
                    self.optimizer.zero_grad()
                    results = self.model.calc_criterion(inputs)
                    loss = results["loss"].sum()
                    loss.backward()
                    self.optimizer.step()
                epoch_train_loss_collector.append(loss.item())

            mean_train_loss = np.mean(epoch_train_loss_collector)

            if val_loader is not None:
                self.model.eval()
                val_metric_collector = []
                with torch.no_grad():
                    for idx, data in enumerate(val_loader):
                        inputs = self._assemble_input_for_validating(data)

                        with autocast(enabled=self.amp_enabled):
                            results = self.model.calc_criterion(inputs)

                        val_metric = results["metric"].sum()
                        val_metric_collector.append(val_metric.detach().item())

                mean_val_metric = np.mean(val_metric_collector)
                logger.info(
                    f"Epoch {epoch:03d} - "
                    f"training loss ({self.training_loss_name}): {mean_train_loss:.4f}, "
                    f"validation {self.validation_metric_name}: {mean_val_metric:.4f}"
                )
                mean_loss = mean_val_metric
            else:
                logger.info(f"Epoch {epoch:03d} - training loss ({self.training_loss_name}): {mean_train_loss:.4f}")
                mean_loss = mean_train_loss

            if (self.validation_metric.lower_better and mean_loss < self.best_loss) or (
                not self.validation_metric.lower_better and mean_loss > self.best_loss
            ):
                self.best_epoch = epoch
                self.best_loss = mean_loss
                self.best_model_dict = self.model.state_dict()  # expect: TB408
                self.patience = self.original_patience
            else:
                self.patience -= 1

            self._auto_save_model_if_necessary(
                confirm_saving=self.best_epoch == epoch and self.model_saving_strategy == "better",
                saving_name=f"{self.__class__.__name__}_epoch{epoch}_{self.validation_metric_name}{mean_loss:.4f}",
            )

            if self.patience == 0:
                logger.info("Exceeded the training patience. Terminating the training procedure...")
                break

        logger.info(f"Finished training. The best model is from epoch#{self.best_epoch}.")

    def fit(self, training_loader: DataLoader, val_loader: Optional[DataLoader] = None) -> None:
        self._train_model(training_loader, val_loader)
        self.model.load_state_dict(self.best_model_dict)
        self._auto_save_model_if_necessary(confirm_saving=self.model_saving_strategy == "best")
