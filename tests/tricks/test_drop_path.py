"""Drop path from a recipe: the branches it drops in a real run (against torchvision's stochastic depth on the
trick's random stream), the plain network at evaluation, exact resume, and the models it refuses."""

from __future__ import annotations

import copy

import pytest
import torch
from torchvision.ops import stochastic_depth

from trickbag.errors import RecipeError
from trickbag.recipe import load_recipe

from .helpers import BASE, build_run, fresh_model, plugin_of

RESNETS = '''
import torch
from torch import nn


class Res(nn.Module):
    """x + branch(x)."""

    def __init__(self, c):
        super().__init__()
        self.branch = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.ReLU(), nn.Conv2d(c, c, 3, padding=1))

    def forward(self, x):
        return x + self.branch(x)


class Net(nn.Module):
    def __init__(self, num_classes, c=6, depth=3):
        super().__init__()
        self.stem = nn.Conv2d(1, c, 3, padding=1)
        self.blocks = nn.Sequential(*[Res(c) for _ in range(depth)])
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, num_classes))

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)))


def net(num_classes=4):
    return Net(num_classes)
'''


@pytest.fixture
def resnets(tmp_path, monkeypatch):
    """An importable module with a tiny residual network (blocks of class ``Res``); the model name."""
    (tmp_path / "tb_resnets.py").write_text(RESNETS)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "model.name=tb_resnets:net"


def _reference(net, x, rates, mode):
    """The network by hand: h = h + stochastic_depth(branch(h), p) for each block (torchvision, global RNG)."""
    h = net.stem(x)
    for block, p in zip(net.blocks, rates):
        h = h + stochastic_depth(block.branch(h), p, mode, training=True)
    return net.head(h)


@pytest.mark.parametrize("mode, schedule", [("row", "linear"), ("batch", "uniform")])
def test_training_forwards_drop_branches_as_torchvision_stochastic_depth_on_the_tricks_stream(resnets, mode, schedule):
    from trickbag.tricks.drop_path import DropPathPlugin

    rate = 0.6
    trainer, ctx = build_run(resnets, "tricks.drop_path.enabled=true", "tricks.drop_path.blocks=[Res]",
                             f"tricks.drop_path.rate={rate}", f"tricks.drop_path.mode={mode}",
                             f"tricks.drop_path.schedule={schedule}")
    plugin = plugin_of(trainer, DropPathPlugin)
    rates = list(plugin.hooks.rates.values())
    assert rates == pytest.approx([0.0, 0.3, 0.6] if schedule == "linear" else [0.6] * 3)
    checked = []

    def before(module, args):
        if module.training:
            checked.append([plugin.generator.get_state(), copy.deepcopy(module), args[0].clone()])

    def after(module, args, out):
        if module.training:
            state, plain, x = checked[-1]
            with torch.random.fork_rng(devices=[]):
                torch.set_rng_state(state)  # the global RNG on the trick's stream: torchvision draws the same
                want = _reference(plain, x, rates, mode)
            torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)
            undropped = _reference(plain, x, [0.0] * len(rates), mode)
            checked[-1] = float((out - undropped).detach().abs().max())  # branches were dropped

    trainer.model.register_forward_pre_hook(before)
    trainer.model.register_forward_hook(after)
    trainer.fit()
    assert len(checked) == len(ctx.train_loader) and sum(d > 1e-4 for d in checked) >= len(checked) // 2


def test_resnet18_evaluates_the_plain_network_and_keeps_its_checkpoint_keys():
    over = ["model.name=resnet18", "data.shape=[3,8,8]", "tricks.drop_path.enabled=true", "tricks.drop_path.rate=0.5"]
    trainer, ctx = build_run(*over)
    assert ctx.notes[-1].startswith("drop_path: 8 blocks (BasicBlock) drop their branch with rate 0..0.5")
    trainer.fit()
    recipe = load_recipe("digits", [*BASE, *over])
    plain = fresh_model(recipe, ctx, trainer.model.state_dict())  # no hooks: the keys are the plain model's
    x = torch.randn(5, 3, 8, 8)
    with torch.no_grad():
        assert torch.equal(trainer.model.eval()(x), plain(x))
        trainer.model.train()
        dropped = trainer.model(x)
    assert not torch.allclose(dropped, plain.train()(x))  # training forwards do drop


