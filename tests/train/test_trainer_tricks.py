"""Every recipe trick from Python: ``Trainer(tricks=...)`` gives what the recipe gives, bit for bit.

The reference side is the recipe build with the trick on; the Python side is the same recipe built
without it (the same model, optimizer and loaders from the same seed), handed to a ``Trainer`` with
``tricks={name: <the recipe's section>}``. Same final weights, same metrics every epoch.
"""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from tests.tricks.helpers import BASE, write_teacher_module
from tests.tricks.test_augment import image_folder
from trickbag.errors import ConflictError, RecipeError
from trickbag.recipe import load_recipe
from trickbag.train.build import build
from trickbag.train.parts import build_schedule
from trickbag.train.trainer import Trainer
from trickbag.tricks import MODULES, TRICKS

#: what each trick needs beyond ``enabled`` to run on the fake data (2 epochs)
NEEDS = {
    "freeze": ["tricks.freeze.patterns=[features.0.*]", "tricks.freeze.allow_untrained=true",
               "tricks.freeze.unfreeze_epoch=1"],
    "compile": ["tricks.compile.backend=eager"],
    "distillation": ["tricks.distillation.teacher={teacher}:teacher"],
    "swa": ["tricks.swa.start_epoch=1"],
    "multiscale": ["tricks.multiscale.train_sizes=[6, 8]", "tricks.multiscale.test_size=8"],
    "tta": ["tricks.tta.vflip=true"],
    "drop_path": ["model.name=resnet18", "model.kwargs={{}}", "data.shape=[3,8,8]"],  # {{}}: {} after .format
    "augment": ["data.name=imagefolder", "data.root={images}", "data.image_size=8", "data.augment=true",
                "data.val_fraction=0.25"],
}
#: tricks a hand-built Trainer refuses in one line, and the words the refusal must hold
RECIPE_ONLY = {"class_balanced": "loss_fn=torch.nn.CrossEntropyLoss(weight=",
               "logit_adjust": "trickbag.losses.logit_adjustment(counts, tau)",
               "resample": "torch.utils.data.WeightedRandomSampler(weights, num_samples=len(dataset))"}
TIMES = ("train/samples_per_s", "train/epoch_time_s")


def _recipe(*overrides: str):
    return load_recipe("digits", [*BASE, "train.epochs=2", "model.kwargs={width: 8}", *overrides])


def _by_recipe(name: str, extra: list[str]):
    recipe = _recipe(f"tricks.{name}.enabled=true", *extra)
    trainer, _ = build(recipe)
    return trainer, recipe


def _by_python(name: str, recipe):
    """The recipe without its tricks, then ``Trainer(tricks=...)`` on what it built."""
    plain = recipe.model_copy(update={"tricks": type(recipe.tricks)()})
    _, ctx = build(plain)
    section = getattr(recipe.tricks, name).model_dump()
    t = recipe.train
    return Trainer(
        ctx.model, ctx.optimizer, ctx.train_loader, ctx.val_loader, task=ctx.task, tricks={name: section},
        scheduler=lambda opt: build_schedule(plain, opt, ctx.steps_per_epoch, mode=ctx.mode),
        max_epochs=t.epochs, precision=t.precision, accumulate=t.accumulate, clip=t.clip, device="cpu",
        monitor=ctx.monitor, mode=ctx.mode, seed=t.seed, nonfinite=t.nonfinite, max_nonfinite=t.max_nonfinite,
    )


def _outcome(trainer: Trainer):
    state = trainer.fit()
    history = [{k: v for k, v in row.items() if k not in TIMES} for row in state.history]
    return history, {k: v.clone() for k, v in trainer.model.state_dict().items()}


@pytest.mark.parametrize("name", [m.TRICK.name for m in MODULES])
def test_a_trick_from_python_trains_as_from_the_recipe(name, tmp_path, monkeypatch):
    images = image_folder(tmp_path / "images") if name == "augment" else None
    extra = [o.format(teacher=write_teacher_module(tmp_path, monkeypatch), images=images) for o in NEEDS.get(name, [])]
    if name in RECIPE_ONLY:
        recipe = _recipe(f"tricks.{name}.enabled=true", *extra)
        with pytest.raises(RecipeError) as err:
            _by_python(name, recipe)
        message = str(err.value)
        assert "\n" not in message and f"tricks.{name}" in message and RECIPE_ONLY[name] in message
        return
    reference, recipe = _by_recipe(name, extra)
    want_history, want_weights = _outcome(reference)
    mine = _by_python(name, recipe)
    assert [type(p) for p in mine.plugins] == [type(p) for p in reference.plugins]
    assert type(mine.optimizer) is type(reference.optimizer)
    history, weights = _outcome(mine)
    assert history == want_history
    assert weights.keys() == want_weights.keys()
    for k, v in want_weights.items():
        assert torch.equal(weights[k], v), k


