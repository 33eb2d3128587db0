"""Class-balanced sampling from a recipe: the sampler's weights against the formula, the classes each epoch draws
against their expected proportions, the draw resumed mid-epoch and sharded over ranks, refusals."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from trickbag.data.sampler import EpochSampler
from trickbag.errors import ConflictError, RecipeError
from trickbag.plugin.interface import Plugin

from . import helpers as h
from .test_class_balanced import _imbalanced_csv

EPOCHS = 300


def _labels(train_set) -> torch.Tensor:
    return torch.tensor([int(train_set[i][1]) for i in range(len(train_set))])


def _drawn(sampler: EpochSampler, labels: torch.Tensor, epochs: int) -> torch.Tensor:
    out = []
    for e in range(epochs):
        sampler.set_epoch(e)
        idx = [int(i) for i in sampler]
        assert len(idx) == len(labels)  # as many draws per epoch as the training set holds
        out.append(labels[idx])
    return torch.cat(out)


@pytest.mark.parametrize("power", [1.0, 0.5, 0.0])
def test_each_epoch_draws_the_classes_in_proportion_to_n_c_to_the_one_minus_power(tmp_path, power):
    _, ctx = h.build_run(*_imbalanced_csv(tmp_path), "tricks.resample.enabled=true", f"tricks.resample.power={power}")
    labels = _labels(ctx.data.train)
    counts = torch.bincount(labels).double()
    assert counts[0] > 2 * counts[2]  # imbalanced
    sampler = ctx.train_loader.sampler
    torch.testing.assert_close(sampler.weights, counts[labels] ** -power)
    drawn = _drawn(sampler, labels, EPOCHS)
    share = counts ** (1 - power)
    expected = share / share.sum()
    seen = torch.bincount(drawn, minlength=len(counts)).double() / len(drawn)
    sd = torch.sqrt(expected * (1 - expected) / len(drawn))
    assert bool(((seen - expected).abs() < 5 * sd).all()), (seen, expected)
    if power == 0.0:  # the data's own proportions, but drawn with replacement: some sample repeats in an epoch
        assert any(len(set(sampler_epoch(sampler, e))) < len(labels) for e in range(5))


def sampler_epoch(sampler: EpochSampler, epoch: int) -> list[int]:
    sampler.set_epoch(epoch)
    return [int(i) for i in sampler]


def test_without_the_trick_the_sampler_is_the_permutation(tmp_path):
    _, ctx = h.build_run(*_imbalanced_csv(tmp_path))
    sampler = ctx.train_loader.sampler
    assert sampler.weights is None
    assert sorted(sampler_epoch(sampler, 3)) == list(range(len(ctx.data.train)))


def test_a_weighted_draw_resumes_mid_epoch_and_shards_over_ranks():
    w = torch.tensor([5.0, 1.0, 1.0, 0.0, 3.0, 2.0, 1.0])
    full = EpochSampler(7, seed=4)
    full.set_weights(w)
    ref = sampler_epoch(full, 2)
    assert 3 not in ref  # weight 0: never drawn
    resumed = EpochSampler(7, seed=4)
    resumed.set_weights(w)
    resumed.set_epoch(2)
    resumed.set_start(3)
    assert [int(i) for i in resumed] == ref[3:]
    shards = []
    for rank in range(2):
        s = EpochSampler(7, seed=4, rank=rank, world_size=2)
        s.set_weights(w)
        shards.append(sampler_epoch(s, 2))
    padded = (ref * 2)[:8]
    assert shards == [padded[0::2], padded[1::2]]
    assert sampler_epoch(full, 3) != ref  # another epoch, another draw


@pytest.mark.parametrize("weights, words", [
    (torch.ones(3), "3 given for 4 samples"),
    (torch.tensor([1.0, -1.0, 1.0, 1.0]), "finite, >= 0 and not all 0"),
    (torch.zeros(4), "finite, >= 0 and not all 0"),
    (torch.tensor([1.0, math.inf, 1.0, 1.0]), "finite, >= 0 and not all 0"),
])
def test_bad_weights_are_refused(weights, words):
    with pytest.raises(ValueError, match=words):
        EpochSampler(4).set_weights(weights)
    with pytest.raises(ValueError, match="training sampler"):
        EpochSampler(4, shuffle=False).set_weights(torch.ones(4))


def test_refusals(tmp_path):
    with pytest.raises(ConflictError, match="tricks.resample does not apply to task.type=regression"):
        h.build_run("tricks.resample.enabled=true", "task.type=regression")
    with pytest.raises(RecipeError, match="tricks.resample.power"):
        h.build_run(*_imbalanced_csv(tmp_path), "tricks.resample.enabled=true", "tricks.resample.power=2")


class _Weights(Plugin):
    name = "my_sampler"

    def configure(self, ctx):  # type: ignore[no-untyped-def]
        ctx.sample_weights = torch.ones(len(ctx.train_set))


def test_a_hand_built_trainer_refuses_a_plugin_that_sets_sample_weights():
    from torch.utils.data import DataLoader, TensorDataset

    from trickbag.train.trainer import Trainer

    model = nn.Linear(3, 2)
    data = TensorDataset(torch.randn(8, 3), torch.randint(0, 2, (8,)))
    with pytest.raises(ConflictError, match="my_sampler sets the training sampler's weights, which only a recipe's"):
        Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), DataLoader(data, batch_size=4), device="cpu",
                plugins=[_Weights()], max_epochs=1).fit()
