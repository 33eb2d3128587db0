# Reconstructed after taesunwhang/UMS-ResSel issue #3 ("Maybe wrong grad clipping", closed, https://github.com/taesunwhang/UMS-ResSel/issues/3): ResponseSelection.train (and PostTraining.train) called optimizer.step() (and scheduler.step()) first and only then nn.utils.clip_grad_norm_ before zero_grad, so the clipping never affected any update. The maintainer taesunwhang: "as you pointed out, it should be placed before optimizer.step"; fixed in commit 825214d ("fixed gradient clipping") by moving clip_grad_norm_ before optimizer.step().
# Fixed version (maintainer commit 825214d applied).
from datetime import datetime

import torch.nn as nn
from tqdm import tqdm


class ResponseSelection(object):
    def train(self):
        self._build_dataloader()
        self._setup_training()

        global_iteration_step = 0
        accu_loss, accu_cnt = 0, 0

        for epoch in range(self.start_epoch, self.hparams.num_epochs + 1):
            self.model.train()
            tqdm_batch_iterator = tqdm(self.train_dataloader)
            accu_batch = 0
            for batch_idx, batch in enumerate(tqdm_batch_iterator):
                buffer_batch = batch.copy()
                for task_key in batch:
                    for key in buffer_batch[task_key]:
                        buffer_batch[task_key][key] = buffer_batch[task_key][key].to(self.device)

                _, losses = self.model(buffer_batch)
                loss = None
                for task_tensor_loss in losses:
                    if task_tensor_loss is not None:
                        task_tensor_loss = task_tensor_loss.mean()
                        loss = loss + task_tensor_loss if loss is not None else task_tensor_loss

                loss.backward()
                accu_loss += loss.item()
                accu_cnt += 1

                accu_batch += buffer_batch["res_sel"]["label"].shape[0]

                if self.hparams.virtual_batch_size == accu_batch \
                        or batch_idx == (len(self.train_dataset) // self.hparams.train_batch_size):  # last batch

                    nn.utils.clip_grad_norm_(self.model.parameters(), self.hparams.max_gradient_norm)  # not: TB113
                    self.optimizer.step()
                    if self.hparams.optimizer_type == "AdamW":
                        self.scheduler.step()

                    self.optimizer.zero_grad()

                    accu_batch = 0
                    global_iteration_step += 1
                    tqdm_batch_iterator.set_description(
                        "[Epoch: {:3d}][Iter: {:6d}][Loss: {:6f}]".format(epoch, global_iteration_step, accu_loss / accu_cnt))
