"""optim.name=lion / lamb and optim.lookahead_k (pytorch_optimizer's implementations): Lion and Lookahead
against their update rules written out here, Lamb against the package driven by hand, the recipe keys reaching
them, an exact resume, and the combinations refused."""

from __future__ import annotations

import copy

import pytest
import torch

po = pytest.importorskip("pytorch_optimizer")


def _grads(model, seed):
    torch.manual_seed(seed)
    model.zero_grad()
    (model(torch.randn(5, 4)) ** 2).mean().backward()


def test_lion_follows_its_update_rule():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    ref = {n: p.detach().clone() for n, p in model.named_parameters()}
    momentum = {n: torch.zeros_like(p) for n, p in ref.items()}
    lr, (b1, b2), wd = 0.01, (0.9, 0.99), 0.1
    opt = po.Lion(model.parameters(), lr=lr, betas=(b1, b2), weight_decay=wd)
    for step in range(4):
        _grads(model, step)
        grads = {n: p.grad.clone() for n, p in model.named_parameters()}
        opt.step()
        for n in ref:  # decoupled decay, then the sign of the interpolated momentum (Chen et al. 2023)
            ref[n] = ref[n] * (1 - lr * wd) - lr * torch.sign(b1 * momentum[n] + (1 - b1) * grads[n])
            momentum[n] = b2 * momentum[n] + (1 - b2) * grads[n]
    for n, p in model.named_parameters():
        torch.testing.assert_close(p, ref[n], atol=1e-6, rtol=0)


def test_lookahead_follows_its_update_rule():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    slow = [p.detach().clone() for p in model.parameters()]
    fast = [p.clone() for p in slow]
    k, alpha, lr = 3, 0.5, 0.1
    opt = po.Lookahead(torch.optim.SGD(model.parameters(), lr=lr), k=k, alpha=alpha)
    for step in range(7):
        _grads(model, step)
        grads = [p.grad.clone() for p in model.parameters()]
        opt.step()
        fast = [f - lr * g for f, g in zip(fast, grads)]
        if (step + 1) % k == 0:  # every k updates the slow weights move toward the fast ones, which restart there
            slow = [s + alpha * (f - s) for s, f in zip(slow, fast)]
            fast = [s.clone() for s in slow]
    for p, f in zip(model.parameters(), fast):
        torch.testing.assert_close(p, f, atol=1e-6, rtol=0)


@pytest.mark.parametrize("name, cls", [("lion", "Lion"), ("lamb", "Lamb")])
def test_the_recipe_keys_reach_the_optimizer_and_lookahead_wraps_it(tiny_recipe, name, cls):
    from trickbag.train.build import build

    trainer, _ = build(tiny_recipe(f"optim.name={name}", "optim.lr=0.003", "optim.weight_decay=0.05",
                                   "optim.betas=[0.8, 0.95]", "optim.lookahead_k=4", "optim.lookahead_alpha=0.6",
                                   "schedule.name=constant", "schedule.warmup_epochs=0"))
    opt = trainer.optimizer
    assert type(opt).__name__ == "Lookahead" and type(opt.optimizer).__name__ == cls
    assert (opt.k, opt.alpha) == (4, 0.6)
    g = opt.optimizer.param_groups[0]
    assert (g["lr"], g["weight_decay"], tuple(g["betas"])) == (0.003, 0.05, (0.8, 0.95))


def test_lamb_trains_through_the_trainer_as_by_hand():
    from torch.utils.data import DataLoader, TensorDataset

    from trickbag.train.trainer import Trainer

    torch.manual_seed(0)
    x, y = torch.randn(32, 4), torch.randint(0, 3, (32,))
    model = torch.nn.Linear(4, 3)
    ref = copy.deepcopy(model)
    Trainer(model, po.Lamb(model.parameters(), lr=0.01), DataLoader(TensorDataset(x, y), batch_size=8),
            device="cpu", progress=False).fit()
    opt = po.Lamb(ref.parameters(), lr=0.01)
    for i in range(0, 32, 8):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ref(x[i:i + 8]), y[i:i + 8]).backward()
        opt.step()
    for p, q in zip(ref.parameters(), model.parameters()):
        assert torch.equal(p, q)


def test_a_recipe_with_lookahead_resumes_bit_identically(tiny_recipe):
    from reliability._helpers import training_state_differences

    from trickbag.plugin.interface import Plugin
    from trickbag.plugin.state import StopReason
    from trickbag.runs.run import resume_run, run_recipe
    from trickbag.train.checkpoint_files import load_checkpoint

    class StopAfterFirst(Plugin):
        def on_epoch_end(self, state):
            if state.epoch == 0:
                state.stop(StopReason.INTERRUPTED, "test")

    base = ["optim.name=lion", "optim.lr=0.001", "optim.lookahead_k=5", "train.epochs=3", "run.plots=false",
            "log.tensorboard=false"]
    straight = run_recipe(tiny_recipe(*base, name="straight"), quiet=True)
    first = run_recipe(tiny_recipe(*base, name="resumed"), plugins=[StopAfterFirst()], quiet=True)
    resumed = resume_run(first.run_dir, [], quiet=True)
    a = load_checkpoint(straight.run_dir / "checkpoints" / "last.pt")
    b = load_checkpoint(resumed.run_dir / "checkpoints" / "last.pt")
    assert training_state_differences(a, b) == []


@pytest.mark.parametrize("extra, words", [
    (["optim.lookahead_k=3", "tricks.sam.enabled=true"], "tricks.sam with optim.lookahead_k"),
    (["optim.lookahead_k=3", "optim.name=schedulefree_adamw", "schedule.name=none"], "already averages"),
])
def test_combinations_are_refused_in_one_line(tiny_recipe, extra, words):
    from trickbag.errors import TrickbagError
    from trickbag.train.build import build

    with pytest.raises(TrickbagError, match=words) as err:
        build(tiny_recipe(*extra))
    assert "\n" not in str(err.value)
