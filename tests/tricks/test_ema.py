"""EMA from a recipe: the formula per update, evaluation, best.pt and the test use the averaged weights."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from trickbag.recipe import load_recipe
from trickbag.train.parts import model_for
from trickbag.tricks.ema import EMAPlugin

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
    from trickbag.train.checkpoint_files import load_checkpoint

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


# a decay this slow, without warm-up, keeps the average at the initial weights: worse than the raw ones
SLOW = ["train.epochs=3", "tricks.ema.enabled=true", "tricks.ema.decay=0.9999", "tricks.ema.warmup=false"]


def _slow_run(tmp_path, *extra):
    from trickbag.runs.run import run_recipe

    recipe = load_recipe("digits", [*BASE, *SLOW, *extra, f"run.dir={tmp_path}", "run.name=slow"])
    return recipe, run_recipe(recipe, quiet=True)


def _val_eval(recipe, weights):
    from trickbag.data.sources import build_data

    data = build_data(recipe.data)
    model = model_for(recipe, data)
    model.load_state_dict(weights)
    return _naive_eval(model.eval(), data.val)


def test_the_summary_says_when_the_averaged_weights_end_worse_and_what_best_pt_holds(tmp_path):
    from trickbag.train.checkpoint_files import load_checkpoint

    recipe, result = _slow_run(tmp_path)
    final = result.history[-1]
    assert final["val/acc"] < final["val/acc_raw"] - 0.1, final  # the set-up: the average is far behind
    summary = (result.run_dir / "summary.txt").read_text()
    assert "evaluate worse than the raw weights" in summary and "best.pt holds the averaged weights" in summary
    assert "tricks.ema.select=best" in summary
    best = load_checkpoint(result.run_dir / "checkpoints" / "best.pt")
    assert not torch.equal(best["eval_model"]["head.weight"], best["model"]["head.weight"])


@pytest.mark.parametrize("select", ["best", "raw"])
def test_select_keeps_the_better_or_the_raw_weights_in_best_pt(tmp_path, select):
    from trickbag.train.checkpoint_files import load_checkpoint

    recipe, result = _slow_run(tmp_path, f"tricks.ema.select={select}")
    for h in result.history:  # val/acc: the kept weights'; val/acc_ema and val/acc_raw: each set's own
        raw_better = h["val/acc_raw"] > h["val/acc_ema"] or select == "raw"
        assert h["val/acc"] == (h["val/acc_raw"] if raw_better else h["val/acc_ema"])
        assert h["val/kept_averaged"] == (0.0 if raw_better else 1.0)
    assert result.history[-1]["val/kept_averaged"] == 0.0  # the raw weights win here
    best = load_checkpoint(result.run_dir / "checkpoints" / "best.pt")
    for k, v in best["model"].items():
        assert torch.equal(best["eval_model"][k], v), k
    best_epoch = int(best["counters"]["epoch"]) - 1
    loss, acc = _val_eval(recipe, best["eval_model"])
    assert result.history[best_epoch]["val/acc"] == pytest.approx(acc)
    assert result.history[best_epoch]["val/loss"] == pytest.approx(loss, rel=1e-5)
    assert "best.pt holds the raw weights" in (result.run_dir / "summary.txt").read_text()


def test_select_best_keeps_the_average_when_it_is_better(tmp_path):
    from trickbag.train.checkpoint_files import load_checkpoint

    recipe, result = _slow_run(tmp_path, "tricks.ema.select=best", "tricks.ema.decay=0.5")
    kept = [h["val/kept_averaged"] for h in result.history]
    for h in result.history:
        assert h["val/acc"] == (h["val/acc_ema"] if h["val/acc_ema"] >= h["val/acc_raw"] else h["val/acc_raw"])
    best = load_checkpoint(result.run_dir / "checkpoints" / "best.pt")
    held_average = kept[int(best["counters"]["epoch"]) - 1] == 1.0
    same = all(torch.equal(best["eval_model"][k], v) for k, v in best["model"].items())
    assert same != held_average
