"""param_groups: membership by id, decay classification and LR factors against naive rules written here."""

from __future__ import annotations

import fnmatch

import pytest
import torch
from torch import nn

from trickbag.nn import layer_id_by_depth, param_groups


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.cls_token = nn.Parameter(torch.zeros(1, 8))  # root-level parameter, ndim 2
        self.stem = nn.Conv2d(3, 8, 3)
        self.bn = nn.BatchNorm2d(8)
        self.act = nn.ReLU()  # no parameters: does not take a layer id
        self.block = nn.Sequential(nn.Linear(8, 8), nn.LayerNorm([2, 4]), nn.GroupNorm(2, 8))
        self.head = nn.Linear(8, 3)


NORMS = (nn.BatchNorm2d, nn.LayerNorm, nn.GroupNorm)


def naive_no_decay(model: nn.Module) -> set[str]:
    """Biases, 1-D parameters, and every parameter owned by a norm layer."""
    out = set()
    for mod_name, mod in model.named_modules():
        for p_name, p in mod.named_parameters(recurse=False):
            full = f"{mod_name}.{p_name}" if mod_name else p_name
            if p_name == "bias" or p.ndim <= 1 or isinstance(mod, NORMS):
                out.add(full)
    return out


def by_name(groups):
    return {n: g for g in groups for n in g["param_names"]}


def test_every_trainable_parameter_once_frozen_absent():
    model = Net()
    model.stem.requires_grad_(False)
    groups = param_groups(model, lr=0.1, weight_decay=0.05)
    ids = [id(p) for g in groups for p in g["params"]]
    trainable = [p for p in model.parameters() if p.requires_grad]
    assert sorted(ids) == sorted(id(p) for p in trainable)
    assert len(ids) == len(set(ids))
    assert id(model.stem.weight) not in ids
    assert all(g["params"] for g in groups)  # no empty group
    for g in groups:
        assert {"params", "lr", "weight_decay", "name"} <= g.keys()
        assert "param" not in g and "learning_rate" not in g
        assert [id(p) for p in g["params"]] == [id(model.get_parameter(n)) for n in g["param_names"]]


def test_decay_assignment_matches_naive_rule():
    model = Net()
    groups = param_groups(model, lr=0.1, weight_decay=0.05)
    no_decay = naive_no_decay(model)
    # LayerNorm([2, 4]) weight is 2-D: only the module rule catches it.
    assert "block.1.weight" in no_decay and model.block[1].weight.ndim == 2
    for name, g in by_name(groups).items():
        assert g["weight_decay"] == (0.0 if name in no_decay else 0.05), name
        assert g["lr"] == 0.1
    assert {g["name"] for g in groups} == {"decay", "no_decay"}


def test_no_decay_bias_norm_false_and_zero_weight_decay():
    model = Net()
    (group,) = param_groups(model, lr=0.1, weight_decay=0.05, no_decay_bias_norm=False)
    assert group["weight_decay"] == 0.05 and len(group["params"]) == len(list(model.parameters()))
    (group,) = param_groups(model, lr=0.1, weight_decay=0.0)
    assert group["name"] == "all" and group["weight_decay"] == 0.0


def test_adamw_accepts_groups_and_applies_decay_per_group():
    model = Net()
    lr, wd = 0.1, 0.5
    groups = param_groups(model, lr=lr, weight_decay=wd)
    opt = torch.optim.AdamW(groups)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    no_decay = naive_no_decay(model)
    # AdamW with zero gradients: p <- p * (1 - lr * wd) for decayed parameters, unchanged otherwise.
    for n, p in model.named_parameters():
        expected = before[n] if n in no_decay else before[n] * (1 - lr * wd)
        torch.testing.assert_close(p.detach(), expected, msg=n)
    opt.load_state_dict(opt.state_dict())  # extra keys survive a state-dict round trip


def test_lr_scale_first_matching_pattern_wins():
    model = Net()
    scale = {"head.*": 10.0, "*.weight": 0.5}
    groups = param_groups(model, lr=0.2, lr_scale=scale)
    for name, g in by_name(groups).items():
        factor = next((f for pat, f in scale.items() if fnmatch.fnmatchcase(name, pat)), 1.0)
        assert g["lr"] == pytest.approx(0.2 * factor), name
    with pytest.raises(ValueError, match="'backbone.*' matches no parameter"):
        param_groups(model, lr=0.1, lr_scale={"backbone.*": 0.1})
    with pytest.raises(ValueError, match="lr_scale"):
        param_groups(model, lr=0.1, lr_scale={"head.*": -1.0})


