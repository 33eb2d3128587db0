# Reconstructed after BatsResearch/taglets PR #28 ("Added set_epoch in Trainable to ensure shuffle works with DistributedSampler.", merged, https://github.com/BatsResearch/taglets/pull/28): Trainable._do_train built a DistributedSampler-backed train DataLoader (shuffle=False on the loader) and looped over epochs without ever calling train_sampler.set_epoch(epoch), so every epoch used the same ordering. The PR (merged into the BatsResearch repo, commit 3fbe3fc) adds train_sampler.set_epoch(epoch) at the top of each epoch, before _train_epoch.
# Fixed version (the merged PR applied).
import copy
import logging

import torch
import torch.distributed as dist
import torch.nn as nn

log = logging.getLogger(__name__)


class Trainable:
    @staticmethod
    def _do_train(rank, self, train_data, val_data, use_gpu, n_proc):
        backend = 'nccl' if use_gpu else 'gloo'
        dist.init_process_group(backend=backend, init_method='env://', world_size=n_proc, rank=rank)

        if use_gpu:
            self.model = self.model.cuda(rank)
            self.model = nn.parallel.DistributedDataParallel(self.model, device_ids=[rank])
        else:
            self.model = self.model.cpu()
            self.model = nn.parallel.DistributedDataParallel(self.model, device_ids=None)

        # Creates distributed data loaders from datasets
        train_sampler = torch.utils.data.distributed.DistributedSampler(
            train_data, num_replicas=n_proc, rank=rank,
        )
        train_data_loader = torch.utils.data.DataLoader(
            dataset=train_data, batch_size=self.batch_size, shuffle=False,
            num_workers=0, pin_memory=True, sampler=train_sampler
        )
        val_sampler = torch.utils.data.distributed.DistributedSampler(
            val_data, num_replicas=n_proc, rank=rank
        )
        val_data_loader = torch.utils.data.DataLoader(
            dataset=val_data, batch_size=self.batch_size, shuffle=False,
            num_workers=0, pin_memory=True, sampler=val_sampler
        )

        best_model_to_save = None
        best_val_acc = 0

        # Iterates over epochs
        for epoch in range(self.num_epochs):
            if rank == 0:
                log.info("Epoch {}: ".format(epoch + 1))

            # this is necessary for shuffle to work
            train_sampler.set_epoch(epoch)  # not: TB116

            # Trains on training data
            train_loss, train_acc = self._train_epoch(train_data_loader, use_gpu)

            val_loss, val_acc = self._validate_epoch(val_data_loader, use_gpu)

            if rank == 0 and val_acc > best_val_acc:
                best_model_to_save = copy.deepcopy(self.model.state_dict())
                best_val_acc = val_acc

            if self.lr_scheduler:
                self.lr_scheduler.step()

        if rank == 0 and self.select_on_val and best_model_to_save:
            self.model.load_state_dict(best_model_to_save)

    def _train_epoch(self, train_data_loader, use_gpu):
        self.model.train()
        running_loss = 0
        running_acc = 0
        for batch_idx, batch in enumerate(train_data_loader):
            inputs, labels = batch[0], batch[1]
            if use_gpu:
                inputs = inputs.cuda()
                labels = labels.cuda()

            self.optimizer.zero_grad()
            with torch.set_grad_enabled(True):
                outputs = self.model(inputs)
                loss = self.criterion(outputs, labels)
                loss.backward()
                self.optimizer.step()

            running_loss += loss.item()
            running_acc += self._get_train_acc(outputs, labels)

        epoch_loss = running_loss / len(train_data_loader.dataset)
        epoch_acc = running_acc.item() / len(train_data_loader.dataset)
        return epoch_loss, epoch_acc
