"""The trick seam: a TrickContext from a bare model, optimizer and DataLoader; what tricks can reach; sections."""

from __future__ import annotations

import collections.abc
import dataclasses
import logging
import re
import typing
import warnings

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

from trickbag.plugin.assemble import LegacyContext, assemble
from trickbag.plugin.context import TrickContext, sample_shape
from trickbag.plugin.interface import Plugin
from trickbag.train.setup import bare_context, tricks_section
from trickbag.tricks import TRICKS, build_sections


class _Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.relu(self.conv(x))


class _Net(torch.nn.Module):
    """Two residual blocks and a head: layer decay, drop_path and AGC have something to act on."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.blocks = torch.nn.Sequential(_Block(), _Block())
        self.head = torch.nn.Linear(4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.stem(x)).mean((2, 3)))


def _bare(lr: float = 0.1, wd: float = 0.01) -> tuple[torch.nn.Module, torch.optim.Optimizer, DataLoader]:
    torch.manual_seed(0)
    model = _Net()
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=wd)
    data = TensorDataset(torch.randn(24, 3, 8, 8), torch.randint(0, 5, (24,)))
    return model, opt, DataLoader(data, batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(0))


def test_a_bare_loop_sets_up_ema_agc_layer_decay_drop_path_and_mix_through_the_context():
    model, opt, loader = _bare()
    ctx = bare_context(model, opt, loader, epochs=3, loss_fn=torch.nn.functional.cross_entropy, seed=7)
    assert (ctx.num_outputs, sample_shape(ctx.train_set), ctx.updates_per_epoch) == (5, (3, 8, 8), 3)
    section = tricks_section({"ema": {"decay": 0.9}, "clip": {"mode": "agc"}, "layer_decay": {"decay": 0.5},
                               "drop_path": {"rate": 0.2, "blocks": ["_Block"]}, "mix": {"mixup_alpha": 0.4}})
    plugins = build_sections(section)
    done = assemble(ctx, plugins, schedule=lambda optimizer: None, keep=opt)

    # layer decay: a new SGD with the caller's options, each group at lr * decay ** (layers above it)
    assert done.optimizer is not opt and type(done.optimizer) is torch.optim.SGD
    names = {id(p): n for n, p in model.named_parameters()}
    lrs = {names[id(p)].split(".")[0]: g["lr"] for g in done.optimizer.param_groups for p in g["params"]}
    assert lrs == {"stem": pytest.approx(0.1 * 0.5 ** 2), "blocks": pytest.approx(0.1 * 0.5), "head": 0.1}
    assert all(g["momentum"] == 0.9 and g["weight_decay"] in (0.01, 0.0) for g in done.optimizer.param_groups)
    assert callable(ctx.clip)  # AGC, applied once per update by the trainer
    by_name = {p.name: p for p in plugins}
    assert by_name["ema"].ema is not None and by_name["mix"].mixer.num_classes == 5
    model.train()
    x0 = torch.randn(2, 3, 8, 8)
    assert not torch.equal(model(x0), model(x0))  # blocks dropped at random in training

    # the set-up tricks run in the bare loop: mixed batch -> loss -> step -> EMA update
    x, y = next(iter(loader))
    state = type("S", (), {})()
    state.batch, state.epoch, state.step_skipped, state.model = (x, y), 0, False, model
    by_name["mix"].on_batch_start(state)
    xm, ym = state.batch
    assert xm.shape == x.shape and ym.shape == (8, 5) and torch.allclose(ym.sum(1), torch.ones(8))
    loss = torch.nn.functional.cross_entropy(model(xm), ym)
    loss.backward()
    ctx.clip([p for p in model.parameters()])
    done.optimizer.step()
    before = {k: v.clone() for k, v in by_name["ema"].ema.module.state_dict().items()}
    by_name["ema"].on_step(state)
    after = by_name["ema"].ema.module.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)


def _public(obj: object) -> set[str]:
    return {n for n in dir(obj) if not n.startswith("_")}


def test_what_a_trick_can_reach_is_a_fixed_typed_set_with_no_path_to_the_recipe_state_or_trainer():
    model, opt, loader = _bare()
    ctx = bare_context(model, opt, loader, epochs=2, loss_fn=torch.nn.functional.cross_entropy, seed=0)
    reach = _public(ctx)
    assert reach == {
        "seed", "epochs", "updates_per_epoch", "rank", "num_outputs", "train_set", "class_counts",
        "train_eval_loader", "loaded_weights", "load_model",
        "model", "param_groups", "loss_fn", "clip", "make_optimizer", "sample_weights",
    }, "a change to what tricks may reach is a decision: update docs/design.md and this list"
    assert len(reach) <= 16
    # after the optimizer exists a plug-in sees what was built, read only, and nothing more
    done = assemble(ctx, [], schedule=lambda optimizer: None, keep=opt)
    seen = {}

    class After(Plugin):
        def after_optimizer(self, built):
            seen["names"] = _public(built)
            with pytest.raises(dataclasses.FrozenInstanceError):
                built.optimizer = None

    assemble(ctx, [], [After()], schedule=lambda optimizer: None, keep=done.optimizer)
    assert seen["names"] == {"model", "optimizer", "scheduler"}
    from trickbag.plugin.context import TrainingSet

    names = {"torch": torch, "TrainingSet": TrainingSet, "dataclasses": dataclasses, **vars(typing),
             **vars(collections.abc)}
    hints = typing.get_type_hints(TrickContext, globalns=names)
    for name, hint in hints.items():
        text = str(hint)
        assert not any(word in text for word in ("Recipe", "State", "Trainer", "BuildContext")), name
        assert text not in ("typing.Any", "dict[str, typing.Any]"), f"{name} is a catch-all"


def test_a_fact_cannot_be_set_by_a_trick():
    model, opt, loader = _bare()
    ctx = bare_context(model, opt, loader, epochs=2, loss_fn=torch.nn.functional.cross_entropy, seed=0)
    with pytest.raises(AttributeError, match="fact of the run"):
        ctx.epochs = 5
    ctx.loss_fn = torch.nn.functional.mse_loss  # a changeable part
    assert ctx.loss_fn is torch.nn.functional.mse_loss


class _Strict:
    """A recipe section that answers only its own keys: reading anything else fails the test."""

    def __init__(self, section: typing.Any) -> None:
        object.__setattr__(self, "_section", section)

    def __getattr__(self, name: str) -> typing.Any:
        section = object.__getattribute__(self, "_section")
        if name not in type(section).model_fields:
            raise AssertionError(f"a trick read {name!r} outside its section {type(section).__name__}")
        return getattr(section, name)


@pytest.mark.parametrize("name", sorted(TRICKS))
def test_each_trick_builds_from_its_own_section_alone(name):
    from trickbag.recipe import load_recipe

    trick = TRICKS[name]
    extra = {"distillation": ["tricks.distillation.teacher=runs/x/checkpoints/best.pt"],
             "freeze": ["tricks.freeze.patterns=['stem.*']"],
             "multiscale": ["tricks.multiscale.train_sizes=[6,8]"]}.get(name, [])
    recipe = load_recipe("digits", [f"tricks.{name}.enabled=true", *extra])
    joined = {other: _Strict(getattr(recipe.tricks, other)) for other in trick.joins}
    plugins = trick.build(_Strict(getattr(recipe.tricks, name)), **joined)
    assert all(isinstance(p, Plugin) for p in plugins)


class _DictSet(Dataset):
    def __init__(self) -> None:
        g = torch.Generator().manual_seed(0)
        self.x, self.y = torch.randn(16, 3, 8, 8, generator=g), torch.randint(0, 5, (16,), generator=g)

    def __len__(self) -> int:
        return 16

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"pixel_values": self.x[i], "labels": self.y[i]}


def test_a_hand_built_trainer_on_a_dict_batch_loader_sets_its_tricks_up():
    from trickbag.train.trainer import Trainer

    torch.manual_seed(0)
    model = _Net()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    t = Trainer(model, opt, DataLoader(_DictSet(), batch_size=4), tricks={"ema": {}, "layer_decay": {"decay": 0.5},
                                                                          "drop_path": {"blocks": ["_Block"]}},
                max_epochs=2, device="cpu", progress=False)
    assert {p.name for p in t.plugins} >= {"ema", "param_groups", "drop_path"}
    assert type(t.optimizer) is torch.optim.AdamW and len(t.optimizer.param_groups) > 1


def test_a_plug_in_written_for_the_former_build_context_still_works_with_a_warning():
    seen = {}

    class Old(Plugin):
        def configure(self, ctx):
            seen["steps"] = ctx.steps_per_epoch
            ctx.optimizer_factory = ctx.optimizer_factory  # read and set under the old name
            seen["cls"] = ctx.optimizer_spec[0]
            seen["model"] = ctx.model
            seen["device"] = ctx.device
            ctx.notes.append("old: a note")

        def after_optimizer(self, ctx):
            seen["built"] = (ctx.optimizer, ctx.scheduler)

    model, opt, loader = _bare()
    ctx = bare_context(model, opt, loader, epochs=2, loss_fn=torch.nn.functional.cross_entropy, seed=0)
    notes = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        done = assemble(ctx, [], [Old()], schedule=lambda optimizer: None, keep=opt, legacy=LegacyContext,
                        notes=notes)
    assert seen == {"steps": 3, "cls": torch.optim.SGD, "model": model, "device": torch.device("cpu"),
                    "built": (opt, None)}
    assert notes == ["old: a note"]
    assert sum(issubclass(w.category, DeprecationWarning) for w in caught) >= 6
    assert done.optimizer is opt  # nothing changed how it is built: the caller's optimizer is kept


def test_a_hand_built_trainers_optimizer_is_checked_by_its_registry_entry():
    """The interaction checks see the Trainer's real optimizer: SAM around a schedule-free one is refused in one
    line, as a recipe naming it is; an optimizer no registry module declares refuses nothing."""
    import schedulefree

    from trickbag.errors import ConflictError
    from trickbag.train.trainer import Trainer

    model, _, loader = _bare()
    with pytest.raises(ConflictError, match="tricks.sam with optim.name=schedulefree_adamw is not supported"):
        Trainer(model, schedulefree.AdamWScheduleFree(model.parameters()), loader, tricks={"sam": {}}, device="cpu",
                progress=False)
    t = Trainer(model, torch.optim.Adagrad(model.parameters(), lr=0.1), loader, tricks={"sam": {}}, device="cpu",
                progress=False)
    assert type(t.optimizer).__name__ == "SAM"


def test_a_recipe_plugin_written_for_the_former_build_context_reads_the_recipe_with_a_warning(tmp_path, monkeypatch):
    """``train.plugins`` set up by the recipe build: the former names (recipe, steps_per_epoch, monitor) still
    answer, each with a DeprecationWarning, and a former-name write (optimizer_factory) reaches the build."""
    (tmp_path / "oldplug.py").write_text(
        "import functools, torch\n"
        "from trickbag.plugin import Plugin\n"
        "SEEN = {}\n"
        "class Old(Plugin):\n"
        "    def configure(self, ctx):\n"
        "        SEEN.update(epochs=ctx.recipe.train.epochs, steps=ctx.steps_per_epoch, monitor=ctx.monitor)\n"
        "        ctx.optimizer_factory = functools.partial(torch.optim.SGD, lr=0.123)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from trickbag.recipe import load_recipe
    from trickbag.train.build import build

    recipe = load_recipe("digits", ["train.epochs=2", "train.plugins=[oldplug:Old]"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer, parts = build(recipe)
    import oldplug

    assert {"epochs": 2, "steps": parts.steps_per_epoch, "monitor": "val/acc"} == oldplug.SEEN
    assert type(trainer.optimizer) is torch.optim.SGD and trainer.optimizer.param_groups[0]["initial_lr"] == 0.123
    named = {m.group(1) for w in caught if (m := re.search(r"context's '(\w+)' is deprecated", str(w.message)))}
    assert named >= {
        "recipe", "steps_per_epoch", "monitor", "optimizer_factory"}


def test_what_a_trick_did_is_a_log_record_collected_into_the_run_notes_or_left_to_logging(caplog):
    """A recipe build collects the tricks' records into its notes (and nowhere else); without a notes list
    they go where the program's logging sends them (a hand-built Trainer, an adapter)."""
    section = tricks_section({"clip": {"mode": "agc"}})
    model, opt, loader = _bare()
    ctx = bare_context(model, opt, loader, epochs=2, loss_fn=torch.nn.functional.cross_entropy, seed=0)
    notes: list[str] = []
    with caplog.at_level("INFO", logger="trickbag.tricks"):
        assemble(ctx, build_sections(section), schedule=lambda optimizer: None, keep=opt, notes=notes)
    assert notes == ["AGC: the classifier layer (last Linear) is not clipped"]
    assert not caplog.records  # collected, not also logged
    model, opt, loader = _bare()
    ctx = bare_context(model, opt, loader, epochs=2, loss_fn=torch.nn.functional.cross_entropy, seed=0)
    with caplog.at_level("INFO", logger="trickbag.tricks"):
        assemble(ctx, build_sections(section), schedule=lambda optimizer: None, keep=opt)
    assert [r.getMessage() for r in caplog.records] == ["AGC: the classifier layer (last Linear) is not clipped"]
    assert logging.getLogger("trickbag.tricks").level == logging.NOTSET  # put back as it was
