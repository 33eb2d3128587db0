"""MuonAdamW: the routing of parameters, and each part stepping exactly as torch's own Muon / AdamW would."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from trickbag.optim import MuonAdamW, muon_routing


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


def test_hidden_matrices_go_to_muon_and_everything_else_to_adamw():
    muon, adamw = muon_routing(Net(), num_outputs=4)
    assert muon == ["hidden.weight"]
    assert sorted(adamw) == sorted(["embed.weight", "conv.weight", "conv.bias", "hidden.bias", "norm.weight",
                                    "norm.bias", "head.weight", "head.bias"])
    assert muon_routing(Net(), num_outputs=4, adamw_patterns=["hid*"])[0] == []


def _grads(model, seed):
    torch.manual_seed(seed)
    loss = torch.nn.functional.cross_entropy(model(torch.randint(0, 11, (5, 7))), torch.randint(0, 4, (5,)))
    loss.backward()


def test_each_part_steps_as_torchs_own_optimizer_with_per_group_options():
    torch.manual_seed(0)
    model = Net()
    ref = copy.deepcopy(model)
    muon_names = muon_routing(model, num_outputs=4)[0]
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
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        assert torch.equal(p, q), name
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


def test_a_tensor_that_is_not_2d_is_refused_for_muon():
    conv = nn.Conv1d(2, 2, 3)
    with pytest.raises(ValueError, match="2-D weight matrices only"):
        MuonAdamW(conv.parameters(), muon_params=[conv.weight])


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
