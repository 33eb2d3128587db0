"""TB411 scheduler-not-checkpointed: a resumable checkpoint with the optimizer's state but not the LR scheduler's
(nerfstudio's PR 2203 is this kind).  The behaviour the rule describes is checked on torch's own scheduler first: a
scheduler rebuilt on resume starts its schedule again unless its state_dict is loaded."""

from __future__ import annotations

import torch

from tests.audit.helpers import found

TRAIN = """
    import torch

    def main(args, model, loader):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        scheduler = torch.optim.lr_scheduler.{sched}
        start = 0
        if args.resume:
            ckpt = torch.load(args.resume)
            model.load_state_dict(ckpt["model"])
            optimizer.load_state_dict(ckpt["optimizer"])
            {restore}
            start = ckpt["epoch"] + 1
        for epoch in range(start, args.epochs):
            for x, y in loader:
                loss = model(x, y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            scheduler.step({arg})
            torch.save({{"epoch": epoch, "model": model.state_dict(), "optimizer": optimizer.state_dict(){extra}}},
                       "last.pt")
"""


def _src(sched="StepLR(optimizer, step_size=10)", restore="pass", arg="", extra=""):
    return TRAIN.format(sched=sched, restore=restore, arg=arg, extra=extra)


def test_a_rebuilt_scheduler_restarts_its_schedule():
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.1)
    for _ in range(3):
        opt.step()
        sched.step()
    state = (opt.state_dict(), sched.state_dict())
    opt2 = torch.optim.SGD([p], lr=0.1)
    sched2 = torch.optim.lr_scheduler.StepLR(opt2, step_size=2, gamma=0.1)
    opt2.load_state_dict(state[0])
    assert opt2.param_groups[0]["lr"] != 0.1 and sched2.last_epoch == 0  # the position is lost
    sched2.load_state_dict(state[1])
    assert sched2.last_epoch == 3


def test_reported_at_the_save_without_the_scheduler():
    assert found(_src(), "TB411") == [21]
    named = _src().replace('torch.save({"epoch"', 'state = {"epoch"').replace(
        '"optimizer": optimizer.state_dict()},\n                       "last.pt")',
        '"optimizer": optimizer.state_dict()}\n            torch.save(state, "last.pt")')
    assert found(named, "TB411") == [22]


def test_scheduler_saved_restored_or_positioned_is_silent():
    assert found(_src(extra=', "scheduler": scheduler.state_dict()',
                      restore='scheduler.load_state_dict(ckpt["scheduler"])'), "TB411", show_all=True) == []
    assert found(_src(sched="StepLR(optimizer, step_size=10, last_epoch=args.start_epoch - 1)"), "TB411",
                 show_all=True) == []
    assert found(_src(arg="epoch"), "TB411", show_all=True) == []
    assert found(_src(restore="scheduler.last_epoch = ckpt['epoch']"), "TB411", show_all=True) == []


def test_a_checkpoint_that_is_never_resumed_is_silent():
    no_resume = _src().replace('optimizer.load_state_dict(ckpt["optimizer"])', "pass")
    assert found(no_resume, "TB411", show_all=True) == []


def test_a_catch_up_loop_or_a_positioned_build_is_silent():
    catch_up = _src(restore="for _ in range(ckpt['epoch'] + 1):\n                scheduler.step()")
    assert found(catch_up, "TB411", show_all=True) == []
    built = _src().replace("scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10)",
                           "optimizer, scheduler = configure_optimizers(model, args.start_epoch - 1)")
    assert found(built, "TB411", show_all=True) == []
    fractional = _src(arg="epoch - 1 + i / len(loader)")
    assert found(fractional, "TB411", show_all=True) == []
