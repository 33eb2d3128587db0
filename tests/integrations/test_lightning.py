"""TricksCallback against trickbag's own Trainer (the reference): same model, data order and seed, fp32 on CPU."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tests.integrations.conftest import Holder, clone, data, flat, lightning_fit, loader, net

pytest.importorskip("lightning")

from trickbag.errors import RecipeError  # noqa: E402
from trickbag.integrations.lightning import TricksCallback  # noqa: E402
from trickbag.train.trainer import Trainer  # noqa: E402


def sgd(params: Any) -> torch.optim.Optimizer:
    return torch.optim.SGD(params, lr=0.2, momentum=0.9, weight_decay=1e-3)


def reference(model: torch.nn.Module, tricks: dict, *, epochs: int = 2, accumulate: int = 1, val: bool = True,
              batch_size: int = 8, **kw: Any) -> Trainer:
    ds = data()
    model = Holder(model)
    t = Trainer(model, sgd(model.parameters()), loader(ds, batch_size), loader(ds, 20) if val else None,
                tricks=tricks, max_epochs=epochs, accumulate=accumulate, device="cpu", seed=0, progress=False, **kw)
    t.fit()
    return t


def through_lightning(lit: Any, model: torch.nn.Module, tricks: dict, *, epochs: int = 2, accumulate: int = 1,
                      use_loss: bool = False, val: bool = True, batch_size: int = 8, **cb: Any) -> Any:
    ds = data()
    module = lit(model, sgd, use_loss=use_loss)
    callback = TricksCallback(tricks=tricks, seed=0, **cb)
    lightning_fit(module, loader(ds, batch_size), loader(ds, 20) if val else None, callbacks=[callback],
                  epochs=epochs, accumulate_grad_batches=accumulate)
    return module, callback


SINGLE = {
    "ema": ({"ema": {"decay": 0.8}}, False),
    "swa": ({"swa": {"start_epoch": 1, "update_bn": False}}, False),
    "clip": ({"clip": {"max_norm": 0.05}}, False),
    "agc": ({"clip": {"mode": "agc", "clip_factor": 0.01}}, False),
    "freeze": ({"freeze": {"patterns": ["model.1.*"], "allow_untrained": True}}, False),
    "param_groups": ({"param_groups": {}}, False),
    "layer_decay": ({"layer_decay": {"decay": 0.5, "depth": 2}}, False),
    "label_smoothing": ({"label_smoothing": {"eps": 0.2}}, True),
    "mix": ({"mix": {"mixup_alpha": 0.4, "cutmix_alpha": 0.0}}, True),
    "focal": ({"focal": {"gamma": 2.0}}, True),
    "robust_loss": ({"robust_loss": {}}, True),
    "l1": ({"l1": {"weight": 1e-3}}, True),
    "sam": ({"sam": {"rho": 0.05}}, False),
    "sam+clip+mix": ({"sam": {"rho": 0.05}, "clip": {"max_norm": 0.5}, "mix": {"mixup_alpha": 0.4, "cutmix_alpha": 0}},
                     True),
}


@pytest.mark.parametrize("name", sorted(SINGLE))
def test_each_trick_equals_trickbag_trainer(lit: Any, name: str) -> None:
    tricks, use_loss = SINGLE[name]
    model = net()
    ref = reference(clone(model), tricks)
    module, _ = through_lightning(lit, clone(model), tricks, use_loss=use_loss)
    torch.testing.assert_close(flat(module.model), flat(ref.model.model), rtol=0, atol=1e-5)


def test_combination_with_accumulation_equals_trickbag_trainer(lit: Any) -> None:
    tricks = {"ema": {"decay": 0.8}, "clip": {"max_norm": 0.5}, "layer_decay": {"decay": 0.7, "depth": 2},
              "mix": {"mixup_alpha": 0.4, "cutmix_alpha": 0.0}, "label_smoothing": {"eps": 0.1}}
    model = net()
    ref = reference(clone(model), tricks, accumulate=2, batch_size=6)  # 40 = 6*6 + 4: a short last micro-batch
    module, _ = through_lightning(lit, clone(model), tricks, accumulate=2, batch_size=6, use_loss=True)
    torch.testing.assert_close(flat(module.model), flat(ref.model.model), rtol=0, atol=1e-5)


def test_ema_is_evaluated_on_the_average(lit: Any) -> None:
    """Validation sees the EMA weights (the reference's EVAL_START swap), training goes on at the raw ones."""
    model = net()
    module, cb = through_lightning(lit, clone(model), {"ema": {"decay": 0.5, "select": "ema"}}, epochs=2)
    ema = cb.session.plugins[0].ema
    torch.testing.assert_close(module.val_weights[-1], flat(ema.module), rtol=0, atol=0)
    assert not torch.equal(module.val_weights[0], module.val_weights[-1])


def test_schedule_section_equals_trickbag_trainer(lit: Any) -> None:
    from types import SimpleNamespace

    from trickbag.recipe import recipe_from_dict
    from trickbag.train.parts import build_schedule

    section = {"name": "cosine", "warmup_epochs": 1}
    sc = recipe_from_dict({"schedule": section}).schedule
    model = net()
    ref_model = clone(model)
    ds = data()
    opt = sgd(ref_model.parameters())
    recipe = SimpleNamespace(schedule=sc, optim=SimpleNamespace(name="sgd"), train=SimpleNamespace(epochs=2))
    t = Trainer(ref_model, opt, loader(ds), scheduler=build_schedule(recipe, opt, 5), max_epochs=2, device="cpu",
                progress=False)
    t.fit()
    module, cb = through_lightning(lit, clone(model), {}, schedule=section, val=False)
    torch.testing.assert_close(flat(module.model), flat(ref_model), rtol=0, atol=1e-5)
    assert cb.session.state.step == 10


def test_nonfinite_guard_skips_like_trickbag_trainer(lit: Any) -> None:
    ds = data()
    ds.tensors[0][9] = float("nan")  # the second batch of the first epoch (in the shuffled order or not)
    model = net()
    ref_model = clone(model)
    t = Trainer(ref_model, sgd(ref_model.parameters()), loader(ds), max_epochs=1, device="cpu", progress=False,
                nonfinite="skip")
    t.fit()
    module = lit(clone(model), sgd)
    cb = TricksCallback(nonfinite="skip")
    lightning_fit(module, loader(ds), callbacks=[cb], epochs=1)
    assert cb.session.guard.skipped == t.guard.skipped == 1
    torch.testing.assert_close(flat(module.model), flat(ref_model), rtol=0, atol=1e-5)


@pytest.mark.parametrize("tricks", [{"sam": {"rho": 0.05}}, {"sam": {"rho": 0.05}, "ema": {"decay": 0.8}}],
                         ids=["sam", "sam+ema"])
def test_a_vetoed_first_pass_under_sam_takes_no_second_pass(lit: Any, tricks: dict) -> None:
    """SAM + the guard, a NaN batch: the first pass's veto ends the update (no second pass, one skip), as in
    trickbag's Trainer; the other updates train the same."""
    ds = data()
    ds.tensors[0][9] = float("nan")
    model = net()
    ref_model = clone(model)
    t = Trainer(ref_model, sgd(ref_model.parameters()), loader(ds), tricks=tricks, max_epochs=1, device="cpu",
                progress=False, nonfinite="skip", seed=0)
    t.fit()
    module = lit(clone(model), sgd)
    cb = TricksCallback(tricks=tricks, nonfinite="skip", seed=0)
    lightning_fit(module, loader(ds), callbacks=[cb], epochs=1)
    assert t.guard.skipped == 1 and t.state.skipped_steps == 1
    assert cb.session.guard.skipped == 1 and cb.session.state.skipped_steps == 1
    assert cb.session.state.step == t.state.step == 4
    torch.testing.assert_close(flat(module.model), flat(ref_model), rtol=0, atol=1e-5)


# ---------------------------------------------------------------------- refusals, one by one
@pytest.mark.parametrize("trick", ["compile", "channels_last", "multiscale", "tta", "profile", "augment"])
def test_framework_owned_tricks_are_refused(trick: str) -> None:
    from trickbag.integrations.core import REFUSED

    options = {"multiscale": {"train_sizes": [8]}}.get(trick, {})
    with pytest.raises(RecipeError, match=f"tricks.{trick} is refused under Lightning") as e:
        TricksCallback(tricks={trick: options})
    assert REFUSED[trick] in str(e.value) and "\n" not in str(e.value)


def test_typo_is_one_error_naming_the_key() -> None:
    with pytest.raises(RecipeError, match="decai"):
        TricksCallback(tricks={"ema": {"decai": 0.9}})
    with pytest.raises(RecipeError, match="emma"):
        TricksCallback(tricks={"emma": {}})


def test_bad_schedule_and_guard_settings() -> None:
    with pytest.raises(RecipeError, match="schedule"):
        TricksCallback(schedule={"name": "cosinus"})
    with pytest.raises(RecipeError, match="nonfinite='maybe'"):
        TricksCallback(nonfinite="maybe")


@pytest.mark.parametrize("setting", [{"accumulate_grad_batches": 2}])
def test_sam_with_accumulation_is_refused(lit: Any, setting: dict) -> None:
    with pytest.raises(RecipeError, match="sam"):
        lightning_fit(lit(net(), sgd), loader(data()), callbacks=[TricksCallback(tricks={"sam": {"rho": 0.05}})],
                      **setting)


def test_gradient_clip_val_with_clip_is_refused(lit: Any) -> None:
    with pytest.raises(RecipeError, match="gradient_clip_val"):
        lightning_fit(lit(net(), sgd), loader(data()), callbacks=[TricksCallback(tricks={"clip": {"max_norm": 1}})],
                      gradient_clip_val=1.0)


def test_ignored_loss_is_refused(lit: Any) -> None:
    with pytest.raises(RecipeError, match="trickbag_loss"):
        lightning_fit(lit(net(), sgd, use_loss=False), loader(data()),
                      callbacks=[TricksCallback(tricks={"label_smoothing": {"eps": 0.1}})])


def test_user_scheduler_with_schedule_is_refused(lit: Any) -> None:
    module = lit(net(), sgd, sched_fn=lambda o: torch.optim.lr_scheduler.StepLR(o, 1))
    with pytest.raises(RecipeError, match="schedule="):
        lightning_fit(module, loader(data()), callbacks=[TricksCallback(schedule={"name": "cosine"})])


LAYER_DECAY = {"layer_decay": {"decay": 0.5, "depth": 2}}


def test_user_scheduler_with_rebuilt_groups_is_refused(lit: Any) -> None:
    module = lit(net(), sgd, sched_fn=lambda o: torch.optim.lr_scheduler.StepLR(o, 1))
    with pytest.raises(RecipeError, match="parameter groups"):
        lightning_fit(module, loader(data()), callbacks=[TricksCallback(tricks=LAYER_DECAY)])


def test_layer_decay_keeps_the_users_optimizer_class(lit: Any) -> None:
    module = lit(net(), lambda p: torch.optim.AdamW(p, lr=1e-3, betas=(0.8, 0.9)))
    trainer = lightning_fit(module, loader(data()), callbacks=[TricksCallback(tricks=LAYER_DECAY)], epochs=1)
    opt = trainer.optimizers[0]
    assert type(opt) is torch.optim.AdamW and opt.defaults["betas"] == (0.8, 0.9)
    assert len({g["lr"] for g in opt.param_groups}) > 1


def test_sam_under_a_scaler_without_lightnings_after_closure_hook_is_refused(lit: Any) -> None:
    """16-mixed SAM needs the precision plugin's ``_after_closure`` (the hook that runs on_before_optimizer_step); a
    plugin with a GradScaler and without it is refused in one line (a stand-in Trainer shows it)."""
    from types import SimpleNamespace

    plugin = SimpleNamespace(scaler=torch.amp.GradScaler("cpu"))
    fake = SimpleNamespace(strategy=object(), gradient_clip_val=None, accumulate_grad_batches=1, precision="16-mixed",
                           precision_plugin=plugin)
    with pytest.raises(RecipeError, match="_after_closure") as e:
        TricksCallback(tricks={"sam": {"rho": 0.05}}).setup(fake, lit(net(), sgd), "fit")
    assert "\n" not in str(e.value)


def test_manual_optimization_is_refused(lit: Any) -> None:
    module = lit(net(), sgd)
    module.automatic_optimization = False
    with pytest.raises(RecipeError, match="automatic_optimization"):
        lightning_fit(module, loader(data()), callbacks=[TricksCallback(tricks={"ema": {}})])
