# TB107 scaler-step-without-update: fixture (read as text by tests/audit/test_rule_fixtures.py, never run).
# ruff: noqa  (wrong code on purpose, names left undefined)


def never_updated(model, loader, optimizer, scaler):
    for x, y in loader:
        optimizer.zero_grad()
        scaler.scale(loss_fn(model(x), y)).backward()
        scaler.step(optimizer)  # expect: TB107


def updated(model, loader, optimizer, scaler):
    for x, y in loader:
        optimizer.zero_grad()
        scaler.scale(loss_fn(model(x), y)).backward()
        scaler.step(optimizer)
        scaler.update()


def updated_after_two_optimizers(gen, disc, loader, g_opt, d_opt, scaler):
    for real in loader:
        d_opt.zero_grad()
        scaler.scale(d_loss(disc, gen, real)).backward()
        scaler.step(d_opt)
        g_opt.zero_grad()
        scaler.scale(g_loss(disc, gen)).backward()
        scaler.step(g_opt)
        scaler.update()
