import torch
from tqdm.auto import tqdm


def train(model, train_dataloader, optimizer, lr_scheduler, gradient_accumulation_steps=16):
    model.train()
    progress = tqdm(range(len(train_dataloader) // gradient_accumulation_steps))
    for step, batch in enumerate(train_dataloader):
        outputs = model(**batch)
        loss = outputs.loss
        loss.backward()  # expect: TB105
        if (step + 1) % gradient_accumulation_steps == 0:
            optimizer.step()
            lr_scheduler.step()
            optimizer.zero_grad()
            progress.update(1)
