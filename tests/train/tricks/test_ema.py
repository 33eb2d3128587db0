"""EMA from a recipe: the formula per update, evaluation, best.pt and the test use the averaged weights."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from trickbag.recipe import load_recipe
from trickbag.train.build import model_for
from trickbag.train.tricks.ema import EMAPlugin

from .helpers import Hook, tiny_base
from .helpers import build_tiny as build_run

BASE = tiny_base(epochs=2)


def _run(*overrides, hook=None):
    return build_run(BASE, *overrides, hook=hook)


def _snapshot(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _fresh(recipe, ctx, state):
    model = model_for(recipe, ctx.data)
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
        if not e0.is_floating_point() or key in dict(trainer.model.named_buffers()) and buffers == "copy":
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
    from trickbag.runs.inference import evaluate_run
    from trickbag.runs.run import run_recipe
    from trickbag.train.checkpoint import load_checkpoint

    # one epoch: best.pt and last.pt hold the same update, and last.pt (a resume checkpoint) the EMA's own state
    recipe = load_recipe("digits", [*BASE, "train.epochs=1", "tricks.ema.enabled=true", "tricks.ema.decay=0.7",
                                    f"run.dir={tmp_path}", "run.name=ema"])
    result = run_recipe(recipe, quiet=True)
    best = load_checkpoint(result.run_dir / "checkpoints" / "best.pt")
    last = load_checkpoint(result.run_dir / "checkpoints" / "last.pt")
    assert best["counters"]["step"] == last["counters"]["step"]
    assert set(best["eval_model"]) == set(best["model"]) and "plugins" not in best  # best.pt: weights only
    for k, v in last["plugins"]["ema"]["module"].items():
        assert torch.equal(best["eval_model"][k], v), k
    assert not torch.equal(best["eval_model"]["head.weight"], best["model"]["head.weight"])
    # the run's test metrics are those of best.pt's averaged weights, computed independently here
    from trickbag.data.sources import build_data

    data = build_data(recipe.data)
    model = model_for(recipe, data)
    model.load_state_dict(best["eval_model"])
    loss, acc = _naive_eval(model, data.test)
    assert result.test["test/loss"] == pytest.approx(loss, rel=1e-5)
    assert result.test["test/acc"] == pytest.approx(acc)
    assert evaluate_run(result.run_dir)["loss"] == pytest.approx(loss, rel=1e-5)
