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


def amp_and_plain_in_two_ifs(model, loader, optimizer, scaler):
    for x, y in loader:
        loss = loss_fn(model(x), y)
        if scaler is not None:
            scaler.scale(loss).backward()
        else:
            loss.backward()
        clip_grad_norm_(model.parameters(), 1.0)
        if scaler is not None:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        optimizer.zero_grad()


def amp_flag_reassigned_between(model, loader, optimizer, scaler, use_amp):
    for x, y in loader:
        loss = loss_fn(model(x), y)
        if use_amp:
            scaler.scale(loss).backward()
        use_amp = check_overflow(model)
        if not use_amp:
            optimizer.step()  # expect: TB112
        optimizer.zero_grad()


def amp_and_plain_micro_batches(model, loader, optimizer, scaler, accum):
    for x, y in loader:
        for cx, cy in zip(x.chunk(accum), y.chunk(accum)):
            loss = loss_fn(model(cx), cy) / accum
            if scaler is not None:
                scaler.scale(loss).backward()
            else:
                loss.backward()
        if scaler is not None:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        optimizer.zero_grad()


def amp_flag_set_in_the_micro_batch_loop(model, loader, optimizer, scaler, accum):
    for x, y in loader:
        for cx, cy in zip(x.chunk(accum), y.chunk(accum)):
            loss = loss_fn(model(cx), cy) / accum
            use_scaler = scaler is not None and loss.isfinite()
            if use_scaler:
                scaler.scale(loss).backward()
        if not use_scaler:
            optimizer.step()  # expect: TB112
        optimizer.zero_grad()
