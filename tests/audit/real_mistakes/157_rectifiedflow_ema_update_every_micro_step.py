# Reconstructed after lucidrains/rectified-flow-pytorch PR #46 ("fix: sync_gradients for EMA update",
# https://github.com/lucidrains/rectified-flow-pytorch/pull/46): Trainer.forward() ran each step inside
# `with self.accelerator.accumulate(self.model):` (grad_accum_every > 1 sets Accelerate's gradient_accumulation_steps)
# and already clipped only when accelerator.sync_gradients, but the EMA copy was updated after every micro-step,
# i.e. grad_accum_every times per real optimizer update, several times against unchanged weights, which skews the
# EMA decay schedule.  The merged PR (merged by the maintainer) gates the EMA update on accelerator.sync_gradients.
from itertools import cycle

from accelerate import Accelerator
from ema_pytorch import EMA
from torch.nn import Module
from torch.optim import Adam
from torch.utils.data import DataLoader


class Trainer(Module):
    def __init__(self, rectified_flow: Module, *, dataset, num_train_steps: int = 70_000, learning_rate: float = 3e-4,
                 batch_size: int = 16, use_ema: bool = True, grad_accum_every: int = 1, max_grad_norm: float = 0.5,
                 ema_kwargs: dict = dict(), accelerate_kwargs: dict = dict()):
        super().__init__()
        if grad_accum_every > 1:
            accelerate_kwargs.update(gradient_accumulation_steps=grad_accum_every)
        self.accelerator = Accelerator(**accelerate_kwargs)
        self.model = rectified_flow
        self.use_ema = use_ema
        self.ema_model = None
        if self.is_main and use_ema:
            self.ema_model = EMA(self.model, forward_method_names=("sample",), **ema_kwargs)
            self.ema_model.to(self.accelerator.device)
        self.optimizer = Adam(rectified_flow.parameters(), lr=learning_rate)
        self.dl = DataLoader(dataset, batch_size=batch_size, shuffle=True, drop_last=True)
        self.model, self.optimizer, self.dl = self.accelerator.prepare(self.model, self.optimizer, self.dl)
        self.num_train_steps = num_train_steps
        self.max_grad_norm = max_grad_norm

    @property
    def is_main(self):
        return self.accelerator.is_main_process

    def forward(self):
        dl = cycle(self.dl)
        for ind in range(self.num_train_steps):
            step = ind + 1
            self.model.train()
            with self.accelerator.accumulate(self.model):
                data = next(dl)
                loss = self.model(data)
                self.accelerator.print(f"[{step}] loss: {loss.item():.3f}")
                self.accelerator.backward(loss)
                if self.accelerator.sync_gradients:
                    self.accelerator.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
                self.optimizer.step()
                self.optimizer.zero_grad()

            unwrapped_model = self.accelerator.unwrap_model(self.model)
            if self.is_main and self.use_ema:
                self.ema_model.ema_model.data_shape = unwrapped_model.data_shape
                self.ema_model.update()  # expect: TB108
            self.accelerator.wait_for_everyone()
        print("training complete")
