# Fixed version of ../50_sae_loss_not_divided_by_accumulation.py: silent on the codes that file expects.


def train_fixed(model, optimizer, scheduler, loader, gradient_accumulation_steps):
    for batch_idx, batch in enumerate(loader):
        loss = model(batch) / gradient_accumulation_steps
        loss.backward()  # not: TB105
        if (batch_idx + 1) % gradient_accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
            scheduler.step()
