"""``optim.fused``: torch's fused optimizer kernel (Adam, AdamW, SGD) from a recipe.

The reference for every update is torch's own for-loop kernel (what a recipe without ``optim.fused`` builds): the
fused one must give the same update up to float32 rounding, skip an fp16 overflow the same way through the
GradScaler, and resume exactly. Optimizers without a fused kernel refuse the key in one line.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tests.train.test_trainer import InfLossAt  # an fp16 overflow at one micro-batch
from trickbag.errors import RecipeError
from trickbag.optim import optimizers
from trickbag.recipe import load_recipe
from trickbag.train.parts import optimizer_spec
from trickbag.train.trainer import Trainer

FUSED = ("sgd", "adamw", "adam")
SETTINGS = ["optim.lr=0.05", "optim.weight_decay=0.01", "optim.momentum=0.9"]


def test_the_optimizers_with_a_fused_kernel_are_the_ones_that_read_the_key():
    assert tuple(n for n, e in optimizers.optimizers().items() if "fused" in e.keys) == FUSED


@pytest.mark.parametrize("name", FUSED)
def test_fused_adds_torchs_fused_flag_and_nothing_else(name):
    plain_cls, plain = optimizer_spec(load_recipe("digits", [f"optim.name={name}", *SETTINGS]))
    cls, kwargs = optimizer_spec(load_recipe("digits", [f"optim.name={name}", *SETTINGS, "optim.fused=true"]))
    assert cls is plain_cls and "fused" not in plain  # without the key: torch's default kernel, as before
    assert kwargs == {**plain, "fused": True}
    assert cls(nn.Linear(2, 2).parameters(), **kwargs).defaults["fused"] is True


@pytest.mark.parametrize("name", FUSED)
def test_a_fused_update_equals_the_for_loop_update_to_rounding(name):
    """Ten updates on the same gradients (a BatchNorm, a conv and a linear layer; weight decay, momentum or betas).

    The conv has no bias: before a BatchNorm its gradient is rounding noise, which Adam's normalisation would turn
    into full-size steps whose signs differ between any two kernels."""
    def model() -> nn.Module:
        torch.manual_seed(0)
        return nn.Sequential(nn.Conv1d(2, 4, 3, bias=False), nn.BatchNorm1d(4), nn.Flatten(), nn.Linear(24, 3))

    nets, opts = [], []
    for extra in ([], ["optim.fused=true"]):
        cls, kwargs = optimizer_spec(load_recipe("digits", [f"optim.name={name}", *SETTINGS, *extra]))
        net = model()
        nets.append(net)
        opts.append(cls(net.parameters(), **kwargs))
    gen = torch.Generator().manual_seed(1)
    for _ in range(10):
        x, y = torch.randn(5, 2, 8, generator=gen), torch.randint(0, 3, (5,), generator=gen)
        for net, opt in zip(nets, opts):
            opt.zero_grad()
            nn.functional.cross_entropy(net(x), y).backward()
            opt.step()
    moved = 0.0
    for (k, a), b in zip(nets[0].state_dict().items(), nets[1].state_dict().values()):
        torch.testing.assert_close(b, a, atol=2e-6, rtol=1e-5, msg=lambda m, k=k: f"{k}: {m}")
        moved = max(moved, float((a.float() - model().state_dict()[k].float()).abs().max()))
    assert moved > 1e-2  # the updates did move the weights: the comparison is not of two untouched models


def _fp16_run(fused: bool) -> Trainer:
    gen = torch.Generator().manual_seed(3)
    x, y = torch.randn(48, 6, generator=gen), torch.randint(0, 3, (48,), generator=gen)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.1, fused=fused)
    t = Trainer(model, opt, DataLoader(TensorDataset(x, y), batch_size=8), device="cpu", precision="16",
                max_epochs=2, plugins=[InfLossAt(2)])
    t.fit()
    return t


def test_an_fp16_overflow_skips_the_fused_update_as_it_skips_the_for_loop_one():
    plain, fused = _fp16_run(False), _fp16_run(True)
    assert fused.state.skipped_steps == plain.state.skipped_steps == 2  # batch 2 of each epoch
    assert fused.state.scaler.get_scale() == plain.state.scaler.get_scale() == 2.0**14  # halved twice
    assert fused.state.step == plain.state.step == 10
    for (k, a), b in zip(plain.model.state_dict().items(), fused.model.state_dict().values()):
        assert torch.isfinite(b).all(), k
        torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-4, msg=lambda m, k=k: f"{k}: {m}")
    # the skipped updates left no trace in the fused optimizer's state: 10 steps counted, as in the for-loop one
    assert all(float(s["step"]) == 10 for s in fused.optimizer.state.values())


@pytest.mark.parametrize("name", sorted(set(optimizers.names()) - set(FUSED)))
def test_the_other_optimizers_refuse_it_in_one_line(name):
    extra = ["schedule.name=none"] if optimizers.get(name).schedule_free else []
    with pytest.raises(RecipeError) as err:
        load_recipe("digits", [f"optim.name={name}", "optim.fused=true", *extra])
    assert str(err.value).splitlines() == [
        f"optim.fused: optim.name={name} has no fused kernel; it works with sgd, adamw, adam (or set "
        "optim.fused=false)"]


def test_a_fused_run_resumes_exactly_after_sigkills(tmp_path):
    tiny = ["data.name=fake", "data.num_samples=120", "data.batch_size=16", "train.epochs=2", "model.name=mlp",
            "train.checkpoint_every_steps=3", "run.plots=false", "log.tensorboard=false", "optim.name=adamw",
            "optim.lr=0.01", "optim.fused=true", "train.threads=1"]
    done = subprocess.run([sys.executable, "-m", "trickbag", "verify-resume", "digits", *tiny, "--kills", "2",
                           "--seed", "5", "--out", str(tmp_path / "v")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1].startswith("verdict: IDENTICAL: killed"), done.stdout[-3000:]
    last = torch.load(tmp_path / "v" / "runs" / "reference" / "checkpoints" / "last.pt", weights_only=True)
    assert last["optimizer"]["param_groups"][0]["fused"] is True
