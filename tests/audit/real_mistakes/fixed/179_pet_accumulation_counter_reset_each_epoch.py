# Reconstructed after timoschick/pet PR #25 ("Fix gradient accumulation with small dataset sizes", merged, https://github.com/timoschick/pet/pull/25): TransformerModelWrapper.train gated the optimizer/scheduler step on (step + 1) % gradient_accumulation_steps with step taken from enumerate(epoch_iterator), so the counter restarted every epoch; with fewer batches per epoch than accumulation steps no update ever happened (and leftover gradients spilled into the next epoch). The maintainer timoschick merged it ("Well spotted, thanks!"); the fix keeps a step counter that persists across epochs.
# Fixed version (the merged PR applied).
import torch
from torch.utils.data import DataLoader, RandomSampler
from tqdm import tqdm, trange
from transformers import AdamW, get_linear_schedule_with_warmup


class TransformerModelWrapper:
    def train(self, train_dataset, device, per_gpu_train_batch_size=8, n_gpu=1,
              num_train_epochs=3, gradient_accumulation_steps=1, weight_decay=0.0,
              learning_rate=5e-5, adam_epsilon=1e-8, warmup_steps=0, max_grad_norm=1, max_steps=-1):
        train_batch_size = per_gpu_train_batch_size * max(1, n_gpu)
        train_sampler = RandomSampler(train_dataset)
        train_dataloader = DataLoader(train_dataset, sampler=train_sampler, batch_size=train_batch_size)

        if max_steps > 0:
            t_total = max_steps
            num_train_epochs = max_steps // (max(1, len(train_dataloader) // gradient_accumulation_steps)) + 1
        else:
            t_total = len(train_dataloader) // gradient_accumulation_steps * num_train_epochs

        no_decay = ['bias', 'LayerNorm.weight']
        optimizer_grouped_parameters = [
            {'params': [p for n, p in self.model.named_parameters() if not any(nd in n for nd in no_decay)],
             'weight_decay': weight_decay},
            {'params': [p for n, p in self.model.named_parameters() if any(nd in n for nd in no_decay)],
             'weight_decay': 0.0}
        ]
        optimizer = AdamW(optimizer_grouped_parameters, lr=learning_rate, eps=adam_epsilon)
        scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=warmup_steps,
                                                    num_training_steps=t_total)

        step = 0
        global_step = 0
        tr_loss = 0.0
        self.model.zero_grad()

        train_iterator = trange(int(num_train_epochs), desc="Epoch")
        for _ in train_iterator:
            epoch_iterator = tqdm(train_dataloader, desc="Iteration")
            for _, batch in enumerate(epoch_iterator):
                self.model.train()
                batch = {k: t.to(device) for k, t in batch.items()}
                loss = self.mlm_train_step(batch)

                if n_gpu > 1:
                    loss = loss.mean()
                if gradient_accumulation_steps > 1:
                    loss = loss / gradient_accumulation_steps

                loss.backward()

                tr_loss += loss.item()
                if (step + 1) % gradient_accumulation_steps == 0:  # not: TB???
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_grad_norm)
                    optimizer.step()
                    scheduler.step()
                    self.model.zero_grad()
                    global_step += 1

                if 0 < max_steps < global_step:
                    epoch_iterator.close()
                    break
                step += 1
            if 0 < max_steps < global_step:
                train_iterator.close()
                break

        return global_step, (tr_loss / global_step if global_step > 0 else -1)
