# TB101 scheduler-before-step: fixture (read as text by tests/audit/test_rule_fixtures.py, never run).
# ruff: noqa  (wrong code on purpose, names left undefined)
import torch
from ignite.engine import Engine, Events


def epoch_loop_scheduler_first(model, loader, optimizer, scheduler, epochs):
    for _epoch in range(epochs):
        scheduler.step()  # expect: TB101
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()


def epoch_loop_scheduler_last(model, loader, optimizer, scheduler, epochs):
    for _epoch in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
        scheduler.step()


def plateau_with_a_metric(model, loader, optimizer, plateau, epochs):
    for _epoch in range(epochs):
        plateau.step(evaluate(model))  # a metric-driven scheduler stepped with last epoch's result
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()


def stepped_for_the_previous_epoch(model, loader, optimizer, scheduler, epochs):
    for epoch in range(epochs):
        if epoch > 0:
            scheduler.step()
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()


def ignite_trainer(model, loader, optimizer, scheduler):
    def update(engine, batch):
        optimizer.zero_grad()
        loss_fn(model(batch[0]), batch[1]).backward()
        optimizer.step()

    trainer = Engine(update)

    @trainer.on(Events.EPOCH_STARTED)
    def adjust_lr(engine):
        scheduler.step()  # expect: TB101

    @trainer.on(Events.EPOCH_COMPLETED)
    def adjust_lr_after(engine):
        scheduler.step()

    def log_lr(engine):
        scheduler.step()  # expect: TB101

    trainer.add_event_handler(Events.ITERATION_STARTED, log_lr)
    trainer.run(loader)
