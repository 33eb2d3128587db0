"""MuonAdamW: the routing of parameters (every convolution kernel to Muon), Muon's update against Keller Jordan's
reference ``muon_update`` written out here, the AdamW part against torch's own, and the recipe path on the
digits CNN."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from trickbag.optim import MuonAdamW, muon_routing
from trickbag.optim.muon import Muon, muon_lr_scale, newton_schulz5


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(11, 6)
        self.conv = nn.Conv1d(6, 6, 3, padding=1)
        self.hidden = nn.Linear(6, 12)
        self.norm = nn.LayerNorm(12)
        self.head = nn.Linear(12, 4)

    def forward(self, tokens):
        h = self.conv(self.embed(tokens).transpose(1, 2)).transpose(1, 2)
        return self.head(self.norm(torch.relu(self.hidden(h)))).mean(1)


def test_hidden_matrices_and_conv_kernels_go_to_muon_and_everything_else_to_adamw():
    muon, adamw = muon_routing(Net(), num_outputs=4)
    assert muon == ["conv.weight", "hidden.weight"]
    assert sorted(adamw) == sorted(["embed.weight", "conv.bias", "hidden.bias", "norm.weight", "norm.bias",
                                    "head.weight", "head.bias"])
    assert muon_routing(Net(), num_outputs=4, adamw_patterns=["hid*", "conv.*"])[0] == []
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Flatten(), nn.Linear(4, 2))
    net.register_parameter("pos", nn.Parameter(torch.zeros(1, 4, 4)))  # 3-D but no kernel: AdamW
    assert muon_routing(net, num_outputs=2) == (["0.weight"], ["pos", "0.bias", "2.weight", "2.bias"])


def _grads(model, seed):
    torch.manual_seed(seed)
    loss = torch.nn.functional.cross_entropy(model(torch.randint(0, 11, (5, 7))), torch.randint(0, 4, (5,)))
    loss.backward()


@pytest.mark.skipif(not hasattr(torch.optim, "Muon"), reason="torch.optim.Muon is torch >= 2.9")
def test_each_part_steps_as_torchs_own_optimizer_with_per_group_options():
    torch.manual_seed(0)
    model = Net()
    ref = copy.deepcopy(model)
    muon_names = muon_routing(model, num_outputs=4, adamw_patterns=["conv.*"])[0]  # torch's Muon: 2-D only
    named = dict(model.named_parameters())
    slow = [named["hidden.weight"], named["head.weight"]]  # a group with its own lr, split across both parts
    rest = [p for p in model.parameters() if all(p is not q for q in slow)]
    opt = MuonAdamW([{"params": rest}, {"params": slow, "lr": 0.003}], lr=0.02, weight_decay=0.01,
                    muon_params=[named[n] for n in muon_names])
    rnamed = dict(ref.named_parameters())
    ref_muon = torch.optim.Muon([{"params": [rnamed["hidden.weight"]], "lr": 0.003}], lr=0.02, weight_decay=0.01,
                                adjust_lr_fn="match_rms_adamw")
    ref_adamw = torch.optim.AdamW(
        [{"params": [rnamed[n] for n in rnamed if n not in ("hidden.weight", "head.weight")]},
         {"params": [rnamed["head.weight"]], "lr": 0.003}], lr=0.02, weight_decay=0.01)
    for step in range(3):
        for m, opts in ((model, [opt]), (ref, [ref_muon, ref_adamw])):
            for o in opts:
                o.zero_grad()
            _grads(m, step)
            for o in opts:
                o.step()
    # the same arithmetic; Newton-Schulz written with matmuls where torch's uses addmm (bf16 rounding), and the
    # rounding reaches every weight through the next steps' gradients
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, rtol=0, atol=2e-4, msg=name)
    assert sorted(g["lr"] for g in opt.param_groups) == [0.003, 0.003, 0.02]


def test_a_schedule_reaches_both_parts_and_the_state_round_trips():
    torch.manual_seed(0)
    a = Net()
    b = copy.deepcopy(a)
    mk = lambda m: MuonAdamW(m.parameters(), lr=0.01, muon_params=[m.hidden.weight])  # noqa: E731
    opt_a = mk(a)
    sched = torch.optim.lr_scheduler.StepLR(opt_a, step_size=1, gamma=0.5)
    for step in range(2):
        opt_a.zero_grad()
        _grads(a, step)
        opt_a.step()
        sched.step()
    assert opt_a.muon.param_groups[0]["lr"] == opt_a.adamw.param_groups[0]["lr"] == 0.0025
    state = copy.deepcopy(opt_a.state_dict())
    opt_b = mk(b)
    b.load_state_dict(a.state_dict())
    opt_b.load_state_dict(state)
    for m, o in ((a, opt_a), (b, opt_b)):
        o.zero_grad()
        _grads(m, 7)
        o.step()
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p, q)
    with pytest.raises(ValueError, match="made for another model"):
        MuonAdamW(nn.LayerNorm(3).parameters(), lr=0.1, muon_params=[]).load_state_dict(state)  # no Muon part


def test_a_tensor_under_2d_is_refused_for_muon():
    conv = nn.Conv1d(2, 2, 3)
    with pytest.raises(ValueError, match="weights of 2 or more dimensions"):
        MuonAdamW(conv.parameters(), muon_params=[conv.weight, conv.bias])


def test_optim_muon_from_a_recipe_routes_says_so_and_trains(tiny_recipe):
    from trickbag.errors import ConflictError
    from trickbag.train.build import build

    trainer, ctx = build(tiny_recipe("optim.name=muon", "optim.lr=0.01", "model.name=mlp", "schedule.warmup_epochs=0"))
    assert type(trainer.optimizer).__name__ == "MuonAdamW"
    note = next(n for n in ctx.notes if n.startswith("muon:"))
    muon, _ = muon_routing(trainer.model, num_outputs=ctx.num_outputs)
    assert f"Muon on {len(muon)} hidden matrices" in note and len(muon) >= 1
    first = [p.detach().clone() for p in trainer.model.parameters()]
    state = trainer.fit()
    assert all(not torch.equal(a, b) for a, b in zip(first, trainer.model.parameters()))
    assert state.history[-1]["lr/group0"] < 0.01  # the cosine schedule steps both parts
    with pytest.raises(ConflictError, match="tricks.sam with optim.name=muon"):
        build(tiny_recipe("optim.name=muon", "model.name=mlp", "tricks.sam.enabled=true"))


# --------------------------------------------------------------------------- the anchor, written out
# Keller Jordan's Muon (github.com/KellerJordan/Muon, muon.py; airbench's optimizer is the same update), verbatim
# but for the clone of the gradient (the original lerps it in place).
def zeropower_via_newtonschulz5(G, steps: int):
    assert G.ndim >= 2
    a, b, c = (3.4445, -4.7750, 2.0315)
    X = G.bfloat16()
    if G.size(-2) > G.size(-1):
        X = X.mT
    X = X / (X.norm(dim=(-2, -1), keepdim=True) + 1e-7)
    for _ in range(steps):
        A = X @ X.mT
        B = b * A + c * A @ A
        X = a * X + B @ X
    if G.size(-2) > G.size(-1):
        X = X.mT
    return X


def muon_update(grad, momentum, beta=0.95, ns_steps=5, nesterov=True):
    grad = grad.clone()
    momentum.lerp_(grad, 1 - beta)
    update = grad.lerp_(momentum, beta) if nesterov else momentum
    if update.ndim == 4:  # for the case of conv filters
        update = update.view(len(update), -1)
    update = zeropower_via_newtonschulz5(update, steps=ns_steps)
    update *= max(1, grad.size(-2) / grad.size(-1)) ** 0.5
    return update


def reference_step(p, grad, momentum, lr, weight_decay):
    """The anchor's step with trickbag's one LR rule: Keller's shape factor max(1, rows/cols)^0.5 (of the 4-D
    grad's last two sizes, 1 for a square kernel) divided out, 0.2 * sqrt(max(A, B)) of the [A, B] view in."""
    update = muon_update(grad, momentum)
    keller = max(1, grad.size(-2) / grad.size(-1)) ** 0.5
    rows, cols = len(p), p[0].numel()
    update = update.float() / keller * 0.2 * max(rows, cols) ** 0.5
    p.mul_(1 - lr * weight_decay)
    p.add_(update.reshape(p.shape), alpha=-lr)


