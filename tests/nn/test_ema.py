"""EMA against a closed-form / naive reference written here."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch import nn

from trickbag.nn import EMA

from .helpers import round_trip


def make_model(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))


def set_random_weights(model: nn.Module, g: torch.Generator) -> dict[str, torch.Tensor]:
    """Overwrite every parameter with fresh random values (as an optimizer step would) and return them."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g))
    return {n: p.detach().clone().double() for n, p in model.named_parameters()}


def closed_form(e0: torch.Tensor, seq: list[torch.Tensor], decays: list[float]) -> torch.Tensor:
    """e_k = (prod_t d_t) e0 + sum_t (1 - d_t) (prod_{s>t} d_s) p_t, written as an explicit sum."""
    k = len(seq)
    out = math.prod(decays) * e0
    for t in range(k):
        out = out + (1 - decays[t]) * math.prod(decays[t + 1 :]) * seq[t]
    return out


def test_k_updates_match_closed_form():
    model = make_model()
    e0 = {n: p.detach().clone().double() for n, p in model.named_parameters()}
    d = 0.7
    ema = EMA(model, decay=d, warmup=False)
    g = torch.Generator().manual_seed(1)
    seq = []
    for _ in range(5):
        seq.append(set_random_weights(model, g))
        ema.update(model)
    for name, p in ema.module.named_parameters():
        expected = closed_form(e0[name], [s[name] for s in seq], [d] * 5)
        torch.testing.assert_close(p.double(), expected, rtol=1e-5, atol=1e-6)
    assert ema.num_updates == 5 and ema.num_averages == 5


def test_frozen_parameters_are_averaged_like_trainable_ones():
    # The classic bug filters on requires_grad; a frozen parameter that changes (loaded, unfrozen
    # later) must still be tracked by the same formula.
    model = make_model()
    model[0].requires_grad_(False)
    e0 = model[0].weight.detach().clone()
    ema = EMA(model, decay=0.5, warmup=False)
    with torch.no_grad():
        model[0].weight.add_(4.0)
    ema.update(model)
    torch.testing.assert_close(ema.module[0].weight, 0.5 * e0 + 0.5 * model[0].weight)
    # A frozen, unchanged parameter stays equal to the live value.
    torch.testing.assert_close(ema.module[0].bias, model[0].bias)


def test_every_averages_only_every_kth_call():
    model = make_model()
    e0 = {n: p.detach().clone().double() for n, p in model.named_parameters()}
    ema = EMA(model, decay=0.6, warmup=False, every=3)
    g = torch.Generator().manual_seed(2)
    averaged = []
    for call in range(1, 8):
        values = set_random_weights(model, g)
        ema.update(model)
        if call % 3 == 0:
            averaged.append(values)
    assert ema.num_updates == 7 and ema.num_averages == 2
    for name, p in ema.module.named_parameters():
        expected = closed_form(e0[name], [s[name] for s in averaged], [0.6, 0.6])
        torch.testing.assert_close(p.double(), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "warmup, formula",
    [
        (True, lambda n, d: min(d, (1 + n) / (10 + n))),
        (4, lambda n, d: d * (1 - math.exp(-n / 4))),
        (False, lambda n, d: d),
    ],
)
def test_warmup_formula(warmup, formula):
    d = 0.9
    model = make_model()
    e0 = {n: p.detach().clone().double() for n, p in model.named_parameters()}
    ema = EMA(model, decay=d, warmup=warmup)
    decays = [formula(n, d) for n in range(6)]
    assert [ema.decay_at(n) for n in range(6)] == pytest.approx(decays)
    g = torch.Generator().manual_seed(3)
    seq = []
    for _ in range(6):
        seq.append(set_random_weights(model, g))
        ema.update(model)
    for name, p in ema.module.named_parameters():
        expected = closed_form(e0[name], [s[name] for s in seq], decays)
        torch.testing.assert_close(p.double(), expected, rtol=1e-5, atol=1e-6)