def test_every_trick_is_covered():
    assert set(TRICKS) == {m.TRICK.name for m in MODULES}


# ---------------------------------------------------------------------- the same errors as a recipe's
def _tiny(**kw):
    torch.manual_seed(0)
    x = torch.randn(32, 1, 4)
    y = (x[:, 0, 0] > 0).long()
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(4, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return Trainer(model, opt, DataLoader(TensorDataset(x, y), batch_size=8), device="cpu", **kw)


@pytest.mark.parametrize("tricks, error, words", [
    ({"emaa": {}}, RecipeError, "unknown recipe key 'tricks.emaa' (did you mean 'tricks.ema'?)"),
    ({"ema": {"decay": 2}}, RecipeError, "'tricks.ema.decay': 2 is not allowed"),
    ({"ema": {}, "swa": {}}, ConflictError, "enable only one of them"),
    ({"mix": {"mixup_alpha": 0, "cutmix_alpha": 0}}, RecipeError, "are both 0"),
])
def test_tricks_are_validated_and_checked_as_in_a_recipe(tricks, error, words):
    with pytest.raises(error) as err:
        _tiny(tricks=tricks)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_sam_with_fp16_is_set_up_as_in_a_recipe():
    trainer = _tiny(tricks={"sam": {}}, precision="16")
    assert type(trainer.optimizer).__name__ == "SAM" and trainer.state.scaler.is_enabled()


def test_a_scheduler_of_the_replaced_optimizer_is_refused():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(4, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(torch.randn(8, 1, 4), torch.zeros(8, dtype=torch.long)), batch_size=4)
    with pytest.raises(RecipeError, match=r"pass scheduler=lambda optimizer"):
        Trainer(model, opt, loader, device="cpu", tricks={"sam": {}},
                scheduler=torch.optim.lr_scheduler.StepLR(opt, 2))
    t = Trainer(model, opt, loader, device="cpu", tricks={"sam": {}},
                scheduler=lambda o: torch.optim.lr_scheduler.StepLR(o, 2))
    assert t.state.scheduler.optimizer is t.optimizer is not opt


def test_a_trick_plugin_passed_by_hand_is_set_up_by_the_trainer():
    """An EMA plug-in made by hand and passed in ``plugins=`` averages, as ``tricks={"ema": ...}`` does."""
    from trickbag.tricks.ema import EMAConfig, EMAPlugin

    by_hand = _tiny(plugins=[EMAPlugin(EMAConfig(enabled=True, decay=0.5, warmup=False))], max_epochs=2)
    by_tricks = _tiny(tricks={"ema": {"decay": 0.5, "warmup": False}}, max_epochs=2)
    by_hand.fit()
    by_tricks.fit()
    assert by_hand.plugins[0].set_up and by_hand.plugins[0].ema is not None
    for a, b in zip(by_hand.model.state_dict().values(), by_tricks.model.state_dict().values()):
        assert torch.equal(a, b)


def test_the_readme_trainer_snippet_runs(tmp_path, monkeypatch):
    """README's Trainer block, as written, on tiny images: three tricks set up, a run folder, a test evaluation."""
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```python\n(.*?)```", readme, flags=re.S) if "Trainer(" in b)
    monkeypatch.chdir(tmp_path)
    torch.manual_seed(0)
    x, y = torch.randn(32, 3, 8, 8), torch.randint(0, 4, (32,))
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(192, 4))
    loader = DataLoader(TensorDataset(x, y), batch_size=4)
    env = {"torch": torch, "model": model, "optimizer": torch.optim.SGD(model.parameters(), lr=0.1),
           "train_loader": loader, "val_loader": loader, "test_loader": loader}
    exec(compile(block, "README.md", "exec"), env)
    trainer = env["trainer"]
    assert [type(p).__name__ for p in trainer.plugins][:3] == ["MixPlugin", "SAMPlugin", "EMAPlugin"]
    assert env["state"].epoch == 10
    run = tmp_path / "runs" / "mine"
    assert all((run / f).is_file() for f in ("metrics.csv", "checkpoints/last.pt", "summary.txt"))


def test_a_loss_trick_with_the_callers_own_loss_fn_is_refused_in_one_line():
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from trickbag.errors import ConflictError
    from trickbag.train.trainer import Trainer

    model = torch.nn.Linear(3, 2)
    loader = DataLoader(TensorDataset(torch.randn(8, 3), torch.randint(0, 2, (8,))), batch_size=4)
    with pytest.raises(ConflictError, match="tricks.label_smoothing changes the loss, but loss_fn already replaced"):
        Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), loader, device="cpu",
                loss_fn=torch.nn.CrossEntropyLoss(), tricks={"label_smoothing": {}})
    t = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), loader, device="cpu",
                tricks={"label_smoothing": {"eps": 0.2}})  # the task's own loss: the trick composes it
    assert type(t.state.loss_fn).__name__ == "ClassificationLoss"
