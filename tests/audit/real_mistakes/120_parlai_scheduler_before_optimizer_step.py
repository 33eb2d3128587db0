# Reconstructed after facebookresearch/ParlAI PR #2105 ("Swap step order": "lr_scheduler.step() was being called
# before optimizer.step() causing a pytorch warning to appear", merged): the agent's update_params() stepped its
# warm-up scheduler with the update count and then the optimizer.
import torch


class TorchAgent:
    def __init__(self, model, optimizer, warmup_scheduler, clip):
        self.model = model
        self.optimizer = optimizer
        self.warmup_scheduler = warmup_scheduler
        self.clip = clip
        self._number_training_updates = 0

    def update_params(self):
        if self.clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
        self._number_training_updates += 1
        self.warmup_scheduler.step(epoch=self._number_training_updates)  # expect: TB101
        self.optimizer.step()

    def train_step(self, batch):
        self.model.train()
        self.optimizer.zero_grad()
        loss = self.model(batch.text_vec, batch.label_vec).mean()
        loss.backward()
        self.update_params()