def _digits_cnn():
    from trickbag.models import build_model

    torch.manual_seed(0)
    return build_model("digits_cnn", (1, 8, 8), 10)  # what the digits recipe's model.name=auto resolves to


def _digits_grads(model, step):
    g = torch.Generator().manual_seed(100 + step)
    x, y = torch.randn(16, 1, 8, 8, generator=g), torch.randint(0, 10, (16,), generator=g)
    model.zero_grad()
    torch.manual_seed(step)  # the same dropout masks on both sides
    nn.functional.cross_entropy(model(x), y).backward()


def test_every_conv_kernel_of_the_digits_cnn_steps_as_the_anchor():
    """Each of 4 steps of MuonAdamW on the digits CNN, from the weights and momentum it has then, against the
    anchor's step from the same point (step by step: bf16 Newton-Schulz flips a last bit now and then, and two
    runs drift apart over steps however right both are)."""
    model = _digits_cnn()
    kernels = [n for n, m in model.named_modules() if isinstance(m, nn.Conv2d)]
    assert len(kernels) == 4
    muon, _ = muon_routing(model, num_outputs=10)
    assert muon == [f"{n}.weight" for n in kernels]  # every conv weight, and nothing else (the head is AdamW)
    named = dict(model.named_parameters())
    lr, wd = 0.02, 0.01
    opt = MuonAdamW(model.parameters(), lr=lr, weight_decay=wd, muon_params=[named[n] for n in muon])
    assert [p.ndim for p in opt.muon.param_groups[0]["params"]] == [4, 4, 4, 4]
    for step in range(4):
        _digits_grads(model, step)
        before = {n: (named[n].detach().clone(), named[n].grad.clone(),
                      opt.muon.state[named[n]].get("momentum_buffer", torch.zeros_like(named[n])).clone())
                  for n in muon}
        opt.step()
        for n, (p, grad, buf) in before.items():
            reference_step(p, grad, buf, lr, wd)
            # a wrong view, no Nesterov or another scale differ by a large part of a step (the next test)
            tol = 1e-4 * lr * muon_lr_scale(p.shape)
            torch.testing.assert_close(named[n].detach(), p, rtol=0, atol=tol, msg=f"{n}, step {step}")
            torch.testing.assert_close(opt.muon.state[named[n]]["momentum_buffer"], buf, rtol=0, atol=1e-7)