def test_int_warmup_first_update_copies_weights():
    model = make_model()
    ema = EMA(model, decay=0.999, warmup=100)
    set_random_weights(model, torch.Generator().manual_seed(4))
    ema.update(model)
    for a, b in zip(ema.module.parameters(), model.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def _bn_step(model: nn.Module, g: torch.Generator) -> None:
    model.train()
    with torch.no_grad():
        model(torch.randn(8, 3, generator=g) * 3 + 1)


def test_buffers_copy_and_average():
    g = torch.Generator().manual_seed(5)
    model = make_model()
    copy_ema = EMA(model, decay=0.5, buffers="copy", warmup=False)
    avg_ema = EMA(model, decay=0.5, buffers="average", warmup=False)
    rm0 = model[1].running_mean.clone()
    _bn_step(model, g)
    _bn_step(model, g)
    copy_ema.update(model)
    avg_ema.update(model)
    bn = model[1]
    torch.testing.assert_close(copy_ema.module[1].running_mean, bn.running_mean, rtol=0, atol=0)
    torch.testing.assert_close(copy_ema.module[1].running_var, bn.running_var, rtol=0, atol=0)
    torch.testing.assert_close(avg_ema.module[1].running_mean, 0.5 * rm0 + 0.5 * bn.running_mean)
    # Integer buffers are copied in both modes, never averaged.
    for ema in (copy_ema, avg_ema):
        assert ema.module[1].num_batches_tracked.item() == bn.num_batches_tracked.item() == 2
        assert ema.module[1].num_batches_tracked.dtype == torch.long


def test_one_foreach_lerp_per_update(monkeypatch):
    calls = []
    real = torch._foreach_lerp_

    def counting(*args, **kwargs):
        calls.append(len(args[0]))
        return real(*args, **kwargs)

    model = make_model()
    ema = EMA(model, decay=0.9)
    monkeypatch.setattr(torch, "_foreach_lerp_", counting)
    ema.update(model)
    ema.update(model)
    n_params = len(list(model.parameters()))
    assert calls == [n_params, n_params]


def test_ema_module_is_an_independent_eval_copy():
    model = make_model()
    model.train()
    model(torch.randn(4, 3)).sum().backward()
    ema = EMA(model)
    assert not ema.module.training
    assert all(not p.requires_grad and p.grad is None for p in ema.module.parameters())
    assert all(a.data_ptr() != b.data_ptr() for a, b in zip(ema.module.parameters(), model.parameters()))
    assert model.training and all(p.requires_grad for p in model.parameters())


def test_swapped_puts_average_in_and_restores_exactly_even_on_error():
    g = torch.Generator().manual_seed(6)
    model = make_model()
    ema = EMA(model, decay=0.5)
    set_random_weights(model, g)
    _bn_step(model, g)
    ema.update(model)
    set_random_weights(model, g)
    raw = copy.deepcopy(model.state_dict())
    param_ids = [id(p) for p in model.parameters()]
    with ema.swapped(model) as m:
        assert m is model
        for k, v in model.state_dict().items():
            torch.testing.assert_close(v, ema.module.state_dict()[k], rtol=0, atol=0)
        assert not torch.equal(model[0].weight, raw["0.weight"])
    for k, v in model.state_dict().items():
        torch.testing.assert_close(v, raw[k], rtol=0, atol=0)
    assert [id(p) for p in model.parameters()] == param_ids  # in place: optimizers keep their tensors

    with pytest.raises(RuntimeError, match="boom"):
        with ema.swapped(model):
            raise RuntimeError("boom")
    for k, v in model.state_dict().items():
        torch.testing.assert_close(v, raw[k], rtol=0, atol=0)


def test_copy_to_overwrites_live_weights():
    model = make_model()
    ema = EMA(model, decay=0.5)
    set_random_weights(model, torch.Generator().manual_seed(7))
    ema.update(model)
    target = make_model(seed=1)
    ema.copy_to(target)
    for k, v in target.state_dict().items():
        torch.testing.assert_close(v, ema.module.state_dict()[k], rtol=0, atol=0)


def test_state_dict_round_trip_continues_identically():
    g = torch.Generator().manual_seed(8)
    model = make_model()
    a = EMA(model, decay=0.95, warmup=True, every=2)
    for _ in range(5):
        set_random_weights(model, g)
        a.update(model)
    state = round_trip(a.state_dict())
    b = EMA(make_model(seed=3), decay=0.95, warmup=True, every=2)
    b.load_state_dict(state)
    assert (b.num_updates, b.num_averages) == (5, 2)
    for _ in range(5):
        set_random_weights(model, g)
        a.update(model)
        b.update(model)
    for (k, va), vb in zip(a.module.state_dict().items(), b.module.state_dict().values()):
        torch.testing.assert_close(va, vb, rtol=0, atol=0, msg=k)
    with pytest.raises(ValueError, match="num_updates"):
        b.load_state_dict({"module": state["module"]})


def test_unwraps_compile_and_dataparallel():
    model = make_model()
    for wrapped in (torch.compile(model), nn.DataParallel(model)):
        ema = EMA(wrapped, decay=0.5, warmup=False)
        assert all(not n.startswith(("_orig_mod", "module")) for n in ema.module.state_dict())
        with torch.no_grad():
            model[0].weight.add_(2.0)
        ema.update(wrapped)
        torch.testing.assert_close(ema.module[0].weight, model[0].weight - 1.0)
        with ema.swapped(wrapped):
            torch.testing.assert_close(model[0].weight, ema.module[0].weight)


def test_unwraps_ddp(tmp_path):
    import torch.distributed as dist

    own_group = not dist.is_initialized()
    if own_group:
        dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        model = make_model()
        ddp = nn.parallel.DistributedDataParallel(model)
        ema = EMA(ddp, decay=0.5, warmup=False)
        assert "0.weight" in ema.module.state_dict()
        with torch.no_grad():
            model[0].weight.add_(2.0)
        ema.update(ddp)
        torch.testing.assert_close(ema.module[0].weight, model[0].weight - 1.0)
    finally:
        if own_group:
            dist.destroy_process_group()


def test_other_model_structure_rejected():
    ema = EMA(make_model())
    with pytest.raises(ValueError, match="same parameters"):
        ema.update(nn.Linear(3, 4))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"decay": 1.5}, "decay"),
        ({"decay": True}, "decay"),
        ({"every": 0}, "every"),
        ({"warmup": -3}, "warmup"),
        ({"warmup": 0.5}, "warmup"),
        ({"buffers": "mean"}, "buffers"),
    ],
)
def test_invalid_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        EMA(make_model(), **kwargs)
    with pytest.raises(TypeError, match="model"):
        EMA("not a model")  # type: ignore[arg-type]


def test_the_default_warms_up_like_the_recipes():
    """One default in the library and the recipe key tricks.ema.warmup: on (TensorFlow's rule)."""
    from trickbag.tricks.ema import EMAConfig

    model = make_model()
    e0 = {n: p.detach().clone().double() for n, p in model.named_parameters()}
    ema = EMA(model, decay=0.999)
    assert ema.warmup is True and EMAConfig().warmup is True
    w = set_random_weights(model, torch.Generator().manual_seed(5))
    ema.update(model)  # first decay min(0.999, 1 / 10) = 0.1
    for name, p in ema.module.named_parameters():
        torch.testing.assert_close(p.double(), 0.1 * e0[name] + 0.9 * w[name], rtol=1e-5, atol=1e-6)
