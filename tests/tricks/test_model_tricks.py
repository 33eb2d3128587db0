"""Model tricks from a recipe: freeze, parameter groups, layer-wise LR decay, multi-scale / FixRes, channels-last.

(torch.compile is tested with its checkpoint-key rule in test_interactions_b.py.)
"""

from __future__ import annotations

import fnmatch
import math

import pytest
import torch

from trickbag.errors import RecipeError

from _tiny import Hook, build_run, tiny_base

BASE = tiny_base(epochs=1)


def _run(*overrides, hook=None):
    return build_run(BASE, *overrides, hook=hook)


def _group_of(optimizer):
    """id(param) -> its param group."""
    return {id(p): g for g in optimizer.param_groups for p in g["params"]}


# --------------------------------------------------------------------------- freeze
@pytest.mark.parametrize("bn_stats", [True, False])
def test_freeze_keeps_weights_out_of_the_optimizer_and_unchanged(bn_stats):
    bn_modes = []
    hook = Hook(batch_start=lambda s: bn_modes.append(
        [m.training for m in s.model.features.modules() if isinstance(m, torch.nn.BatchNorm2d)]))
    trainer, ctx, _ = _run("tricks.freeze.enabled=true", "tricks.freeze.patterns=[features.*]",
                           f"tricks.freeze.bn_stats={str(bn_stats).lower()}", hook=hook)
    model = trainer.model
    before = {k: v.clone() for k, v in model.state_dict().items()}
    frozen = [p for n, p in model.named_parameters() if n.startswith("features.")]
    assert frozen and all(not p.requires_grad for p in frozen)
    in_opt = set(_group_of(trainer.optimizer))
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
        _run("tricks.freeze.enabled=true", "tricks.freeze.patterns=[featurs.*]")
    with pytest.raises(RecipeError, match="freezes every parameter"):
        _run("tricks.freeze.enabled=true", "tricks.freeze.patterns=['*']")
    with pytest.raises(RecipeError, match="unfreeze_epoch=1 is not before the end of training.*a 1-epoch run"):
        _run("tricks.freeze.enabled=true", "tricks.freeze.patterns=[features.*]", "tricks.freeze.unfreeze_epoch=1")
    with pytest.raises(RecipeError, match=r"unfreeze_epoch=5 .*\(train.epochs=3\); use an epoch in \[1, 2\]"):
        _run("tricks.freeze.enabled=true", "tricks.freeze.patterns=[features.*]", "tricks.freeze.unfreeze_epoch=5",
             "train.epochs=3")


# --------------------------------------------------------------------------- parameter groups / layer decay
def test_param_groups_no_decay_and_lr_scale_follow_the_rules_through_training():
    seen = []
    hook = Hook(batch_start=lambda s: seen.append({id(p): g["lr"] for g in s.optimizer.param_groups
                                                   for p in g["params"]}))
    trainer, ctx, recipe = _run("tricks.param_groups.enabled=true", "tricks.param_groups.lr_scale={'head.*': 10}",
                                "optim.weight_decay=0.01", hook=hook)
    model = trainer.model
    norm_params = {id(p) for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d) for p in m.parameters()}
    groups = _group_of(trainer.optimizer)
    assert set(groups) == {id(p) for p in model.parameters()}
    for name, p in model.named_parameters():
        no_decay = p.ndim <= 1 or name.endswith(".bias") or id(p) in norm_params
        assert groups[id(p)]["weight_decay"] == (0.0 if no_decay else 0.01), name
    state = trainer.fit()
    total = state.step
    for t, lrs in enumerate(seen):  # cosine from the scaled base LR, every update
        factor = (1 + math.cos(math.pi * t / total)) / 2
        for name, p in model.named_parameters():
            scale = 10.0 if fnmatch.fnmatchcase(name, "head.*") else 1.0
            assert lrs[id(p)] == pytest.approx(0.1 * scale * factor, rel=1e-6), (t, name)


