"""TB409 wrapped-checkpoint-unloadable: a DDP / DataParallel / compiled model's state_dict saved by a function that
restores checkpoints into the plain model before wrapping it (real mistake 212; MONAI's SwinUNETR pre-training has
the same shape).  The wrong shapes reported at the saved ``state_dict()``, the right ones silent with ``--all``."""

from __future__ import annotations

from tests.audit.helpers import found

TRAIN = """
    import torch
    from torch.nn.parallel import DistributedDataParallel

    def train(args, model, loader, optimizer):
        if args.restart_from:
            model.load_state_dict(torch.load(args.restart_from))
        if args.distributed:
            model = {wrap}
        for epoch in range(args.epochs):
            train_one_epoch(model, loader, optimizer)
            {save}
"""
SAVE = "torch.save(model.state_dict(), f'checkpoint-{{epoch}}.pt')"


def test_the_wrapper_saved_where_the_plain_model_is_restored():
    for wrap in ["DistributedDataParallel(model, device_ids=[args.local_rank])", "torch.nn.DataParallel(model)",
                 "torch.compile(model)"]:
        assert found(TRAIN.format(wrap=wrap, save=SAVE), "TB409") == [12], wrap


def test_the_plain_model_saved():
    right = TRAIN.format(wrap="DistributedDataParallel(model)",
                         save="torch.save(model.module.state_dict(), f'checkpoint-{{epoch}}.pt')")
    assert found(right, "TB409", show_all=True) == []
    branch = TRAIN.format(wrap="DistributedDataParallel(model)", save=(
        "if args.distributed:\n                torch.save(model.module.state_dict(), 'c.pt')\n"
        "            else:\n                torch.save(model.state_dict(), 'c.pt')"))
    assert found(branch, "TB409", show_all=True) == []


def test_no_restore_before_the_wrap_or_the_prefix_handled():
    no_restore = TRAIN.format(wrap="DistributedDataParallel(model)", save=SAVE).replace(
        "model.load_state_dict(torch.load(args.restart_from))", "pass")
    assert found(no_restore, "TB409", show_all=True) == []
    stripped = TRAIN.format(wrap="DistributedDataParallel(model)", save=SAVE).replace(
        "model.load_state_dict(torch.load(args.restart_from))",
        "model.load_state_dict({k.replace('module.', ''): v for k, v in torch.load(args.restart_from).items()})")
    assert found(stripped, "TB409", show_all=True) == []