def test_layer_decay_default_ids_follow_top_level_children():
    model = Net()
    decay = 0.5
    groups = param_groups(model, lr=1.0, layer_decay=decay)
    # Naive ids: children that hold parameters, in order; root parameters share id 0.
    holders = [n for n, c in model.named_children() if list(c.parameters())]
    assert holders == ["stem", "bn", "block", "head"]
    num_layers = len(holders) - 1
    for name, g in by_name(groups).items():
        lid = holders.index(name.split(".")[0]) if "." in name else 0
        assert g["lr"] == pytest.approx(decay ** (num_layers - lid)), name
    assert by_name(groups)["head.weight"]["lr"] == 1.0


def test_layer_decay_custom_fn_combines_with_scale_and_decay():
    model = Net()

    def layer_id(name: str) -> int:
        return 2 if name.startswith("head") else 1 if name.startswith("block") else 0

    groups = param_groups(
        model, lr=1.0, weight_decay=0.1, lr_scale={"block.0.*": 3.0}, layer_decay=0.9, layer_id_fn=layer_id
    )
    no_decay = naive_no_decay(model)
    for name, g in by_name(groups).items():
        factor = 3.0 if name.startswith("block.0.") else 1.0
        assert g["lr"] == pytest.approx(factor * 0.9 ** (2 - layer_id(name))), name
        assert g["weight_decay"] == (0.0 if name in no_decay else 0.1)
    assert "layer1/lr_scale[block.0.*]/decay" in {g["name"] for g in groups}


def test_shared_parameter_appears_once():
    lin = nn.Linear(3, 3)
    model = nn.Sequential(lin, nn.ReLU(), lin)
    groups = param_groups(model, lr=0.1, weight_decay=0.1)
    ids = [id(p) for g in groups for p in g["params"]]
    assert sorted(ids) == sorted({id(lin.weight), id(lin.bias)})


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        ({"lr": -1.0}, ValueError, "lr"),
        ({"lr": float("nan")}, ValueError, "lr"),
        ({"lr": 0.1, "weight_decay": -0.1}, ValueError, "weight_decay"),
        ({"lr": 0.1, "layer_decay": 0.0}, ValueError, "layer_decay"),
        ({"lr": 0.1, "layer_decay": 1.5}, ValueError, "layer_decay"),
        ({"lr": 0.1, "layer_id_fn": len}, ValueError, "layer_id_fn is only used with layer_decay"),
        ({"lr": 0.1, "layer_decay": 0.5, "layer_id_fn": lambda n: -1}, ValueError, "int >= 0"),
        ({"lr": 0.1, "lr_scale": [("a", 1.0)]}, TypeError, "lr_scale"),
    ],
)
def test_invalid_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        param_groups(Net(), **kwargs)


def test_all_frozen_raises():
    model = Net().requires_grad_(False)
    with pytest.raises(ValueError, match="no trainable parameters"):
        param_groups(model, lr=0.1)


# --------------------------------------------------------------------------- layer_id_by_depth
def naive_layer_ids(model: nn.Module, depth: int) -> dict[str, int]:
    """Number the distinct module paths (cut to ``depth`` names) in order of first appearance."""
    order: list[str] = []
    ids = {}
    for name, _ in model.named_parameters():
        path = name.split(".")[:-1][:depth]
        key = "/".join(path)
        if key not in order:
            order.append(key)
        ids[name] = order.index(key)
    return ids


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_layer_id_by_depth_numbers_module_paths_in_parameter_order(depth):
    model = Net()
    model.block[1].requires_grad_(False)  # frozen parameters keep their ids
    f = layer_id_by_depth(model, depth)
    assert {n: f(n) for n, _ in model.named_parameters()} == naive_layer_ids(model, depth)
    assert f("not.a.parameter") == 0


def test_layer_id_by_depth_written_out():
    f1, f2 = layer_id_by_depth(Net(), 1), layer_id_by_depth(Net(), 2)
    names = ["cls_token", "stem.weight", "bn.bias", "block.0.weight", "block.2.bias", "head.weight"]
    assert [f1(n) for n in names] == [0, 1, 2, 3, 3, 4]  # the root parameter is a layer of its own
    assert [f2(n) for n in names] == [0, 1, 2, 3, 5, 6]


def test_layer_id_by_depth_drives_layer_decay():
    model = Net()
    groups = param_groups(model, lr=1.0, layer_decay=0.5, layer_id_fn=layer_id_by_depth(model, 1),
                          no_decay_bias_norm=False)
    for name, g in by_name(groups).items():
        assert g["lr"] == pytest.approx(0.5 ** (4 - naive_layer_ids(model, 1)[name])), name


@pytest.mark.parametrize("model, depth, exc, match", [
    ("net", 1, TypeError, "model must be a torch.nn.Module"),
    (None, 0, ValueError, "depth must be an int >= 1"),
    (None, True, ValueError, "depth"),
])
def test_layer_id_by_depth_rejects_bad_arguments(model, depth, exc, match):
    with pytest.raises(exc, match=match):
        layer_id_by_depth(Net() if model is None else model, depth)
