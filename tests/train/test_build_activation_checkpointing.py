"""train.activation_checkpointing in a recipe: the tiny run trains to the same model as without it, says which
blocks it checkpoints, and refuses a model without blocks before anything is written."""

from __future__ import annotations

import pytest
import torch

from trickbag.errors import RecipeError
from trickbag.nn import unwrap


def _fit(recipe):
    from trickbag.train.build import build

    trainer, ctx = build(recipe)
    trainer.fit()
    return unwrap(trainer.model), ctx


def test_blocks_train_the_same_model_as_none(tiny_recipe):
    small = "model.kwargs.width=8"
    plain, _ = _fit(tiny_recipe(small))
    net, ctx = _fit(tiny_recipe(small, "train.activation_checkpointing=blocks", name="b"))
    assert "forward" in vars(net.features[0]) and "forward" not in vars(plain.features[0])
    ref, got = plain.state_dict(), net.state_dict()
    assert list(got) == list(ref)
    for k in ref:  # parameters and BatchNorm statistics alike, bit for bit
        assert torch.equal(got[k], ref[k]), k
    assert ("activation checkpointing: 4 of 4 blocks recompute their activations in backward (Sequential x4: "
            "features.0, features.1, features.3, features.4)") in ctx.notes


def test_every_k_checkpoints_one_block_in_k(tiny_recipe):
    from trickbag.train.build import build

    _, ctx = build(tiny_recipe("train.activation_checkpointing=every_k", "train.activation_checkpointing_every=3"))
    assert any(n.startswith("activation checkpointing: 2 of 4 blocks") and n.endswith("features.0, features.4)")
               for n in ctx.notes)


def test_a_model_without_blocks_is_refused(tiny_recipe, tmp_path):
    from trickbag.runs.run import run_recipe

    with pytest.raises(RecipeError, match=r"^train.activation_checkpointing=blocks: the model \(MLP\) has no repeated "
                                          r"blocks to checkpoint .*; allowed: none, or a model with such blocks"):
        run_recipe(tiny_recipe("train.activation_checkpointing=blocks", "model.name=mlp"), quiet=True)
    assert not any(tmp_path.iterdir())


def test_bad_values_are_refused(tiny_recipe):
    with pytest.raises(RecipeError, match=r"'train.activation_checkpointing': 'all' is not allowed; allowed: 'none', "
                                          r"'blocks' or 'every_k'"):
        tiny_recipe("train.activation_checkpointing=all")
    with pytest.raises(RecipeError, match=r"'train.activation_checkpointing_every': 0 is not allowed"):
        tiny_recipe("train.activation_checkpointing_every=0")