def test_layer_decay_by_block():
    trainer, ctx, recipe = _run("tricks.layer_decay.enabled=true", "tricks.layer_decay.decay=0.5",
                                "tricks.layer_decay.depth=2", "schedule.name=constant")
    model = trainer.model
    blocks = []  # naive: module path cut to two names, numbered in order of first appearance
    for name, _ in model.named_parameters():
        block = ".".join(name.split(".")[:2]) if name.startswith("features.") else name.split(".")[0]
        if block not in blocks:
            blocks.append(block)
    assert blocks == ["features.0", "features.1", "features.3", "features.4", "head"]
    top = len(blocks) - 1
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    groups = _group_of(trainer.optimizer)
    for name, p in model.named_parameters():
        block = ".".join(name.split(".")[:2]) if name.startswith("features.") else name.split(".")[0]
        assert groups[id(p)]["lr"] == pytest.approx(0.1 * 0.5 ** (top - blocks.index(block))), name
    trainer.fit()
    assert all(not torch.equal(p, before[n]) for n, p in model.named_parameters())


# --------------------------------------------------------------------------- multi-scale / FixRes
def test_multiscale_trains_at_the_train_sizes_then_finetunes_and_evaluates_at_the_test_size():
    sizes = []

    def record(module, args):
        sizes.append((module.training, tuple(args[0].shape[-2:])))

    trainer, ctx, recipe = _run("tricks.multiscale.enabled=true", "tricks.multiscale.train_sizes=[6, 10]",
                                "tricks.multiscale.test_size=12", "tricks.multiscale.finetune_epochs=1",
                                "train.epochs=2")
    per_epoch = len(ctx.train_loader)
    trainer.model.register_forward_pre_hook(record)
    state = trainer.fit()
    train_sizes = [s for training, s in sizes if training]
    assert len(train_sizes) == 2 * per_epoch
    assert set(train_sizes[:per_epoch]) <= {(6, 6), (10, 10)}
    assert set(train_sizes[per_epoch:]) == {(12, 12)}  # FixRes fine-tuning epoch
    assert {s for training, s in sizes if not training} == {(12, 12)}  # evaluation at the test size
    assert state.predict is None  # the evaluation wrapper is removed after evaluation
    # the resized batch is what the loss saw: bilinear resize of the original batch (torch's own op)
    x = torch.randn(2, 1, 8, 8)
    ref = torch.nn.functional.interpolate(x, size=(12, 12), mode="bilinear", align_corners=False, antialias=True)
    from trickbag.train.tricks.model_tricks import MultiscalePlugin

    plugin = next(p for p in trainer.plugins if isinstance(p, MultiscalePlugin))
    state.batch, state.epoch, state.batch_idx = (x, torch.zeros(2, dtype=torch.long)), 1, 0
    plugin.on_batch_start(state)
    torch.testing.assert_close(state.batch[0], ref)


def test_multiscale_and_channels_last_refuse_non_image_data():
    for trick in (["tricks.multiscale.enabled=true", "tricks.multiscale.train_sizes=[8]"],
                  ["tricks.channels_last.enabled=true"]):
        with pytest.raises(RecipeError, match=r"works on image batches \[N, C, H, W\]"):
            _run(*trick, "data.shape=[1, 16]", "model.name=mlp", "model.kwargs={}")


# --------------------------------------------------------------------------- channels-last
def test_channels_last_model_and_batches():
    formats = []

    def record(module, args):
        formats.append((module.training, args[0].is_contiguous(memory_format=torch.channels_last)))

    trainer, ctx, _ = _run("tricks.channels_last.enabled=true")
    convs = [m for m in trainer.model.modules() if isinstance(m, torch.nn.Conv2d)]
    assert convs and all(m.weight.is_contiguous(memory_format=torch.channels_last) for m in convs)
    assert not all(m.weight.is_contiguous() for m in convs)  # really NHWC, not a 1x1 corner case
    trainer.model.register_forward_pre_hook(record)
    trainer.fit()
    assert {training for training, _ in formats} == {True, False}
    assert all(cl for _, cl in formats)
