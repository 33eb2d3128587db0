"""Freeze from a recipe."""

from __future__ import annotations

import pytest
import torch

from trickbag.errors import RecipeError

from .helpers import Hook, group_of, tiny_run


@pytest.mark.parametrize("bn_stats", [True, False])
def test_freeze_keeps_weights_out_of_the_optimizer_and_unchanged(bn_stats):
    bn_modes = []
    hook = Hook(batch_start=lambda s: bn_modes.append(
        [m.training for m in s.model.features.modules() if isinstance(m, torch.nn.BatchNorm2d)]))
    trainer, ctx, _ = tiny_run("tricks.freeze.enabled=true", "tricks.freeze.allow_untrained=true",
                               "tricks.freeze.patterns=[features.*]", f"tricks.freeze.bn_stats={str(bn_stats).lower()}",
                               hook=hook)
    model = trainer.model
    before = {k: v.clone() for k, v in model.state_dict().items()}
    frozen = [p for n, p in model.named_parameters() if n.startswith("features.")]
    assert frozen and all(not p.requires_grad for p in frozen)
    in_opt = set(group_of(trainer.optimizer))
    assert in_opt == {id(p) for n, p in model.named_parameters() if not n.startswith("features.")}
    trainer.fit()
    after = model.state_dict()
    for k in before:
        if k.startswith("features.") and ("running" not in k and "num_batches" not in k):
            assert torch.equal(after[k], before[k]), k  # frozen weights never move
    assert not torch.equal(after["head.weight"], before["head.weight"])
    stats_same = all(torch.equal(after[k], before[k]) for k in before if k.startswith("features.") and "running" in k)
    # bn_stats=true: frozen BatchNorm layers stay in eval mode, their statistics fixed; false: they keep updating
    assert stats_same is bn_stats
    assert all(not any(modes) for modes in bn_modes) is bn_stats


def test_freeze_pattern_typo_is_a_recipe_error():
    with pytest.raises(RecipeError, match=r"tricks.freeze.patterns: .*'featurs\.\*' matches no parameter name"):
        tiny_run("tricks.freeze.enabled=true", "tricks.freeze.patterns=[featurs.*]")
    with pytest.raises(RecipeError, match="freezes every parameter"):
        tiny_run("tricks.freeze.enabled=true", "tricks.freeze.patterns=['*']")
    with pytest.raises(RecipeError, match="unfreeze_epoch=1 is not before the end of training.*a 1-epoch run"):
        tiny_run("tricks.freeze.enabled=true", "tricks.freeze.patterns=[features.*]", "tricks.freeze.unfreeze_epoch=1")
    with pytest.raises(RecipeError, match=r"unfreeze_epoch=5 .*\(train.epochs=3\); use an epoch in \[1, 2\]"):
        tiny_run("tricks.freeze.enabled=true", "tricks.freeze.patterns=[features.*]", "tricks.freeze.unfreeze_epoch=5",
                 "train.epochs=3")


def test_freezing_weights_that_were_not_loaded_is_refused_unless_allowed(tmp_path):
    """A frozen random backbone never trains (the run sits at chance): one line, unless explicitly allowed."""
    freeze = ["tricks.freeze.enabled=true", "tricks.freeze.patterns=[features.*]"]
    # features.*: 4 conv-BN blocks x (conv weight, BN weight, BN bias) = 12 tensors
    with pytest.raises(RecipeError, match=r"would freeze 12 tensors that keep their random initialisation"):
        tiny_run(*freeze)
    tiny_run(*freeze, "tricks.freeze.allow_untrained=true")  # allowed on purpose
    # weights for the head only: the backbone was not loaded, so freezing it is refused too
    trainer, ctx, _ = tiny_run()
    head = {k: v for k, v in ctx.model.state_dict().items() if k.startswith("head.")}
    import torch

    torch.save(head, tmp_path / "head.pt")
    with pytest.raises(RecipeError, match="were not loaded from model.weights"):
        tiny_run(*freeze, f"model.weights={tmp_path / 'head.pt'}")
    torch.save(ctx.model.state_dict(), tmp_path / "all.pt")
    trainer, ctx, _ = tiny_run(*freeze, f"model.weights={tmp_path / 'all.pt'}")
    assert ctx.weights_report.loaded and not ctx.weights_report.missing
    assert any(n.startswith("model.weights: loaded") for n in ctx.notes)
