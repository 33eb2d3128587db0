# TB108 ema-misplaced: fixture (read as text by tests/audit/test_rule_fixtures.py, never run).
# ruff: noqa  (wrong code on purpose, names left undefined)


def ema_every_micro_batch(model, ema, loader, optimizer, accum):
    for i, (x, y) in enumerate(loader):
        (loss_fn(model(x), y) / accum).backward()
        ema.update(model)  # expect: TB108
        if (i + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()


def ema_before_the_step(model, ema, loader, optimizer):
    for x, y in loader:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        ema.update(model)  # expect: TB108
        optimizer.step()


def ema_after_the_step(model, ema, loader, optimizer, accum):
    for i, (x, y) in enumerate(loader):
        (loss_fn(model(x), y) / accum).backward()
        if (i + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()
            ema.update(model)


def ema_outside_accelerate_block(accelerator, model, ema_model, loader, optimizer):
    for x, y in loader:
        with accelerator.accumulate(model):
            accelerator.backward(loss_fn(model(x), y))
            optimizer.step()
            optimizer.zero_grad()
        ema_model.step(model.parameters())  # expect: TB108


def ema_on_sync_gradients(accelerator, model, ema_model, loader, optimizer):
    for x, y in loader:
        with accelerator.accumulate(model):
            accelerator.backward(loss_fn(model(x), y))
            optimizer.step()
            optimizer.zero_grad()
        if accelerator.sync_gradients:
            ema_model.step(model.parameters())
