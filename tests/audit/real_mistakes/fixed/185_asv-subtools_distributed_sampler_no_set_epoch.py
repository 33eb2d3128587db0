# Reconstructed after Snowdar/asv-subtools issue #8 ("DistributedSampler", closed, https://github.com/Snowdar/asv-subtools/issues/8): SimpleTrainer.run iterated "for this_epoch in range(start_epoch, epochs)" over data.train_loader, whose sampler is a DistributedSampler under multi-GPU training, without ever calling sampler.set_epoch, so every epoch used the same shuffle order. The maintainer Snowdar: "the answer is yes ... we will fix it"; fixed the same day in commit b6f05dc ("fix bug"), which calls data.train_loader.sampler.set_epoch(...) at the start of each epoch when the sampler is a DistributedSampler (the current code passes this_epoch).
# Fixed version (maintainer fix applied).
import logging

import torch

import libs.support.utils as utils

logger = logging.getLogger(__name__)


class SimpleTrainer(object):
    def train_one_batch(self, batch):
        model = self.elements["model"]
        model_forward = self.elements["model_forward"]
        optimizer = self.elements["optimizer"]
        if not model.training:
            model.train()
        inputs, targets = batch
        optimizer.zero_grad()
        loss = model.get_loss(model_forward(inputs), targets)
        loss.backward()
        optimizer.step()
        accuracy = model.get_accuracy(targets) if self.params["compute_accuracy"] else None
        return loss.item(), accuracy

    def run(self):
        self.init_training()

        start_epoch = self.params["start_epoch"]
        epochs = self.params["epochs"]
        data = self.elements["data"]
        model = self.elements["model"]
        lr_scheduler = self.elements["lr_scheduler"]

        if utils.is_main_training():
            logger.info("Training will run for {0} epochs.".format(epochs))

        for this_epoch in range(start_epoch, epochs):
            # Set random seed w.r.t epoch for distributed training.
            if isinstance(data.train_loader.sampler, torch.utils.data.distributed.DistributedSampler):
                data.train_loader.sampler.set_epoch(this_epoch)  # not: TB116
            for this_iter, batch in enumerate(data.train_loader, 0):
                self.training_point = (this_epoch, this_iter, data.num_batch_train)

                if model.use_step:
                    model.step(*self.training_point)

                loss, acc = self.train_one_batch(batch)

                model.backward_step(*self.training_point)

                lr_scheduler_params = {"training_point": self.training_point}
                lr_scheduler.step(**lr_scheduler_params)

            if utils.is_main_training():
                self.save_model(mod="epoch")
