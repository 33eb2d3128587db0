# Fixed version of ../145_diffsynth_zero_grad_inside_accumulate.py: silent on the codes that file expects.
import torch
from accelerate import Accelerator
from tqdm import tqdm


class ModelLogger:
    def __init__(self, output_path: str):
        self.output_path = output_path
        self.num_steps = 0

    def on_step_end(self, accelerator: Accelerator, model: torch.nn.Module):
        self.num_steps += 1


def launch_training_task(
    accelerator: Accelerator,
    dataset: torch.utils.data.Dataset,
    model: torch.nn.Module,
    model_logger: ModelLogger,
    learning_rate: float = 1e-5,
    weight_decay: float = 1e-2,
    num_workers: int = 1,
    num_epochs: int = 1,
):
    optimizer = torch.optim.AdamW(model.trainable_modules(), lr=learning_rate, weight_decay=weight_decay)
    scheduler = torch.optim.lr_scheduler.ConstantLR(optimizer)
    dataloader = torch.utils.data.DataLoader(
        dataset, shuffle=True, collate_fn=lambda x: x[0], num_workers=num_workers
    )
    model, optimizer, dataloader, scheduler = accelerator.prepare(model, optimizer, dataloader, scheduler)

    for epoch_id in range(num_epochs):
        for data in tqdm(dataloader):
            with accelerator.accumulate(model):
                if dataset.load_from_cache:
                    loss = model({}, inputs=data)
                else:
                    loss = model(data)
                accelerator.backward(loss)
                optimizer.step()
                model_logger.on_step_end(accelerator, model)
                scheduler.step()
                optimizer.zero_grad()  # not: TB103
