"""TB306 plateau-mode-mismatch: ReduceLROnPlateau built for the other direction than the metric it is stepped with
(round 27's mistake 253; DIG's GraphAug runner steps a mode='min' scheduler with the validation accuracy).
Reference: torch's own scheduler cuts the LR while a loss improves in mode 'max'."""

from __future__ import annotations

import torch

from tests.audit.helpers import found

LOOP = """
    from torch.optim.lr_scheduler import ReduceLROnPlateau

    def fit(model, optimizer, epochs):
        scheduler = ReduceLROnPlateau(optimizer, {mode}patience=2)
        for epoch in range(epochs):
            train_one_epoch(model, optimizer)
            val_loss, val_acc = evaluate(model)
            scheduler.step({value})
"""


def test_mode_max_cuts_the_lr_while_the_loss_improves():
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, "max", patience=2)
    for loss in [1.0, 0.9, 0.8, 0.7, 0.6, 0.5]:
        sched.step(loss)
    assert opt.param_groups[0]["lr"] < 1.0  # the loss fell every epoch, and the LR was cut


def test_reported_at_the_mode():
    assert found(LOOP.format(mode="'max', ", value="val_loss"), "TB306") == [5]
    assert found(LOOP.format(mode="mode='max', ", value="val_loss"), "TB306") == [5]
    assert found(LOOP.format(mode="", value="val_acc"), "TB306") == [5]  # the default 'min' with an accuracy
    assert found(LOOP.format(mode="", value="metrics['accuracy']"), "TB306") == [5]


def test_matching_flipped_or_unknown_metrics_are_silent():
    for mode, value in [("'min', ", "val_loss"), ("'max', ", "val_acc"), ("", "val_loss"), ("'max', ", "-val_loss"),
                        ("", "1 - val_acc"), ("'max', ", "metric"), ("mode=args.mode, ", "val_loss")]:
        assert found(LOOP.format(mode=mode, value=value), "TB306", show_all=True) == [], (mode, value)


def test_one_name_built_in_two_modes_is_silent():
    branches = LOOP.format(mode="'max', ", value="val_loss").replace(
        "        scheduler = ReduceLROnPlateau(optimizer, 'max', patience=2)\n",
        "        if by_loss:\n            scheduler = ReduceLROnPlateau(optimizer, 'min')\n"
        "        else:\n            scheduler = ReduceLROnPlateau(optimizer, 'max')\n")
    assert found(branches, "TB306", show_all=True) == []
