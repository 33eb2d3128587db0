"""Weight-averaging tricks from a recipe: EMA (formula, BN buffers, evaluation, checkpoints) and SWA."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from trickbag.config import load_recipe
from trickbag.models import build_model

from _tiny import Hook, build_run, tiny_base
from trickbag.train.tricks.weights import EMAPlugin, SWAPlugin

BASE = tiny_base(epochs=2)


def _run(*overrides, hook=None):
    return build_run(BASE, *overrides, hook=hook)


def _snapshot(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _fresh(recipe, ctx, state):
    model = build_model(recipe.model.name, ctx.data.input_shape, ctx.data.num_classes, **recipe.model.kwargs)
    model.load_state_dict(state)
    return model.eval()


def _naive_eval(model, dataset):
    """Mean cross-entropy and accuracy over the whole dataset, in one float64 pass."""
    x = torch.stack([dataset[i][0] for i in range(len(dataset))])
    y = torch.stack([torch.as_tensor(dataset[i][1]) for i in range(len(dataset))])
    with torch.no_grad():
        out = model.eval()(x).double()
    return float(F.cross_entropy(out, y)), float((out.argmax(1) == y).double().mean())


def _plugin(trainer, cls):
    return next(p for p in trainer.plugins if isinstance(p, cls))


# --------------------------------------------------------------------------- EMA
@pytest.mark.parametrize("buffers", ["copy", "average"])
def test_ema_follows_the_formula_per_update_and_evaluation_uses_it(buffers):
    decay = 0.8
    start, live, epochs = {}, [], []
    hook = Hook(
        fit_start=lambda s: start.update(_snapshot(s.model)),
        step=lambda s: live.append(_snapshot(s.model)),
        # EPOCH_END runs in reverse order: this hook (last) sees the raw weights and the fresh metrics first
        epoch_end=lambda s: epochs.append((_snapshot(s.model), _snapshot(ema_plugin.ema.module), dict(s.metrics))),
    )
    trainer, ctx, recipe = _run("tricks.ema.enabled=true", f"tricks.ema.decay={decay}", "tricks.ema.warmup=false",
                                f"tricks.ema.buffers={buffers}", "train.accumulate=2", hook=hook)
    ema_plugin = _plugin(trainer, EMAPlugin)
    state = trainer.fit()

    # once per optimizer update (accumulate=2: not per micro-batch)
    assert len(live) == state.step == ema_plugin.ema.num_updates == 2 * math.ceil(len(ctx.train_loader) / 2)
    # naive reference: e <- d e + (1 - d) w after every update; buffers copied or averaged; ints copied
    for key, e0 in start.items():
        if not e0.is_floating_point():
            expected = live[-1][key]
        elif key in dict(trainer.model.named_buffers()) and buffers == "copy":
            expected = live[-1][key]
        else:
            expected = e0.double()
            for w in live:
                expected = decay * expected + (1 - decay) * w[key].double()
        got = ema_plugin.ema.module.state_dict()[key]
        torch.testing.assert_close(got.double(), expected.double(), rtol=1e-5, atol=1e-6, msg=key)

    raw, averaged, metrics = epochs[-1]
    assert not torch.allclose(raw["head.weight"], averaged["head.weight"])
    # val/* are the EMA weights' (with the EMA's BatchNorm statistics), val/*_raw the raw weights'
    loss, acc = _naive_eval(_fresh(recipe, ctx, averaged), ctx.data.val)
    assert metrics["val/loss"] == pytest.approx(loss, rel=1e-5) and metrics["val/acc"] == pytest.approx(acc)
    loss_raw, acc_raw = _naive_eval(_fresh(recipe, ctx, raw), ctx.data.val)
    assert metrics["val/loss_raw"] == pytest.approx(loss_raw, rel=1e-5)
    assert metrics["val/acc_raw"] == pytest.approx(acc_raw)
    if buffers == "average":  # the averaged BN statistics matter: EMA weights with the raw statistics differ
        mixed = {k: (raw[k] if k in dict(trainer.model.named_buffers()) else v) for k, v in averaged.items()}
        assert _naive_eval(_fresh(recipe, ctx, mixed), ctx.data.val)[0] != pytest.approx(loss, rel=1e-6)
    # after fit the model holds the averaged weights (what was evaluated)
    for k, v in trainer.model.state_dict().items():
        torch.testing.assert_close(v, ema_plugin.ema.module.state_dict()[k])


def test_ema_best_checkpoint_and_test_use_the_averaged_weights(tmp_path):
    from trickbag.train.checkpoint import load_checkpoint
    from trickbag.train.run import evaluate_run, train_recipe

    recipe = load_recipe("digits", [*BASE, "tricks.ema.enabled=true", "tricks.ema.decay=0.7",
                                    f"run.dir={tmp_path}", "run.name=ema"])
    result = train_recipe(recipe, quiet=True)
    best = load_checkpoint(result.run_dir / "checkpoints" / "best.pt")
    assert set(best["eval_model"]) == set(best["model"])
    for k, v in best["plugins"]["ema"]["module"].items():
        assert torch.equal(best["eval_model"][k], v), k
    assert not torch.equal(best["eval_model"]["head.weight"], best["model"]["head.weight"])
    # the run's test metrics are those of best.pt's averaged weights, computed independently here
    from trickbag.data.sources import build_data

    data = build_data(recipe.data)
    model = build_model(recipe.model.name, data.input_shape, data.num_classes, **recipe.model.kwargs)
    model.load_state_dict(best["eval_model"])
    loss, acc = _naive_eval(model, data.test)
    assert result.test["test/loss"] == pytest.approx(loss, rel=1e-5)
    assert result.test["test/acc"] == pytest.approx(acc)
    assert evaluate_run(result.run_dir)["loss"] == pytest.approx(loss, rel=1e-5)


# --------------------------------------------------------------------------- SWA
def test_swa_lr_average_bn_statistics_and_evaluation():
    lrs, ends = [], []
    hook = Hook(
        batch_start=lambda s: lrs.append((s.epoch, s.lrs()[0])),
        epoch_end=lambda s: ends.append((s.epoch, _snapshot(s.model), dict(s.metrics))),
    )
    trainer, ctx, recipe = _run("tricks.swa.enabled=true", "tricks.swa.start_epoch=1", "tricks.swa.anneal_epochs=0",
                                "tricks.swa.lr_factor=0.5", "train.epochs=3", "data.eval_batch_size=128", hook=hook)
    swa = _plugin(trainer, SWAPlugin)
    state = trainer.fit()

    base, total = recipe.optim.lr, state.step
    for t, (epoch, lr) in enumerate(lrs):
        if epoch == 0:  # the recipe's cosine schedule
            assert lr == pytest.approx(base * (1 + math.cos(math.pi * t / total)) / 2, rel=1e-6)
        else:  # SWALR, no annealing: lr_factor x base LR
            assert lr == pytest.approx(0.5 * base, rel=1e-9)
    # the average of the weights at the end of epochs 1 and 2 (not of epoch 0)
    assert int(swa.swa.n_averaged) == 2
    averaged = swa.swa.module.state_dict()
    params = [n for n, _ in swa.swa.module.named_parameters()]
    for name in params:
        expected = (ends[1][1][name].double() + ends[2][1][name].double()) / 2
        torch.testing.assert_close(averaged[name].double(), expected, rtol=1e-5, atol=1e-6)
    # BatchNorm statistics recomputed for the averaged weights on the un-augmented training data
    ref = _fresh(recipe, ctx, ends[2][1])
    with torch.no_grad():
        for name, p in ref.named_parameters():
            p.copy_(averaged[name])
    torch.optim.swa_utils.update_bn(DataLoader(ctx.data.eval_train, batch_size=len(ctx.data.eval_train)), ref)
    for name, buf in ref.named_buffers():
        if "running" in name:
            torch.testing.assert_close(averaged[name], buf, rtol=1e-4, atol=1e-5, msg=name)
    # the SWA phase's evaluation used the averaged weights; raw ones reported as *_raw
    last = ends[2][2]
    loss, acc = _naive_eval(_fresh(recipe, ctx, averaged), ctx.data.val)
    assert last["val/loss"] == pytest.approx(loss, rel=1e-4) and last["val/acc"] == pytest.approx(acc)
    loss_raw, _ = _naive_eval(_fresh(recipe, ctx, ends[2][1]), ctx.data.val)
    assert last["val/loss_raw"] == pytest.approx(loss_raw, rel=1e-5)
    assert "val/loss_raw" not in ends[0][2]  # before the SWA phase: the raw weights only
    # after fit the model holds the averaged weights
    for k, v in trainer.model.state_dict().items():
        torch.testing.assert_close(v, averaged[k], msg=k)


def test_swa_resume_in_the_averaging_phase_continues_identically(tmp_path):
    from trickbag.train.checkpoint import load_checkpoint
    from trickbag.train.run import resume_run, train_recipe

    common = [*BASE, "schedule.name=constant", "tricks.swa.enabled=true", "tricks.swa.start_epoch=1",
              "tricks.swa.anneal_epochs=1", f"run.dir={tmp_path}"]
    straight = train_recipe(load_recipe("digits", [*common, "train.epochs=3", "run.name=a"]), quiet=True)
    staged = train_recipe(load_recipe("digits", [*common, "train.epochs=2", "run.name=b"]), quiet=True)
    staged = resume_run(staged.run_dir, ["train.epochs=3"], quiet=True)  # resumes inside the SWA phase
    a, b = (load_checkpoint(r.run_dir / "checkpoints" / "last.pt") for r in (straight, staged))
    for key in ("model", "eval_model"):
        assert set(a[key]) == set(b[key])
        assert all(torch.equal(a[key][k], b[key][k]) for k in a[key]), key
    assert [h["lr/group0"] for h in staged.history] == [h["lr/group0"] for h in straight.history]
    assert [h["val/loss"] for h in staged.history] == [h["val/loss"] for h in straight.history]
