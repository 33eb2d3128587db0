"""count_parameters, summary and feature_extractor against hand counts, torchinfo and forward hooks."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from trickbag.nn import count_parameters, feature_extractor, freeze, summary


def test_count_parameters_by_formula():
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.Flatten(), nn.Linear(8, 5))
    conv, bn, lin = 8 * 3 * 3 * 3 + 8, 8 + 8, 8 * 5 + 5  # BN buffers are not parameters
    assert count_parameters(model) == conv + bn + lin
    freeze(model, "0.*")
    assert count_parameters(model, trainable_only=True) == bn + lin
    assert count_parameters(model) == conv + bn + lin


def test_shared_parameters_counted_once():
    emb = nn.Embedding(10, 4)
    head = nn.Linear(4, 10, bias=False)
    head.weight = emb.weight  # tied input/output embedding
    model = nn.Sequential(emb, head)
    assert count_parameters(model) == 10 * 4
    with pytest.raises(ValueError, match="lazy"):
        count_parameters(nn.LazyLinear(3))


def test_summary_returns_torchinfo_statistics_silently(capsys):
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 4 * 4, 2))
    stats = summary(model, (2, 3, 6, 6), depth=1)
    assert capsys.readouterr().out == ""
    assert stats.total_params == count_parameters(model)
    text = str(stats)
    assert "[2, 8, 4, 4]" in text and "[2, 2]" in text
    stats = summary(model, input_data=torch.zeros(1, 3, 6, 6))
    assert stats.total_params == count_parameters(model)
    with pytest.raises(ValueError, match="input_size"):
        summary(model)


def small_net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 4, 3),
        nn.ReLU(),
        nn.Sequential(nn.Conv2d(4, 6, 3), nn.ReLU()),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(6, 2),
    )


def hooked_outputs(model: nn.Module, names: list[str], x: torch.Tensor) -> dict[str, torch.Tensor]:
    out = {}
    handles = [
        model.get_submodule(n).register_forward_hook(lambda m, i, o, n=n: out.__setitem__(n, o)) for n in names
    ]
    try:
        model(x)
    finally:
        for h in handles:
            h.remove()
    return out


def test_feature_extractor_matches_forward_hooks():
    model = small_net().eval()
    x = torch.randn(2, 3, 9, 9)
    ref = hooked_outputs(model, ["1", "2.1", "5"], x)
    feats = feature_extractor(model, ["1", "2.1", "5"]).eval()(x)
    assert list(feats) == ["1", "2.1", "5"]
    for k in ref:
        torch.testing.assert_close(feats[k], ref[k])
    renamed = feature_extractor(model, {"2.1": "mid"})(x)
    assert list(renamed) == ["mid"]
    torch.testing.assert_close(renamed["mid"], ref["2.1"])


def test_feature_extractor_unknown_name_lists_valid_nodes():
    from torchvision.models.feature_extraction import get_graph_node_names

    model = small_net()
    valid = get_graph_node_names(model)[0]
    with pytest.raises(ValueError, match=r"unknown node name\(s\) \['2\.2'\]") as info:
        feature_extractor(model, ["1", "2.2"])
    assert str(info.value).endswith("valid node names are: " + ", ".join(valid))
    with pytest.raises(ValueError, match="empty"):
        feature_extractor(model, [])
    with pytest.raises(TypeError, match="layers"):
        feature_extractor(model, "1")  # type: ignore[arg-type]
