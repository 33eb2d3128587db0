"""freeze / unfreeze: flags and names against fnmatch/re computed here; BatchNorm statistics behaviour."""

from __future__ import annotations

import copy
import fnmatch
import pickle
import re

import pytest
import torch
from torch import nn

from trickbag.nn import freeze, unfreeze


def make_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 4, 3),  # 0
        nn.BatchNorm2d(4),  # 1
        nn.ReLU(),
        nn.Sequential(nn.Conv2d(4, 4, 1), nn.BatchNorm2d(4)),  # 3
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(4, 2),  # 6
    )


def flags(model):
    return {n: p.requires_grad for n, p in model.named_parameters()}


@pytest.mark.parametrize("patterns", [("*",), ("3.*",), ("0.*", "6.bias"), ("*.bias",), "1.weight"])
def test_glob_freeze_sets_flags_and_returns_names(patterns):
    model = make_model()
    pats = [patterns] if isinstance(patterns, str) else list(patterns)
    expected = [n for n, _ in model.named_parameters() if any(fnmatch.fnmatchcase(n, p) for p in pats)]
    assert freeze(model, patterns) == expected
    assert flags(model) == {n: n not in expected for n, _ in model.named_parameters()}


def test_regex_uses_full_match():
    model = make_model()
    pattern = r"[0-3]\.(weight|bias)"
    expected = [n for n, _ in model.named_parameters() if re.fullmatch(pattern, n)]
    assert expected == ["0.weight", "0.bias", "1.weight", "1.bias"]
    assert freeze(model, pattern, regex=True) == expected
    assert flags(model) == {n: n not in expected for n, _ in model.named_parameters()}


def test_unfreeze_inverts_freeze():
    model = make_model()
    freeze(model)
    assert unfreeze(model, ["6.*"]) == ["6.weight", "6.bias"]
    assert flags(model) == {n: n.startswith("6.") for n, _ in model.named_parameters()}


def test_pattern_matching_nothing_lists_names():
    model = make_model()
    with pytest.raises(ValueError, match=r"'layer1\.\*'.*0\.weight, 0\.bias"):
        freeze(model, ["0.*", "layer1.*"])
    assert all(flags(model).values())  # nothing was changed by the failing call
    with pytest.raises(ValueError, match="invalid regular expression"):
        freeze(model, "(", regex=True)
    with pytest.raises(ValueError, match="matches no parameter"):
        unfreeze(model, "head.*")
    with pytest.raises(TypeError, match="patterns"):
        freeze(model, [1])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="patterns"):
        freeze(model, [])


def test_shared_parameter_matches_under_either_name():
    lin = nn.Linear(2, 2)
    model = nn.Sequential(lin, nn.ReLU(), lin)
    assert freeze(model, "2.weight") == ["2.weight"]
    assert not model[0].weight.requires_grad


def _train_forward(model, seed=1):
    model.train()
    g = torch.Generator().manual_seed(seed)
    model(torch.randn(4, 3, 6, 6, generator=g) * 2 + 1)


def _stats(bn):
    return bn.running_mean.clone(), bn.running_var.clone(), bn.num_batches_tracked.clone()


def test_frozen_bn_stats_do_not_change_in_train_mode():
    model = make_model()
    freeze(model, ["0.*", "1.*"], freeze_bn_stats=True)
    before, other_before = _stats(model[1]), _stats(model[3][1])
    _train_forward(model)
    _train_forward(model, seed=2)
    for a, b in zip(before, _stats(model[1])):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert not model[1].training
    # The BN whose parameters were not frozen keeps learning statistics.
    assert model[3][1].training
    assert not torch.equal(other_before[0], model[3][1].running_mean)
    assert model[3][1].num_batches_tracked.item() == 2
    # In eval mode BN normalises with its running statistics: compare with F.batch_norm.
    x = torch.randn(2, 4, 3, 3)
    bn = model[1]
    ref = torch.nn.functional.batch_norm(x, bn.running_mean, bn.running_var, bn.weight, bn.bias, training=False)
    model.train()
    torch.testing.assert_close(bn(x), ref)


def test_default_freeze_keeps_bn_statistics_updating():
    model = make_model()
    freeze(model)
    before = _stats(model[1])
    _train_forward(model)
    assert model[1].training
    assert not torch.equal(before[0], model[1].running_mean)


def test_bn_with_a_trainable_parameter_is_not_stats_frozen():
    model = make_model()
    freeze(model, "1.weight", freeze_bn_stats=True)
    assert model.train()[1].training


def test_unfreeze_releases_bn_statistics():
    model = make_model()
    freeze(model, freeze_bn_stats=True)
    assert not model.train()[1].training
    model.eval()
    unfreeze(model, "1.*")
    assert not model[1].training  # follows the model's current mode
    assert model.train()[1].training
    assert not model[3][1].training  # not released by the "1.*" pattern
    before = _stats(model[1])
    _train_forward(model)
    assert not torch.equal(before[0], model[1].running_mean)


def test_affine_free_bn_selected_by_buffer_names():
    model = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3, affine=False))
    freeze(model, "*", freeze_bn_stats=True)
    assert not model.train()[1].training


def test_frozen_bn_survives_deepcopy_and_pickle():
    model = make_model()
    freeze(model, ["0.*", "1.*"], freeze_bn_stats=True)
    for clone in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        assert not clone.train()[1].training
        assert model.train()[1] is not clone[1]
        unfreeze(clone)
        assert clone.train()[1].training
        assert not model.train()[1].training  # the original is untouched
