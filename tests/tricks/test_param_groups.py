"""Parameter groups from a recipe."""

from __future__ import annotations

import fnmatch
import math

import pytest
import torch

from .helpers import Hook, group_of, tiny_run


def test_param_groups_no_decay_and_lr_scale_follow_the_rules_through_training():
    seen = []
    hook = Hook(batch_start=lambda s: seen.append({id(p): g["lr"] for g in s.optimizer.param_groups
                                                   for p in g["params"]}))
    trainer, ctx, recipe = tiny_run("tricks.param_groups.enabled=true", "tricks.param_groups.lr_scale={'head.*': 10}",
                                    "optim.weight_decay=0.01", hook=hook)
    model = trainer.model
    norm_params = {id(p) for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d) for p in m.parameters()}
    groups = group_of(trainer.optimizer)
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
