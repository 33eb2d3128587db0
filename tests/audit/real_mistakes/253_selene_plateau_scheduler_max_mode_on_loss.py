# Reconstructed after FunctionLab/selene issue #115 ("ReduceLROnPlateau in TrainModel uses incorrect mode", filed by a core developer and labelled bug; fixed by commit ed96d50 "lr scheduler should track min loss" in merged PR #116, https://github.com/FunctionLab/selene/issues/115): TrainModel.train_and_validate() in selene_sdk/train_model.py builds ReduceLROnPlateau(self.optimizer, 'max', ...) but steps it with the rounded validation *loss*, so the scheduler treated every decrease of the loss as "no improvement" and cut the learning rate by 0.8 every 16 validation rounds while the model was still improving, instead of when the loss stopped decreasing. The fix switches the scheduler to mode 'min'.
import logging
import math
import os
import shutil

import numpy as np
import torch
from torch.autograd import Variable
from torch.optim.lr_scheduler import ReduceLROnPlateau

logger = logging.getLogger("selene")


class TrainModel(object):
    """Ties together the objects and methods needed to train and validate a model."""

    def __init__(self, model, data_sampler, loss_criterion, optimizer_class, optimizer_kwargs,
                 batch_size, max_steps, report_stats_every_n_steps, output_dir,
                 save_checkpoint_every_n_steps=1000, use_cuda=False):
        self.model = model
        self.sampler = data_sampler
        self.criterion = loss_criterion
        self.optimizer = optimizer_class(self.model.parameters(), **optimizer_kwargs)
        self.batch_size = batch_size
        self.max_steps = max_steps
        self.nth_step_report_stats = report_stats_every_n_steps
        self.nth_step_save_checkpoint = save_checkpoint_every_n_steps
        self.output_dir = output_dir
        self.use_cuda = use_cuda
        if self.use_cuda:
            self.model.cuda()
            self.criterion.cuda()
        self._start_step = 0
        self._min_loss = float("inf")
        self._validation_data, self._all_validation_targets = \
            self.sampler.get_validation_set(self.batch_size)

    def _get_batch(self):
        return self.sampler.sample(batch_size=self.batch_size)

    def train_and_validate(self):
        """Trains the model and measures validation performance."""
        min_loss = self._min_loss
        scheduler = ReduceLROnPlateau(
            self.optimizer, 'max', patience=16, verbose=True,  # expect: TB306
            factor=0.8)

        for step in range(self._start_step, self.max_steps):
            train_loss = self.train()

            if step % self.nth_step_save_checkpoint == 0:
                self._save_checkpoint({
                    "step": step,
                    "arch": self.model.__class__.__name__,
                    "state_dict": self.model.state_dict(),
                    "min_loss": min_loss,
                    "optimizer": self.optimizer.state_dict()}, False)

            if step and step % self.nth_step_report_stats == 0:
                valid_scores = self.validate()
                validation_loss = valid_scores["loss"]
                scheduler.step(math.ceil(validation_loss * 1000.0) / 1000.0)

                if validation_loss < min_loss:
                    min_loss = validation_loss
                    self._save_checkpoint({
                        "step": step,
                        "arch": self.model.__class__.__name__,
                        "state_dict": self.model.state_dict(),
                        "min_loss": min_loss,
                        "optimizer": self.optimizer.state_dict()}, True)
                    logger.debug("Updating `best_model.pth.tar`")
                logger.info("training loss: {0}".format(train_loss))
                logger.info("validation loss: {0}".format(validation_loss))

    def train(self):
        """Trains the model on a batch of data and returns the training loss."""
        self.model.train()
        self.sampler.set_mode("train")

        inputs, targets = self._get_batch()
        inputs = torch.Tensor(inputs)
        targets = torch.Tensor(targets)

        if self.use_cuda:
            inputs = inputs.cuda()
            targets = targets.cuda()

        inputs = Variable(inputs)
        targets = Variable(targets)

        predictions = self.model(inputs.transpose(1, 2))
        loss = self.criterion(predictions, targets)

        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()

        return loss.item()

    def _evaluate_on_data(self, data_in_batches):
        self.model.eval()

        batch_losses = []
        all_predictions = []
        for (inputs, targets) in data_in_batches:
            inputs = torch.Tensor(inputs)
            targets = torch.Tensor(targets)
            if self.use_cuda:
                inputs = inputs.cuda()
                targets = targets.cuda()

            with torch.no_grad():
                predictions = self.model(inputs.transpose(1, 2))
                loss = self.criterion(predictions, targets)
                all_predictions.append(predictions.data.cpu().numpy())
                batch_losses.append(loss.item())
        all_predictions = np.vstack(all_predictions)
        return np.average(batch_losses), all_predictions

    def validate(self):
        average_loss, all_predictions = self._evaluate_on_data(self._validation_data)
        return {"loss": average_loss, "predictions": all_predictions}

    def _save_checkpoint(self, state, is_best, filename="checkpoint"):
        cp_filepath = os.path.join(self.output_dir, filename)
        torch.save(state, "{0}.pth.tar".format(cp_filepath))
        if is_best:
            best_filepath = os.path.join(self.output_dir, "best_model")
            shutil.copyfile("{0}.pth.tar".format(cp_filepath),
                            "{0}.pth.tar".format(best_filepath))
