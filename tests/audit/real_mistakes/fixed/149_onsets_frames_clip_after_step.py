# Fixed version of ../149_onsets_frames_clip_after_step.py: silent on the codes that file expects.
import torch
from torch.nn.utils import clip_grad_norm_
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader
from tqdm import tqdm


def cycle(iterable):
    while True:
        for item in iterable:
            yield item


def train(model, dataset, iterations: int = 500000, batch_size: int = 8, learning_rate: float = 6e-4,
          learning_rate_decay_steps: int = 10000, learning_rate_decay_rate: float = 0.98,
          clip_gradient_norm: float = 3.0, validation_interval: int = 500, writer=None):
    loader = DataLoader(dataset, batch_size, shuffle=True, drop_last=True)
    optimizer = torch.optim.Adam(model.parameters(), learning_rate)
    scheduler = StepLR(optimizer, step_size=learning_rate_decay_steps, gamma=learning_rate_decay_rate)

    loop = tqdm(range(1, iterations + 1))
    for i, batch in zip(loop, cycle(loader)):
        predictions, losses = model.run_on_batch(batch)

        loss = sum(losses.values())
        optimizer.zero_grad()
        loss.backward()
        if clip_gradient_norm:
            clip_grad_norm_(model.parameters(), clip_gradient_norm)  # not: TB113
        optimizer.step()
        scheduler.step()

        if writer is not None:
            for key, value in {"loss": loss, **losses}.items():
                writer.add_scalar(key, value.item(), global_step=i)
