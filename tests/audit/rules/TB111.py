# TB111 no-sync-every-micro-batch: fixture (read as text by tests/audit/test_rule_fixtures.py, never run).
# ruff: noqa  (wrong code on purpose, names left undefined)
import contextlib


def never_synced(model, loader, optimizer, accum):
    for i, (x, y) in enumerate(loader):
        with model.no_sync():  # expect: TB111
            (loss_fn(model(x), y) / accum).backward()
        if (i + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()


def synced_on_the_last_micro_batch(model, loader, optimizer, accum):
    for i, (x, y) in enumerate(loader):
        last = (i + 1) % accum == 0
        with model.no_sync() if not last else contextlib.nullcontext():
            (loss_fn(model(x), y) / accum).backward()
        if last:
            optimizer.step()
            optimizer.zero_grad()


def split_batch(model, x, y, optimizer, n):
    chunks = list(zip(x.chunk(n), y.chunk(n)))
    for cx, cy in chunks[:-1]:
        with model.no_sync():
            (loss_fn(model(cx), cy) / n).backward()
    (loss_fn(model(chunks[-1][0]), chunks[-1][1]) / n).backward()
    optimizer.step()
