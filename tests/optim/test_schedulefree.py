"""Schedule-free optimizers (the ``schedulefree`` package): the trainer trains at the training weights and
evaluates, checkpoints and finishes at the evaluated ones, with BatchNorm statistics recalibrated for them.
References: the package driven by hand in this file, and a recalibration written out here."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from trickbag.train.trainer import Trainer

schedulefree = pytest.importorskip("schedulefree")


def _data(n=96):
    torch.manual_seed(0)
    x = torch.randn(n, 6)
    return x, (x[:, 0] + x[:, 1] > 0).long()


def test_training_and_evaluation_switch_weights_as_the_package_says():
    x, y = _data()
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    ref = copy.deepcopy(model)
    train, val = DataLoader(TensorDataset(x, y), batch_size=16), DataLoader(TensorDataset(x, y), batch_size=96)
    opt = schedulefree.AdamWScheduleFree(model.parameters(), lr=0.01, warmup_steps=3)
    state = Trainer(model, opt, train, val, max_epochs=3, device="cpu", progress=False).fit()

    ropt = schedulefree.AdamWScheduleFree(ref.parameters(), lr=0.01, warmup_steps=3)
    val_losses = []
    for _ in range(3):  # the package's own loop: train() for the updates, eval() to evaluate
        ropt.train()
        ref.train()
        for xb, yb in train:
            ropt.zero_grad()
            F.cross_entropy(ref(xb), yb).backward()
            ropt.step()
        ropt.eval()
        with torch.no_grad():
            val_losses.append(float(F.cross_entropy(ref.eval()(x), y)))
    for p, q in zip(ref.parameters(), model.parameters()):  # fit() ends at the evaluated weights (to rounding: the
        torch.testing.assert_close(p, q, rtol=0, atol=1e-6)  # trainer switched back to train and to eval once more)
    assert [h["val/loss"] for h in state.history] == pytest.approx(val_losses, abs=1e-6)


def _recalibrated(model, x, batch, batches=20):
    """Reference: reset the statistics, average them over the first batches in order, train-mode forwards."""
    bn = model[1]
    bn.reset_running_stats()
    bn.momentum = None
    model.train()
    with torch.no_grad():
        for i in range(0, min(len(x), batches * batch), batch):
            model(x[i:i + batch])
    return bn.running_mean.clone(), bn.running_var.clone()


def test_batchnorm_statistics_are_recalibrated_at_the_evaluated_weights_and_the_checkpoint_holds_them(tmp_path):
    x, y = _data(64)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    opt = schedulefree.SGDScheduleFree(model.parameters(), lr=0.5)
    t = Trainer(model, opt, DataLoader(TensorDataset(x, y), batch_size=8, shuffle=True), max_epochs=2, device="cpu",
                progress=False, run_dir=tmp_path / "r")
    t.fit()
    mean, var = model[1].running_mean.clone(), model[1].running_var.clone()
    ref_mean, ref_var = _recalibrated(copy.deepcopy(model), x, 8)
    torch.testing.assert_close(mean, ref_mean, atol=1e-6, rtol=0)
    torch.testing.assert_close(var, ref_var, atol=1e-6, rtol=0)
    last = torch.load(tmp_path / "r" / "checkpoints" / "last.pt", weights_only=True)
    for k, v in model.state_dict().items():  # the evaluated weights and their statistics were stored
        torch.testing.assert_close(last["model"][k], v, atol=1e-6, rtol=0, msg=k)


def test_a_recipe_with_a_schedule_free_optimizer_resumes_bit_identically(tiny_recipe):
    from reliability._helpers import training_state_differences

    from trickbag.plugin.interface import Plugin
    from trickbag.plugin.state import StopReason
    from trickbag.runs.run import resume_run, run_recipe
    from trickbag.train.checkpoint_files import load_checkpoint

    class StopAfterFirst(Plugin):
        def on_epoch_end(self, state):
            if state.epoch == 0:
                state.stop(StopReason.INTERRUPTED, "test")

    base = ["optim.name=schedulefree_adamw", "optim.lr=0.005", "schedule.name=none", "schedule.warmup_epochs=0.5",
            "train.epochs=3", "run.plots=false", "log.tensorboard=false"]
    straight = run_recipe(tiny_recipe(*base, name="straight"), quiet=True)
    first = run_recipe(tiny_recipe(*base, name="resumed"), plugins=[StopAfterFirst()], quiet=True)
    resumed = resume_run(first.run_dir, [], quiet=True)
    a = load_checkpoint(straight.run_dir / "checkpoints" / "last.pt")
    b = load_checkpoint(resumed.run_dir / "checkpoints" / "last.pt")
    assert training_state_differences(a, b) == []


@pytest.mark.parametrize("extra, words", [
    (["schedule.name=cosine"], "needs schedule.name=none"),
    (["schedule.name=none", "tricks.swa.enabled=true"], "tricks.swa with optim.name=schedulefree_sgd"),
    (["schedule.name=none", "tricks.sam.enabled=true"], "tricks.sam with optim.name=schedulefree_sgd"),
])
def test_combinations_that_break_it_are_refused_in_one_line(tiny_recipe, extra, words):
    from trickbag.errors import TrickbagError
    from trickbag.train.build import build

    with pytest.raises(TrickbagError, match=words) as err:
        build(tiny_recipe("optim.name=schedulefree_sgd", *extra))
    assert "\n" not in str(err.value)
