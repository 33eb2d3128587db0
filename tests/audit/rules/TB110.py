# TB110 backward-in-autocast: fixture (read as text by tests/audit/test_rule_fixtures.py, never run).
# ruff: noqa  (wrong code on purpose, names left undefined)
import torch


def backward_inside(model, loader, optimizer, scaler):
    for x, y in loader:
        optimizer.zero_grad()
        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()  # expect: TB110
        scaler.step(optimizer)
        scaler.update()


def backward_outside(model, loader, optimizer, scaler):
    for x, y in loader:
        optimizer.zero_grad()
        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()


def autocast_switched_off(model, loader, optimizer):
    for x, y in loader:
        optimizer.zero_grad()
        with torch.autocast("cuda", enabled=False):
            loss = loss_fn(model(x), y)
            loss.backward()
        optimizer.step()
