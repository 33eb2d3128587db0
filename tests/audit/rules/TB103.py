# TB103 zero-grad-misplaced: fixture (read as text by tests/audit/test_rule_fixtures.py, never run).
# ruff: noqa  (wrong code on purpose, names left undefined)


def zero_every_micro_batch(model, loader, optimizer, accum):
    for i, (x, y) in enumerate(loader):
        optimizer.zero_grad()  # expect: TB103
        (loss_fn(model(x), y) / accum).backward()
        if (i + 1) % accum == 0:
            optimizer.step()


def zero_after_the_step(model, loader, optimizer, accum):
    for i, (x, y) in enumerate(loader):
        (loss_fn(model(x), y) / accum).backward()
        if (i + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()


def zero_at_the_top_without_accumulation(model, loader, optimizer):
    for x, y in loader:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()


def zero_between_backward_and_step(model, loader, optimizer):
    for x, y in loader:
        loss_fn(model(x), y).backward()
        optimizer.zero_grad()  # expect: TB103
        optimizer.step()


def zero_at_window_start(engine, model, optimizer, batch, accum):
    if engine.state.iteration % accum == 0:
        optimizer.zero_grad()  # expect: TB103
    (loss_fn(model(batch[0]), batch[1]) / accum).backward()
    if engine.state.iteration % accum == 0:
        optimizer.step()


def amp_and_plain_update_branches(model, loader, optimizer, loss_scaler, use_amp, accum):
    for i, (x, y) in enumerate(loader):
        loss = loss_fn(model(x), y) / accum
        if use_amp:
            loss_scaler(loss, optimizer, update_grad=(i + 1) % accum == 0)
            if (i + 1) % accum == 0:
                optimizer.zero_grad()
        else:
            loss.backward()
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()


class PolicyTrainer:
    def forward_backward(self, microbatch, n):
        self.optimizer.zero_grad()  # expect: TB103
        (self.loss_fn(self.model(microbatch)) / n).backward()

    def optim_step(self):
        self.optimizer.step()


def controller(trainer, microbatches):
    for mb in microbatches:
        trainer.forward_backward(mb, len(microbatches))
    trainer.optim_step()
