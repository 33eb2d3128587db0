# TB102 scheduler-per-micro-batch: fixture (read as text by tests/audit/test_rule_fixtures.py, never run).
# ruff: noqa  (wrong code on purpose, names left undefined)


def every_micro_batch(model, loader, optimizer, scheduler, accum):
    for i, (x, y) in enumerate(loader):
        (loss_fn(model(x), y) / accum).backward()
        scheduler.step()  # expect: TB102
        if (i + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()


def in_the_update_branch(model, loader, optimizer, scheduler, accum):
    for i, (x, y) in enumerate(loader):
        (loss_fn(model(x), y) / accum).backward()
        if (i + 1) % accum == 0:
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()


def no_accumulation(model, loader, optimizer, scheduler):
    for x, y in loader:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
        scheduler.step()


def accelerate_prepared(accelerator, model, loader, optimizer, scheduler):
    model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)
    for x, y in loader:
        with accelerator.accumulate(model):
            accelerator.backward(loss_fn(model(x), y))
            optimizer.step()
            scheduler.step()  # prepared: accelerate steps it with the optimizer
            optimizer.zero_grad()


def accelerate_unprepared(accelerator, model, loader, optimizer, warmup_sched):
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    for x, y in loader:
        with accelerator.accumulate(model):
            accelerator.backward(loss_fn(model(x), y))
            optimizer.step()
            warmup_sched.step()  # expect: TB102
            optimizer.zero_grad()


class Trainer:
    def training_step(self, batch, batch_idx):
        loss = self.loss_fn(self.model(batch[0]), batch[1]) / self.accum
        loss.backward()
        self.scheduler.step()  # expect: TB102
        if (batch_idx + 1) % self.accum == 0:
            self.optimizer.step()
            self.optimizer.zero_grad()
