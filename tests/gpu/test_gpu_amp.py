"""Mixed precision on CUDA through the Trainer and the recipe path: fp16 autocast + GradScaler against a hand
loop with torch's own GradScaler, forced overflows (no optimizer, schedule or EMA step), bf16 and fp16
against an fp32 CPU run, SAM's closure path against SAM written out in the test, and what the code says
about SAM with fp16."""

from __future__ import annotations

import contextlib

import pytest
import torch
import torch.nn.functional as F

from trickbag import runtime
from trickbag.errors import TrickbagError
from trickbag.optim import SAM
from trickbag.recipe import load_recipe
from trickbag.train.build import build
from trickbag.train.trainer import Trainer
from trickbag.tricks.ema import EMAPlugin

from .helpers import (
    CUDA_ONLY,
    FAKE,
    Hook,
    ScaleLossAt,
    StepLog,
    batches,
    fresh_net,
    relative_update_error,
    weights,
)

pytestmark = CUDA_ONLY


def _sgd_and_schedule(model, steps: int):
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    return opt, torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)


def _hand_fp16(model, data, overflow_at: int) -> tuple[float, int, int]:
    """The loop torch's AMP recipe shows: (final scale, skipped steps, schedule steps)."""
    model.cuda().train()
    opt, sched = _sgd_and_schedule(model, len(data))
    scaler = torch.amp.GradScaler("cuda")
    skipped = 0
    for i, (x, y) in enumerate(data):
        x, y = x.cuda(), y.cuda()
        with torch.autocast("cuda", dtype=torch.float16):
            loss = F.cross_entropy(model(x), y)
            if i == overflow_at:
                loss = loss * 1e5
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        before = scaler.get_scale()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        if scaler.get_scale() < before:
            skipped += 1
        else:
            sched.step()
    return scaler.get_scale(), skipped, sched.last_epoch


def test_fp16_trainer_matches_torchs_grad_scaler_loop_and_an_overflowed_step_changes_nothing():
    runtime.configure_determinism(True)  # the same kernels in both loops (the conftest switches it back)
    data = batches(n=96, bs=16)
    ref_model = fresh_net()
    ref_scale, ref_skipped, ref_sched = _hand_fp16(ref_model, data, overflow_at=2)
    assert ref_skipped == 1  # the injected overflow really overflows fp16 (else this test proves nothing)

    model = fresh_net()
    opt, sched = _sgd_and_schedule(model, len(data))
    log, dtypes = StepLog(), []
    t = Trainer(model, opt, data, scheduler=sched, precision="16", device="cuda",
                plugins=[ScaleLossAt(2), Hook(loss=lambda s: dtypes.append(s.output.dtype)), log])
    assert t.state.scaler.is_enabled()
    t.fit()
    assert set(dtypes) == {torch.float16}  # autocast ran the forward in fp16 on the GPU
    assert (t.state.skipped_steps, t.state.step) == (1, len(data) - 1)
    assert sched.last_epoch == ref_sched == len(data) - 1  # the skipped update did not move the schedule
    assert t.state.scaler.get_scale() == ref_scale == 2.0**15  # halved once, as torch's own loop
    skipped = [i for i, row in enumerate(log.rows) if row[1]]
    assert skipped == [2]
    before, after = log.rows[1], log.rows[2]
    assert torch.equal(before[3], after[3]) and before[2] == after[2]  # weights and LR untouched
    torch.testing.assert_close(weights(model), weights(ref_model), rtol=1e-5, atol=1e-6)


def test_fp16_recipe_with_ema_an_overflow_advances_neither_schedule_nor_ema():
    recipe = load_recipe("digits", [*FAKE, "train.precision=16", "train.epochs=2", "tricks.ema.enabled=true",
                                    "tricks.ema.warmup=false", "tricks.ema.decay=0.9"])
    trainer, ctx = build(recipe)
    ema = next(p for p in trainer.plugins if isinstance(p, EMAPlugin)).ema
    ema_log: list[tuple[bool, torch.Tensor]] = []
    trainer.add_plugin(ScaleLossAt(1))  # finite loss, fp16 gradients overflow: micro-batch 1 of every epoch
    trainer.add_plugin(Hook(step=lambda s: ema_log.append(
        (s.step_skipped, torch.cat([p.detach().flatten().cpu() for p in ema.module.parameters()])))))
    trainer.fit()
    s = trainer.state
    per_epoch = len(ctx.train_loader)
    assert s.skipped_steps == 2 and s.step == 2 * per_epoch - 2
    assert ctx.scheduler.last_epoch == s.step
    assert ema.num_updates == s.step and ema.num_averages == s.step
    assert s.scaler.get_scale() == 2.0**14  # torch's default 2**16, halved by each of the two overflows
    for i, (was_skipped, shadow) in enumerate(ema_log):
        if was_skipped:
            assert i > 0 and torch.equal(shadow, ema_log[i - 1][1]), f"EMA moved at skipped update {i}"
    assert sum(skip for skip, _ in ema_log) == 2


