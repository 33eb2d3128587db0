"""SAM / ASAM against the formula and a naive re-implementation; BatchNorm running-stat freezing."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from trickbag.optim import SAM, build_scheduler, disable_running_stats, enable_running_stats


def _model(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 3))


def _data(seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(16, 4, generator=g), torch.randint(0, 3, (16,), generator=g)


def _loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(model(x), y)


def _grads(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
    params = list(model.parameters())
    return list(torch.autograd.grad(_loss(model, x, y), params))


@pytest.mark.parametrize("adaptive", [False, True])
def test_first_step_perturbation_matches_formula(adaptive: bool) -> None:
    model = _model()
    x, y = _data()
    rho = 0.3
    opt = SAM(model.parameters(), torch.optim.SGD, rho=rho, adaptive=adaptive, lr=0.1)
    w0 = [p.detach().clone() for p in model.parameters()]
    _loss(model, x, y).backward()
    g = [p.grad.detach().clone() for p in model.parameters()]
    opt.first_step()
    # SAM: e = rho * g / ||g||;  ASAM: e = rho * w^2 g / || |w| g ||  (norms over all parameters)
    t = [w.abs() if adaptive else torch.ones_like(w) for w in w0]
    norm = torch.sqrt(sum(((ti * gi) ** 2).sum() for ti, gi in zip(t, g)))
    for p, w, ti, gi in zip(model.parameters(), w0, t, g):
        torch.testing.assert_close(p.detach(), w + rho * ti * ti * gi / norm)
    # the perturbation has norm rho in the (scaled) space it is defined in
    e = [p.detach() - w for p, w in zip(model.parameters(), w0)]
    scaled = torch.sqrt(sum(((ei / ti) ** 2).sum() for ei, ti in zip(e, t)))
    torch.testing.assert_close(scaled, torch.tensor(rho), rtol=1e-4, atol=1e-6)


def test_grad_norm_spans_all_param_groups() -> None:
    model = _model()
    x, y = _data()
    groups = [{"params": model[0].parameters()}, {"params": model[2].parameters(), "rho": 0.5}]
    opt = SAM(groups, torch.optim.SGD, rho=0.1, lr=0.1)
    w0 = [p.detach().clone() for p in model.parameters()]
    _loss(model, x, y).backward()
    g = [p.grad.detach().clone() for p in model.parameters()]
    opt.first_step()
    norm = torch.sqrt(sum((gi**2).sum() for gi in g))  # one norm over both groups
    rhos = [0.1, 0.1, 0.5, 0.5]
    for p, w, gi, rho in zip(model.parameters(), w0, g, rhos):
        torch.testing.assert_close(p.detach(), w + rho * gi / norm)


def _naive_sam_sgd(model, batches, *, rho, lr, momentum, weight_decay, adaptive=False):
    """SAM written out by hand: grad, perturb, grad again, restore, SGD with momentum and decay."""
    params = list(model.parameters())
    bufs: list[torch.Tensor | None] = [None] * len(params)
    for x, y in batches:
        g = _grads(model, x, y)
        with torch.no_grad():
            t = [p.abs() if adaptive else torch.ones_like(p) for p in params]
            norm = torch.sqrt(sum(((ti * gi) ** 2).sum() for ti, gi in zip(t, g)))
            old = [p.clone() for p in params]
            for p, ti, gi in zip(params, t, g):
                p += rho * ti * ti * gi / norm
        g2 = _grads(model, x, y)
        with torch.no_grad():
            for i, (p, w, gi) in enumerate(zip(params, old, g2)):
                p.copy_(w)
                d = gi + weight_decay * p
                bufs[i] = d.clone() if bufs[i] is None else momentum * bufs[i] + d
                p -= lr * bufs[i]


@pytest.mark.parametrize("adaptive", [False, True])
def test_sam_steps_match_naive_reimplementation(adaptive: bool) -> None:
    batches = [_data(seed) for seed in (1, 2, 3)]
    ref, model = _model(), _model()
    _naive_sam_sgd(ref, batches, rho=0.2, lr=0.3, momentum=0.9, weight_decay=1e-2, adaptive=adaptive)
    opt = SAM(model.parameters(), torch.optim.SGD, rho=0.2, adaptive=adaptive, lr=0.3, momentum=0.9, weight_decay=1e-2)
    for x, y in batches:
        _loss(model, x, y).backward()
        opt.first_step(zero_grad=True)
        _loss(model, x, y).backward()
        opt.second_step(zero_grad=True)
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q)
    # and SAM really differs from plain SGD on the same data (the perturbation is not a no-op)
    plain = _model()
    sgd = torch.optim.SGD(plain.parameters(), lr=0.3, momentum=0.9, weight_decay=1e-2)
    for x, y in batches:
        sgd.zero_grad()
        _loss(plain, x, y).backward()
        sgd.step()
    assert not torch.allclose(plain[0].weight, model[0].weight)


def test_closure_form_equals_two_call_form() -> None:
    batches = [_data(seed) for seed in (4, 5)]
    a, b = _model(), _model()
    opt_a = SAM(a.parameters(), torch.optim.SGD, rho=0.1, lr=0.2, momentum=0.5)
    opt_b = SAM(b.parameters(), torch.optim.SGD, rho=0.1, lr=0.2, momentum=0.5)
    for x, y in batches:
        _loss(a, x, y).backward()
        opt_a.first_step(zero_grad=True)
        second_a = _loss(a, x, y)
        second_a.backward()
        opt_a.second_step(zero_grad=True)

        opt_b.zero_grad()
        _loss(b, x, y).backward()  # the first backward is the caller's job

        def closure() -> torch.Tensor:
            loss = _loss(b, x, y)  # noqa: B023  (called by opt_b.step within this iteration)
            loss.backward()
            return loss

        with torch.no_grad():  # the closure still gets gradients
            second_b = opt_b.step(closure)
        torch.testing.assert_close(second_b.detach(), second_a.detach())
    for p, q in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(p, q)


def test_weights_restored_exactly_before_base_step() -> None:
    model = _model()
    x, y = _data()
    opt = SAM(model.parameters(), torch.optim.SGD, rho=0.5, lr=0.0)  # lr 0: the base step changes nothing
    w0 = [p.detach().clone() for p in model.parameters()]
    _loss(model, x, y).backward()
    opt.first_step(zero_grad=True)
    assert not torch.equal(model[0].weight, w0[0])
    _loss(model, x, y).backward()
    opt.second_step()
    for p, w in zip(model.parameters(), w0):
        assert torch.equal(p, w)


def test_second_pass_without_a_grad_still_restores_weight() -> None:
    model = _model()
    x, y = _data()
    opt = SAM(model.parameters(), torch.optim.SGD, rho=0.5, lr=0.0)
    w0 = model[2].bias.detach().clone()
    _loss(model, x, y).backward()
    opt.first_step(zero_grad=True)  # grads set to None
    model[0](x).sum().backward()  # second pass that never reaches model[2]
    assert model[2].bias.grad is None
    opt.second_step()
    assert torch.equal(model[2].bias, w0)


def test_zero_gradient_gives_zero_perturbation_not_nan() -> None:
    model = _model()
    opt = SAM(model.parameters(), torch.optim.SGD, rho=0.05, adaptive=True, lr=0.1)
    w0 = [p.detach().clone() for p in model.parameters()]
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.first_step()
    for p, w in zip(model.parameters(), w0):
        assert torch.equal(p, w)
    opt.second_step()
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_params_without_grad_are_skipped() -> None:
    model = _model()
    x, y = _data()
    model[0].requires_grad_(False)
    opt = SAM(model.parameters(), torch.optim.SGD, rho=0.1, lr=0.1)
    w0 = model[0].weight.detach().clone()
    _loss(model, x, y).backward()
    opt.first_step()
    assert torch.equal(model[0].weight, w0)


def test_scheduler_on_sam_drives_base_optimizer_lr() -> None:
    model = _model()
    x, y = _data()
    groups = [{"params": model[0].parameters(), "lr": 0.2}, {"params": model[2].parameters()}]
    opt = SAM(groups, torch.optim.SGD, rho=0.05, lr=0.1)
    sched = build_scheduler(opt, "step", step_size=1, gamma=0.5)
    for _ in range(3):
        _loss(model, x, y).backward()
        opt.first_step(zero_grad=True)
        _loss(model, x, y).backward()
        opt.second_step(zero_grad=True)
        sched.step()
    assert opt.param_groups is opt.base_optimizer.param_groups
    assert [g["lr"] for g in opt.base_optimizer.param_groups] == pytest.approx([0.2 / 8, 0.1 / 8])
    # the base optimizer really steps with the scheduled lr: w_new = w - lr * g(perturbed)
    w0 = model[2].bias.detach().clone()
    _loss(model, x, y).backward()
    opt.first_step(zero_grad=True)
    _loss(model, x, y).backward()
    g2 = model[2].bias.grad.detach().clone()
    opt.second_step()
    torch.testing.assert_close(model[2].bias.detach(), w0 - 0.1 / 8 * g2)


def test_state_dict_round_trip_keeps_momentum_and_shared_groups() -> None:
    batches = [_data(seed) for seed in (6, 7, 8)]
    a = _model()
    opt_a = SAM(a.parameters(), torch.optim.SGD, rho=0.1, adaptive=True, lr=0.1, momentum=0.9)

    def sam_step(model, opt, x, y):
        _loss(model, x, y).backward()
        opt.first_step(zero_grad=True)
        _loss(model, x, y).backward()
        opt.second_step(zero_grad=True)

    for x, y in batches[:2]:
        sam_step(a, opt_a, x, y)
    b = copy.deepcopy(a)
    opt_b = SAM(b.parameters(), torch.optim.SGD, rho=0.7, lr=5.0, momentum=0.0)
    opt_b.load_state_dict(copy.deepcopy(opt_a.state_dict()))  # as if saved to disk
    assert opt_b.param_groups is opt_b.base_optimizer.param_groups
    assert opt_b.param_groups[0]["rho"] == 0.1 and opt_b.param_groups[0]["adaptive"] is True
    assert opt_b.param_groups[0]["lr"] == 0.1
    sam_step(a, opt_a, *batches[2])
    sam_step(b, opt_b, *batches[2])  # uses the restored momentum buffers
    for p, q in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(p, q)
    # a scheduler built after loading still reaches the base optimizer
    sched = build_scheduler(opt_b, "step", step_size=1, gamma=0.5)
    sam_step(b, opt_b, *batches[0])
    sched.step()
    assert opt_b.base_optimizer.param_groups[0]["lr"] == pytest.approx(0.05)


def test_argument_validation() -> None:
    params = list(_model().parameters())
    with pytest.raises(TypeError, match="optimizer class"):
        SAM(params, torch.optim.SGD(params, lr=0.1), lr=0.1)
    with pytest.raises(ValueError, match="rho"):
        SAM(params, torch.optim.SGD, rho=-0.1, lr=0.1)
    with pytest.raises(TypeError, match="rho"):
        SAM(params, torch.optim.Adadelta)  # Adadelta has its own 'rho'
    opt = SAM(params, torch.optim.SGD, lr=0.1)
    with pytest.raises(ValueError, match="closure"):
        opt.step()
    with pytest.raises(RuntimeError, match="first_step"):
        opt.second_step()


def _bn_model(momentum: float | None) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6, momentum=momentum), nn.ReLU(), nn.Linear(6, 2))


def _bn_state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.state_dict().items() if "running" in k or "num_batches" in k}


@pytest.mark.parametrize("momentum", [0.1, None])
def test_disable_running_stats_freezes_second_pass_and_restores(momentum: float | None) -> None:
    a = _bn_model(momentum)
    b = copy.deepcopy(a)  # reference: never sees the second pass
    g = torch.Generator().manual_seed(3)
    x1, x2, x3 = (torch.randn(8, 4, generator=g) * 3 + 1 for _ in range(3))

    a(x1), b(x1)
    before = _bn_state(a)
    with disable_running_stats(a):
        out = a(x2)
        assert a[1].momentum == 0.0
        after_second_pass = _bn_state(a)
        for k in ("1.running_mean", "1.running_var"):  # unchanged during the second pass
            assert torch.equal(after_second_pass[k], before[k])
    assert a[1].momentum == momentum  # None (cumulative average) comes back as None
    # outputs in the second pass still use batch statistics, like an ordinary training forward
    torch.testing.assert_close(out, copy.deepcopy(b)(x2))
    a(x3), b(x3)
    # the cumulative average (momentum=None) weights by num_batches_tracked: it must not count the
    # frozen pass, so the stats equal those of a model that never ran it
    for k, v in _bn_state(b).items():
        torch.testing.assert_close(_bn_state(a)[k], v)
    assert int(a[1].num_batches_tracked) == 2


def test_enable_keeps_a_batch_counter_rewound_while_disabled() -> None:
    """Only the disabled pass's own counts are undone: a rewind (reset, a vetoed update put back) stays."""
    model = _bn_model(None)
    for _ in range(3):
        model(torch.randn(8, 4))
    disable_running_stats(model)
    model(torch.randn(8, 4))  # counts itself: 4
    model[1].reset_running_stats()  # back to 0 meanwhile
    enable_running_stats(model)
    assert int(model[1].num_batches_tracked) == 0 and model[1].momentum is None
    model(torch.randn(8, 4))
    disable_running_stats(model)
    model(torch.randn(8, 4))
    enable_running_stats(model)
    assert int(model[1].num_batches_tracked) == 1  # the frozen pass's own count is still undone


def test_disable_enable_pair_form_and_nesting() -> None:
    model = _bn_model(None)
    enable_running_stats(model)  # no-op when not disabled (davda54 loop calls it first)
    assert model[1].momentum is None
    disable_running_stats(model)
    disable_running_stats(model)  # again: keeps the first saved values, not 0.0
    stats = _bn_state(model)
    model(torch.randn(8, 4))
    enable_running_stats(model)
    assert model[1].momentum is None
    for k, v in _bn_state(model).items():
        assert torch.equal(v, stats[k])
    with disable_running_stats(model):
        with disable_running_stats(model):
            pass
        assert model[1].momentum == 0.0  # inner exit does not restore early
    assert model[1].momentum is None
    with pytest.raises(TypeError, match="nn.Module"):
        disable_running_stats("model")  # type: ignore[arg-type]
