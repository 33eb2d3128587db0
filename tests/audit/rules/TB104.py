# TB104 grads-never-zeroed: fixture (read as text by tests/audit/test_rule_fixtures.py, never run).
# ruff: noqa  (wrong code on purpose, names left undefined)
import torch
import torch.distributed.autograd as dist_autograd


def no_zero(model, loader, optimizer):
    for x, y in loader:
        loss_fn(model(x), y).backward()
        optimizer.step()  # expect: TB104


def zeroed(model, loader, optimizer):
    for x, y in loader:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()


def closure_zeroes(model, x, y, optimizer):
    def closure():
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        return loss

    for _ in range(20):
        optimizer.step(closure)


def two_optimizers_one_forgotten(gen, disc, opt_g, opt_d, loader):
    for real in loader:
        opt_d.zero_grad()
        d_loss(disc, gen, real).backward()
        opt_d.step()
        g_loss(disc, gen).backward()
        opt_g.step()  # expect: TB104


def rpc_loop(model, dist_optim, loader):
    for x, y in loader:
        with dist_autograd.context() as context_id:
            loss = loss_fn(model(x), y)
            dist_autograd.backward(context_id, [loss])
            dist_optim.step(context_id)
