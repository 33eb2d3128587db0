"""Channels-last from a recipe."""

from __future__ import annotations

import torch

from .helpers import tiny_run


def test_channels_last_model_and_batches():
    formats = []

    def record(module, args):
        formats.append((module.training, args[0].is_contiguous(memory_format=torch.channels_last)))

    trainer, ctx, _ = tiny_run("tricks.channels_last.enabled=true")
    convs = [m for m in trainer.model.modules() if isinstance(m, torch.nn.Conv2d)]
    assert convs and all(m.weight.is_contiguous(memory_format=torch.channels_last) for m in convs)
    assert not all(m.weight.is_contiguous() for m in convs)  # really NHWC, not a 1x1 corner case
    trainer.model.register_forward_pre_hook(record)
    trainer.fit()
    assert {training for training, _ in formats} == {True, False}
    assert all(cl for _, cl in formats)
