"""Tuning on the rest of round 14's lessons (benchmarks/lint_corpus/heldout_round14.md, "Next"): TB112 on a lazy
regularisation pass, TB108 on a running mean of scalars named like an EMA; the true shapes still reported."""

from __future__ import annotations

from tests.audit.helpers import found

LAZY_REG = """
    import torch

    def train_d(D, loader, d_opt, scaler, reg_every):
        for step, real in enumerate(loader):
            d_opt.zero_grad()
            with torch.autocast("cuda"):
                loss = D(real).mean()
            scaler.scale(loss).backward()
            scaler.step(d_opt)
            scaler.update()
            if step % reg_every == 0:
                {zero}
                real.requires_grad_(True)
                r1 = torch.autograd.grad(D(real).sum(), real, create_graph=True)[0].pow(2).mean()
                r1.backward()
                d_opt.step()
"""


def test_tb112_lazy_regularisation_pass_is_a_new_update():
    """StyleGAN2's lazy R1 pass: zero_grad, an unscaled penalty's backward, a plain step: new gradients, not the
    scaler's step taken twice: silent."""
    assert found(LAZY_REG.format(zero="d_opt.zero_grad()"), "TB112") == []


def test_tb112_plain_step_after_scaler_step_on_the_same_gradients_still_reported():
    """Without the zero_grad the plain step adds the penalty's gradients to the ones the scaler already applied
    and steps again on them: reported on the plain step."""
    assert found(LAZY_REG.format(zero="pass"), "TB112") == [17]


def test_tb112_zeroing_another_optimizer_does_not_make_the_gradients_fresh():
    assert found(LAZY_REG.format(zero="g_opt.zero_grad()"), "TB112") == [17]


EMA_LOOP = """
    def train(model, loader, opt, ema, loss_fn, accum):
        for i, (x, y) in enumerate(loader):
            out = model(x)
            loss = loss_fn(out, y) / accum
            loss.backward()
            {update}
            if (i + 1) % accum == 0:
                opt.step()
                opt.zero_grad()
"""


def test_tb108_running_mean_of_scalars_is_no_weight_average():
    """LeCam regularisation's anchors (``lecam_ema.update(out.mean().item(), "D_real", step)``): numbers, not
    weights, updated per micro-batch on purpose: silent."""
    assert found(EMA_LOOP.format(update='ema.update(out.mean().item(), "D_real", i)'), "TB108") == []
    assert found(EMA_LOOP.format(update="ema.update(float(loss))"), "TB108") == []


def test_tb108_weight_average_per_micro_batch_still_reported():
    assert found(EMA_LOOP.format(update="ema.update(model)"), "TB108") == [7]


COND_NO_GRAD = """
    import contextlib
    import torch

    def train(model, loader, val_loader, opt, loss_fn, needs_grad):
        for x, y in loader:
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
        model.eval()
        {ctx}
            for x, y in val_loader:
                print(loss_fn(model(x), y).item())
"""


def test_tb203_conditional_no_grad_context_counts_as_no_grad():
    """``with torch.no_grad() if not needs_grad else contextlib.nullcontext():`` turns gradients off unless the
    author asks for them: silent."""
    ctx = "with torch.no_grad() if not needs_grad else contextlib.nullcontext():"
    assert found(COND_NO_GRAD.format(ctx=ctx), "TB203") == []


def test_tb203_evaluation_with_gradients_still_reported():
    assert found(COND_NO_GRAD.format(ctx="with contextlib.nullcontext():"), "TB203") != []
