"""Multi-scale / FixRes from a recipe."""

from __future__ import annotations

import pytest
import torch

from trickbag.errors import RecipeError

from .helpers import tiny_run


def test_multiscale_trains_at_the_train_sizes_then_finetunes_and_evaluates_at_the_test_size():
    sizes = []

    def record(module, args):
        sizes.append((module.training, tuple(args[0].shape[-2:])))

    trainer, ctx, recipe = tiny_run("tricks.multiscale.enabled=true", "tricks.multiscale.train_sizes=[6, 10]",
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
    from trickbag.tricks.multiscale import MultiscalePlugin

    plugin = next(p for p in trainer.plugins if isinstance(p, MultiscalePlugin))
    state.batch, state.epoch, state.batch_idx = (x, torch.zeros(2, dtype=torch.long)), 1, 0
    plugin.on_batch_start(state)
    torch.testing.assert_close(state.batch[0], ref)


def test_multiscale_and_channels_last_refuse_non_image_data():
    for trick in (["tricks.multiscale.enabled=true", "tricks.multiscale.train_sizes=[8]"],
                  ["tricks.channels_last.enabled=true"]):
        with pytest.raises(RecipeError, match=r"works on images \[C, H, W\]"):
            tiny_run(*trick, "data.shape=[1, 16]", "model.name=mlp", "model.kwargs={}")


def test_fractions_of_the_test_size_follow_the_data_size():
    # a fraction f is round(f * test side): the built-in fine-tuning recipe's 0.785 trains below the test size at
    # any data.image_size (an absolute 176 made 64-px images train upsampled at 176 and evaluate at 64)
    trainer, ctx, recipe = tiny_run("tricks.multiscale.enabled=true", "tricks.multiscale.train_sizes=[0.5, 0.75]",
                                    "tricks.multiscale.finetune_epochs=0")
    plugin = next(p for p in trainer.plugins if p.name == "multiscale")
    side = ctx.data.train[0][0].shape[-1]
    assert plugin.train_sizes == [round(0.5 * side), round(0.75 * side)]
    assert all(plugin.size_for(0, b)[0] < side for b in range(8))


@pytest.mark.parametrize("bad", ["[0]", "[2]", "[4.5]", "[-0.5]"])
def test_a_size_that_is_neither_pixels_nor_a_fraction_is_refused(bad):
    from trickbag.recipe import load_recipe

    with pytest.raises(RecipeError, match="neither a size in pixels"):
        load_recipe("digits", ["tricks.multiscale.enabled=true", f"tricks.multiscale.train_sizes={bad}"])
