# Reconstructed after pytorch/ignite issue #583 ("Fix Gradients accumulation example"): the FAQ's update
# function zeroed the gradients at the top of the iteration that also steps, so each step saw only the last
# micro-batch; fixed by zeroing right after step() in the same branch.
from ignite.engine import Engine


def make_trainer(model, optimizer, criterion, prepare_batch, accumulation_steps):
    def update_fn(engine, batch):
        model.train()
        if engine.state.iteration % accumulation_steps == 0:
            optimizer.zero_grad()  # expect: TB103
        x, y = prepare_batch(batch)
        y_pred = model(x)
        loss = criterion(y_pred, y) / accumulation_steps
        loss.backward()
        if engine.state.iteration % accumulation_steps == 0:
            optimizer.step()
        return loss.item()

    return Engine(update_fn)
