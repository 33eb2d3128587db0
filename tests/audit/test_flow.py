"""The flow model the rules query: events in execution order, loops and nesting, guards, contexts,
roles, accumulation shapes, helper summaries."""

import ast
import textwrap

from trickbag.audit._flow import BACKWARD, CALL, EVAL, SCHED, STEP, TRAIN, ZERO, FileModel, guard_is_accum


def model(src: str) -> FileModel:
    return FileModel(ast.parse(textwrap.dedent(src)))


def fn(fmodel: FileModel, name: str):
    return next(f for f in fmodel.functions if f.name == name)


def test_events_in_execution_order_with_loops_and_guards():
    fm = model("""
    def train(model, loader, optimizer, scheduler, scaler, k):
        for epoch in range(3):
            for i, (x, y) in enumerate(loader):
                scaler.scale(loss_fn(model(x), y) / k).backward()
                if (i + 1) % k == 0:
                    scaler.step(optimizer)
                    scaler.update()
                    optimizer.zero_grad()
            scheduler.step()
    """)
    f = fn(fm, "train")
    assert [e.kind for e in f.events] == ["forward", "scale", BACKWARD, STEP, "scaler_update", ZERO, SCHED]
    outer, inner = f.loops
    assert inner.parent is outer and inner.depth == 2
    step = f.kind_events(STEP)[0]
    assert step.recv == "optimizer" and step.extra["scaler"] == "scaler"
    assert [g.accum for g in step.guards] == [True] and step.loops == (outer, inner)
    assert f.kind_events(SCHED)[0].loops == (outer,)


def test_guarded_accumulation_and_its_micro_batches():
    fm = model("""
    for i, batch in enumerate(loader):
        optimizer.zero_grad()
        loss = model(batch).loss / accum
        loss.backward()
        if (i + 1) % accum == 0:
            optimizer.step()
            lr_scheduler.step()
    """)
    f = fm.module
    acc = f.accumulation(f.loops[0])
    assert acc is not None and acc.inner is None and acc.counter == {"accum"}
    micro = {e.kind for e in f.events if acc.is_micro(e)}
    assert micro == {ZERO, BACKWARD, "forward"}


def test_nested_accumulation_shape():
    fm = model("""
    for step in range(n):
        for micro in range(grad_accum):
            model(x).loss.backward()
        optimizer.step()
    """)
    acc = fm.module.accumulation(fm.module.loops[0])
    assert acc is not None and acc.inner is fm.module.loops[1] and acc.counter == {"grad_accum"}


def test_gan_with_n_critic_is_not_accumulation():
    fm = model("""
    for i, real in enumerate(loader):
        d_opt.zero_grad(); d_loss.backward(); d_opt.step()
        if i % n_critic == 0:
            g_opt.zero_grad(); g_loss.backward(); g_opt.step()
    """)
    assert fm.module.accumulation(fm.module.loops[0]) is None


def test_continue_makes_the_rest_of_the_body_the_update_branch():
    fm = model("""
    for i, (x, y) in enumerate(loader):
        (crit(model(x), y) / k).backward()
        if (i + 1) % k:
            continue
        opt.step()
        opt.zero_grad()
    """)
    acc = fm.module.accumulation(fm.module.loops[0])
    assert acc is not None
    assert not acc.is_micro(fm.module.kind_events(ZERO)[0])


def test_guard_recognition():
    def accum(test: str) -> bool:
        return guard_is_accum(ast.parse(test, mode="eval").body)

    assert accum("(i + 1) % k == 0") and accum("step % accum == accum - 1") and accum("accelerator.sync_gradients")
    assert accum("accum_count == accum_steps") and accum("not (it + 1) % 8")
    assert not accum("step % log_every == 0") and not accum("epoch > 0") and not accum("i % eval_interval == 0")


def test_roles_from_constructors_names_annotations_and_class_attributes():
    fm = model("""
    import torch
    from torch.cuda.amp import GradScaler
    class T:
        def __init__(self, net):
            self.adam = torch.optim.Adam(net.parameters())
            self.warm = torch.optim.lr_scheduler.LinearLR(self.adam)
        def go(self, o: torch.optim.Optimizer):
            s = GradScaler()
            self.adam.step(); self.warm.step(); o.step(); s.update(); opt_g.step()
    """)
    f = fn(fm, "go")
    assert f.role("self.adam") == "optimizer" and f.role("self.warm") == "scheduler"
    assert f.role("o") == "optimizer" and f.role("s") == "scaler" and f.role("opt_g") == "optimizer"
    assert [e.kind for e in f.events] == [STEP, SCHED, STEP, "scaler_update", STEP]


def test_contexts_and_decorators():
    fm = model("""
    @torch.inference_mode()
    def evaluate(model, x):
        return model(x)
    def train(model, x):
        with torch.autocast("cuda"):
            y = model(x)
        with torch.no_grad(), model.no_sync():
            model(x).sum().backward()
    """)
    assert fn(fm, "evaluate").grad_disabled and fn(fm, "evaluate").events[0].grad_disabled
    fwd, fwd2, back = fn(fm, "train").events[0], fn(fm, "train").events[1], fn(fm, "train").events[2]
    assert fwd.in_context("autocast") is not None and not fwd.grad_disabled
    assert fwd2.grad_disabled and back.in_context("no_sync") is not None


def test_helper_calls_carry_summaries():
    fm = model("""
    def train_one_epoch(model, loader, opt):
        model.train()
        for x in loader:
            opt.zero_grad(); model(x).sum().backward(); opt.step()
    def validate(model):
        model.eval()
    def fit(model, loader, opt):
        for epoch in range(3):
            train_one_epoch(model, loader, opt)
            validate(model)
    """)
    calls = fn(fm, "fit").kind_events(CALL)
    assert {STEP, BACKWARD, TRAIN} <= calls[0].kinds() and EVAL in calls[1].kinds()
    assert fm.summary(fn(fm, "validate")).last_mode.kind == EVAL
    assert fn(fm, "validate").call_sites() == [calls[1]]
