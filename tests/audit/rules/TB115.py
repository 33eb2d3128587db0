# TB115 scheduler-unit-mismatch: fixture (read as text by tests/audit/test_rule_fixtures.py, never run).
# ruff: noqa  (wrong code on purpose, names left undefined)
import torch
from transformers import get_cosine_schedule_with_warmup, get_linear_schedule_with_warmup


def epoch_schedule_stepped_per_batch(model, loader, optimizer, args):
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
    for epoch in range(args.epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
            scheduler.step()  # expect: TB115


def epoch_schedule_stepped_per_epoch(model, loader, optimizer, args):
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
    for epoch in range(args.epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
        cosine.step()


def milestones_in_epochs_stepped_per_batch(model, train_loader, optimizer, milestone_epochs, num_epochs):
    decay = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=milestone_epochs)
    for epoch in range(num_epochs):
        for x, y in train_loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
            decay.step()  # expect: TB115


def step_schedule_stepped_per_epoch(model, train_loader, optimizer, epochs):
    warm = get_cosine_schedule_with_warmup(optimizer, 100, epochs * len(train_loader))
    for epoch in range(epochs):
        for x, y in train_loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
        warm.step()  # expect: TB115


def step_schedule_stepped_per_batch(model, train_loader, optimizer, epochs):
    linear = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=100,
                                             num_training_steps=epochs * len(train_loader))
    for epoch in range(epochs):
        for x, y in train_loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
            linear.step()


def one_cycle_per_epoch(model, train_loader, optimizer, epochs):
    cycle = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, epochs=epochs,
                                                steps_per_epoch=len(train_loader))
    for epoch in range(epochs):
        for x, y in train_loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
        cycle.step()  # expect: TB115


def length_without_a_unit(model, train_loader, optimizer, epochs):  # a bare number: not judged
    plain = torch.optim.lr_scheduler.StepLR(optimizer, step_size=30)
    for epoch in range(epochs):
        for x, y in train_loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
            plain.step()