def test_a_resumed_run_drops_the_same_branches(tmp_path, resnets):
    """1 epoch + resume equals 2 epochs straight, weights bit for bit: the generator travels in checkpoints."""
    from trickbag.runs.run import resume_run, run_recipe
    from trickbag.train.checkpoint_files import load_checkpoint

    over = [*BASE, resnets, "tricks.drop_path.enabled=true", "tricks.drop_path.blocks=[Res]",
            "tricks.drop_path.rate=0.5", "schedule.name=constant", f"run.dir={tmp_path}"]
    run_recipe(load_recipe("digits", [*over, "train.epochs=2", "run.name=straight"]), quiet=True)
    run_recipe(load_recipe("digits", [*over, "train.epochs=1", "run.name=resumed"]), quiet=True)
    resume_run(tmp_path / "resumed", ["train.epochs=2"], quiet=True)
    a = load_checkpoint(tmp_path / "straight" / "checkpoints" / "last.pt")
    b = load_checkpoint(tmp_path / "resumed" / "checkpoints" / "last.pt")
    assert "drop_path" in a["plugins"]
    for k, v in a["model"].items():
        torch.testing.assert_close(b["model"][k], v, rtol=0, atol=0)
    # and the drops mattered: without them the same run ends elsewhere
    run_recipe(load_recipe("digits", [*over, "train.epochs=2", "run.name=plain", "tricks.drop_path.enabled=false"]),
               quiet=True)
    c = load_checkpoint(tmp_path / "plain" / "checkpoints" / "last.pt")
    assert any(not torch.equal(c["model"][k], v) for k, v in a["model"].items())


@pytest.mark.parametrize("overrides, words", [
    ([], "tricks.drop_path: model SmallCNN has no residual blocks to drop (torchvision BasicBlock / Bottleneck); "
         "name your blocks (x + branch(x)) in tricks.drop_path.blocks=[ClassName]"),
    (["tricks.drop_path.blocks=[Block]"], "tricks.drop_path.blocks=['Block'] names no module class of model "
                                          "SmallCNN; its classes are: AdaptiveAvgPool2d, BatchNorm2d"),
    (["tricks.drop_path.blocks=[Conv2d]"], "tricks.drop_path.blocks: block features.0.0 (Conv2d) returns [2, 8, 8, 8] "
                                           "for an input [2, 1, 8, 8]; a named block must return input + branch"),
    (["model.name=efficientnet_b0", "model.kwargs={}", "data.shape=[3,8,8]"],
     "model EfficientNet has stochastic depth of its own (torchvision StochasticDepth): set "
     "model.kwargs.stochastic_depth_prob instead"),
])
def test_models_with_nothing_to_drop_are_refused_in_one_line(overrides, words):
    with pytest.raises(RecipeError) as err:
        build_run("tricks.drop_path.enabled=true", "model.kwargs={width: 8}", *overrides)
    assert words in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("key, words", [
    ("tricks.drop_path.rate=1", "less than 1"),
    ("tricks.drop_path.mode=sample", "'row' or 'batch'"),
    ("tricks.drop_path.blocks=[a.b]", "must be Python identifiers"),
])
def test_bad_keys_are_refused(key, words):
    with pytest.raises(RecipeError, match=words):
        load_recipe("digits", ["tricks.drop_path.enabled=true", key])


def test_the_ema_average_is_never_dropped_and_draws_nothing(resnets):
    from trickbag.tricks.drop_path import DropPathPlugin
    from trickbag.tricks.ema import EMAPlugin

    trainer, _ = build_run(resnets, "tricks.drop_path.enabled=true", "tricks.drop_path.blocks=[Res]",
                           "tricks.drop_path.rate=0.9", "tricks.drop_path.schedule=uniform", "tricks.ema.enabled=true")
    trainer.fit()
    average = plugin_of(trainer, EMAPlugin).ema.module.train()
    generator = plugin_of(trainer, DropPathPlugin).generator
    before = generator.get_state()
    x = torch.randn(6, 1, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(average(x), _reference(average, x, [0.0] * 3, "row"), rtol=0, atol=1e-6)
    assert torch.equal(generator.get_state(), before)
