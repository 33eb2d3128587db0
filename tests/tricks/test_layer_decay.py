"""Layer-wise LR decay from a recipe."""

from __future__ import annotations

import pytest
import torch

from .helpers import group_of, tiny_run


def test_layer_decay_by_block():
    trainer, ctx, recipe = tiny_run("tricks.layer_decay.enabled=true", "tricks.layer_decay.decay=0.5",
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
    groups = group_of(trainer.optimizer)
    for name, p in model.named_parameters():
        block = ".".join(name.split(".")[:2]) if name.startswith("features.") else name.split(".")[0]
        assert groups[id(p)]["lr"] == pytest.approx(0.1 * 0.5 ** (top - blocks.index(block))), name
    trainer.fit()
    assert all(not torch.equal(p, before[n]) for n, p in model.named_parameters())