def _train_on(device: str, precision: str, data) -> tuple[dict, dict, list]:
    model = fresh_net()
    start = weights(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    dtypes: list[torch.dtype] = []
    Trainer(model, opt, data, precision=precision, device=device,
            plugins=[Hook(loss=lambda s: dtypes.append(s.output.dtype))]).fit()
    return start, weights(model), dtypes


@pytest.mark.parametrize("precision,dtype,tolerance", [("32", torch.float32, 1e-4), ("bf16", torch.bfloat16, 6e-2),
                                                       ("16", torch.float16, 2e-2)])
def test_cuda_precision_trains_like_fp32_on_the_cpu(no_tf32, precision, dtype, tolerance):
    data = batches(n=64, bs=16)
    start, cpu, _ = _train_on("cpu", "32", data)
    start_gpu, gpu, dtypes = _train_on("cuda", precision, data)
    torch.testing.assert_close(start, start_gpu)
    assert set(dtypes) == {dtype}
    err = relative_update_error(start, gpu, cpu)
    assert err < tolerance, f"precision {precision}: update differs from the CPU fp32 one by {err:.2e}"


def _hand_sam(model, data, precision: str, rho: float) -> None:
    """SAM written out (Foret et al. 2021): gradient g at w, e = rho g / |g|, gradient at w + e, step from w."""
    model.cuda().train()
    base = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    params = list(model.parameters())
    amp = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if precision == "bf16" else contextlib.nullcontext
    for x, y in data:
        x, y = x.cuda(), y.cuda()
        with amp():
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        with torch.no_grad():
            norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in params]))
            e = [rho * p.grad / norm for p in params]
            torch._foreach_add_(params, e)
        base.zero_grad(set_to_none=True)
        with amp():
            F.cross_entropy(model(x), y).backward()
        with torch.no_grad():
            torch._foreach_sub_(params, e)
        base.step()
        base.zero_grad(set_to_none=True)


@pytest.mark.parametrize("precision,tolerance", [("32", 1e-3), ("bf16", 5e-2)])
def test_sam_closure_path_on_cuda_matches_sam_written_out(no_tf32, precision, tolerance):
    data = batches(n=64, bs=16)
    ref = fresh_net()
    start = weights(ref)
    _hand_sam(ref, data, precision, rho=0.05)
    model = fresh_net()
    opt = SAM(model.parameters(), torch.optim.SGD, rho=0.05, lr=0.05, momentum=0.9)
    passes = []
    Trainer(model, opt, data, precision=precision, device="cuda",
            plugins=[Hook(loss=lambda s: passes.append(s.closure_pass))]).fit()
    assert passes == [False, True] * len(data)  # two forward/backward passes per update
    err = relative_update_error(start, weights(model), weights(ref))
    assert err < tolerance, f"SAM ({precision}) update differs from the written-out SAM by {err:.2e}"


def test_sam_recipe_on_cuda_bf16_counts_batchnorm_statistics_once_per_batch():
    trainer, ctx = build(load_recipe("digits", [*FAKE, "tricks.sam.enabled=true", "train.precision=bf16",
                                                "train.epochs=1"]))
    trainer.fit()
    bns = [m for m in trainer.model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    assert bns and {int(m.num_batches_tracked) for m in bns} == {len(ctx.train_loader)}
    assert all(torch.isfinite(p).all() for p in trainer.model.parameters())


def _fp16_sam_refusal() -> str | None:
    """The one-line refusal of tricks.sam with train.precision=16, or None when the code accepts it."""
    try:
        build(load_recipe("digits", [*FAKE, "tricks.sam.enabled=true", "train.precision=16", "train.epochs=1"]))
    except TrickbagError as exc:
        return str(exc)
    return None


def test_fp16_sam_when_refused_says_why_in_one_line():
    msg = _fp16_sam_refusal()
    if msg is None:
        pytest.skip("SAM with train.precision=16 is accepted: see the next test")
    assert "\n" not in msg and "tricks.sam" in msg and "train.precision=16" in msg and "bf16" in msg


def test_fp16_sam_when_accepted_trains_like_fp32_sam_and_an_overflow_in_the_second_pass_skips(no_tf32):
    if _fp16_sam_refusal() is not None:
        pytest.skip("SAM with train.precision=16 is refused (checked by the previous test)")
    base = [*FAKE, "tricks.sam.enabled=true", "train.epochs=1", "train.nonfinite=skip"]
    results = {}
    for sam in ("true", "false"):
        for precision in ("32", "16"):
            overrides = [*base, f"train.precision={precision}", f"tricks.sam.enabled={sam}"]
            trainer, _ = build(load_recipe("digits", overrides))
            start = weights(trainer.model)
            trainer.fit()
            results[sam, precision] = (start, weights(trainer.model))
    err = relative_update_error(results["true", "16"][0], results["true", "16"][1], results["true", "32"][1])
    # the reference drift: fp16 against fp32 without SAM, the same epoch of updates (it compounds over the epoch)
    plain = relative_update_error(results["false", "16"][0], results["false", "16"][1], results["false", "32"][1])
    assert err < max(2e-2, 2 * plain), f"fp16 SAM update differs from fp32 SAM by {err:.2e} (plain fp16: {plain:.2e})"

    trainer, ctx = build(load_recipe("digits", [*base, "train.precision=16"]))
    log = StepLog()
    trainer.add_plugin(ScaleLossAt(1, closure_only=True))  # only the second (perturbed) pass overflows
    trainer.add_plugin(log)
    trainer.fit()
    assert [i for i, row in enumerate(log.rows) if row[1]] == [1]
    assert torch.equal(log.rows[0][3], log.rows[1][3]) and log.rows[0][2] == log.rows[1][2]
    assert trainer.state.step == len(ctx.train_loader) - 1 == ctx.scheduler.last_epoch