def test_the_comparison_with_the_anchor_would_see_a_wrong_update():
    """The tolerance above is far below what a plausible mistake changes: no Nesterov, a per-slice view."""
    model = _digits_cnn()
    _digits_grads(model, 0)
    p = model.features[1][0].weight  # [64, 32, 3, 3]
    g = torch.Generator().manual_seed(0)
    grad, buf = p.grad, torch.randn(p.shape, generator=g) * p.grad.std()  # momentum from earlier steps
    buf.lerp_(grad, 0.05)
    right = newton_schulz5(grad.lerp(buf, 0.95).reshape(64, -1)).float()
    for wrong in (newton_schulz5(buf.reshape(64, -1)).float(),  # no Nesterov
                  newton_schulz5(grad.lerp(buf, 0.95).reshape(64 * 32, -1)).float().reshape(64, -1)):
        # in units of one step (lr * muon_lr_scale): 100 times the 1e-4 the comparison above allows
        assert (right - wrong).abs().max() > 100 * 1e-4
    assert muon_lr_scale(p.shape) == pytest.approx(0.2 * 288**0.5)


def test_optim_muon_on_the_digits_cnn_recipe_puts_every_conv_weight_in_muon(tmp_path):
    from trickbag.recipe import load_recipe
    from trickbag.train.build import build

    recipe = load_recipe("digits", ["optim.name=muon", "optim.lr=0.01", "optim.weight_decay=0.01",
                                    "train.epochs=1", "run.progress=false", f"run.dir={tmp_path}"])
    trainer, ctx = build(recipe)
    convs = [m.weight for m in trainer.model.modules() if isinstance(m, nn.Conv2d)]
    assert len(convs) == 4
    muon_ids = {id(p) for g in trainer.optimizer.param_groups if g["kind"] == "muon" for p in g["params"]}
    adamw_ids = {id(p) for g in trainer.optimizer.param_groups if g["kind"] == "adamw" for p in g["params"]}
    assert {id(w) for w in convs} == muon_ids and not muon_ids & adamw_ids
    assert any(n.startswith("muon: Muon on 4 hidden matrices (4 of them convolution kernels") for n in ctx.notes)
    first = [w.detach().clone() for w in convs]
    state = trainer.fit()
    assert all(not torch.equal(a, w) for a, w in zip(first, convs))
    assert state.history[-1]["val/acc"] > 0.5  # one epoch already learns


@pytest.mark.skipif(not hasattr(torch.optim, "Muon"), reason="torch.optim.Muon is torch >= 2.9")
def test_a_checkpoint_of_torchs_muon_resumes_here():
    """Runs saved before trickbag had its own Muon hold torch.optim.Muon's state (same rule, same buffer)."""
    torch.manual_seed(0)
    w, v = nn.Parameter(torch.randn(6, 4)), nn.Parameter(torch.randn(6, 4))
    v.data.copy_(w.data)
    theirs = torch.optim.Muon([w], lr=0.01, weight_decay=0.1, adjust_lr_fn="match_rms_adamw")
    for step in range(2):
        w.grad = torch.randn(6, 4, generator=torch.Generator().manual_seed(step))
        theirs.step()
    ours = Muon([v], lr=0.01, weight_decay=0.1)
    ours.load_state_dict(copy.deepcopy(theirs.state_dict()))  # as from a file: its own buffers
    v.data.copy_(w.data)
    w.grad = torch.randn(6, 4, generator=torch.Generator().manual_seed(9))
    v.grad = w.grad.clone()
    theirs.step()
    ours.step()
    # a tenth of the step (0.01 * 0.2 * sqrt(6) = 0.0049): bf16 Newton-Schulz with matmuls vs torch's addmm;
    # a momentum buffer not carried over would change the step's direction
    torch.testing.assert_close(v, w, rtol=0, atol=5e-4)
