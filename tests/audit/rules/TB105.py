# TB105 accumulated-loss-not-divided: fixture (read as text by tests/audit/test_rule_fixtures.py, never run).
# ruff: noqa  (wrong code on purpose, names left undefined)


def not_divided(model, loader, optimizer, accum_steps):
    for i, (x, y) in enumerate(loader):
        loss = loss_fn(model(x), y)
        loss.backward()  # expect: TB105
        if (i + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()


def divided(model, loader, optimizer, accum_steps):
    for i, (x, y) in enumerate(loader):
        loss = loss_fn(model(x), y) / accum_steps
        loss.backward()
        if (i + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()


def divided_in_place(model, loader, optimizer, accum_steps):
    for i, (x, y) in enumerate(loader):
        loss = loss_fn(model(x), y)
        loss /= accum_steps
        loss.backward()
        if (i + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()


def split_batch_not_divided(model, x, y, optimizer, n):
    for cx, cy in zip(x.chunk(n), y.chunk(n)):
        loss_fn(model(cx), cy).backward()  # expect: TB105
    optimizer.step()
    optimizer.zero_grad()


def split_batch_grads_averaged(model, x, y, optimizer, n):
    for cx, cy in zip(x.chunk(n), y.chunk(n)):
        loss_fn(model(cx), cy).backward()
    for p in model.parameters():
        p.grad /= n
    optimizer.step()
    optimizer.zero_grad()


def accelerate_divides(accelerator, model, loader, optimizer):
    for x, y in loader:
        with accelerator.accumulate(model):
            accelerator.backward(loss_fn(model(x), y))
            optimizer.step()
            optimizer.zero_grad()


def token_mean_not_divided(model, loader, optimizer, accum_steps):
    # a token mean (ignore_index) summed over micro-batches: k times the gradient; TB114 leaves it to this rule
    for i, (x, y) in enumerate(loader):
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten(), ignore_index=-100)
        loss.backward()  # expect: TB105
        if (i + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
