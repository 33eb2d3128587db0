# TB112 scaler-bypassed: fixture (read as text by tests/audit/test_rule_fixtures.py, never run).
# ruff: noqa  (wrong code on purpose, names left undefined)


def plain_step_after_scaled_backward(model, loader, optimizer, scaler):
    for x, y in loader:
        optimizer.zero_grad()
        scaler.scale(loss_fn(model(x), y)).backward()
        optimizer.step()  # expect: TB112
        scaler.update()


def double_step(model, loader, optimizer, scaler):
    for x, y in loader:
        optimizer.zero_grad()
        scaler.scale(loss_fn(model(x), y)).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.step()  # expect: TB112


def amp_and_plain_branches(model, loader, optimizer, scaler, use_amp):
    for x, y in loader:
        optimizer.zero_grad()
        if use_amp:
            scaler.scale(loss_fn(model(x), y)).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss_fn(model(x), y).backward()
            optimizer.step()
