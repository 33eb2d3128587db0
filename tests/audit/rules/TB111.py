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


def no_sync_on_the_stepping_micro_batch(model, loader, optimizer, accum, use_ddp):
    for batch_idx, (x, y) in enumerate(loader):
        sync_ctx = model.no_sync if use_ddp and batch_idx % accum != 0 else contextlib.nullcontext
        with sync_ctx():  # expect: TB111
            (loss_fn(model(x), y) / accum).backward()
        if (batch_idx + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()


def no_sync_on_the_other_micro_batches(model, loader, optimizer, accum, use_ddp):
    for batch_idx, (x, y) in enumerate(loader):
        sync_ctx = model.no_sync if use_ddp and (batch_idx + 1) % accum != 0 else contextlib.nullcontext
        with sync_ctx():
            (loss_fn(model(x), y) / accum).backward()
        if (batch_idx + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()


def no_sync_inline(model, loader, optimizer, accum):
    for i, (x, y) in enumerate(loader):
        with contextlib.nullcontext() if (i + 1) % accum == 0 else model.no_sync():
            (loss_fn(model(x), y) / accum).backward()
        if (i + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()


def no_sync_inline_off_by_one(model, loader, optimizer, accum):
    for i, (x, y) in enumerate(loader):
        with contextlib.nullcontext() if i % accum == 0 else model.no_sync():  # expect: TB111
            (loss_fn(model(x), y) / accum).backward()
        if (i + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()
