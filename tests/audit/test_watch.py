"""The runtime audit: silent and bit-identical on a correct AMP + accumulation + clipping + EMA +
evaluation loop; each mistake reported at the user's line; everything restored afterwards."""

# The loops below are wrong on purpose (the audit must catch them), and `trickbag lint` agrees:
# trickbag: noqa

import copy
import io
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import trickbag
from trickbag.audit import audit
from trickbag.audit.watch import AUDIT_RULES

SRC = Path(__file__).read_text().splitlines()
HERE = Path(__file__).resolve()


def line_of(marker: str) -> str:
    """``test_watch.py:N`` of the line carrying ``# <marker>``."""
    (n,) = [i for i, text in enumerate(SRC, 1) if text.rstrip().endswith(f"# <{marker}>")]
    return f"{HERE}:{n}"


def where(report, rule):
    """The absolute file:line of each finding of ``rule``."""
    out = []
    for f in report.findings:
        if f.rule == rule:
            path, _, line = f.where.rpartition(":")
            out.append(f"{Path(path).resolve()}:{line}")
    return out


def make(seed=0):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    return model, opt


def batches(n=8, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(8, 6, generator=g), torch.randint(0, 3, (8,), generator=g)) for _ in range(n)]


def accumulating(model, opt, n=4, k=2, scaler=None, sched=None):
    """A gradient-accumulation loop over ``batches(n)``: an update every ``k`` micro-batches (through
    ``scaler`` when given, then ``sched.step()``).  It yields after each micro-batch's backward, so that
    the test makes its misplaced call there, on a line of its own."""
    for i, (x, y) in enumerate(batches(n)):
        loss = F.cross_entropy(model(x), y) / k
        (loss if scaler is None else scaler.scale(loss)).backward()
        yield
        if (i + 1) % k == 0:
            if scaler is None:
                opt.step()
            else:
                scaler.step(opt)
                scaler.update()
            if sched is not None:
                sched.step()
            opt.zero_grad()


def correct_loop(model, opt, sched, scaler, ema, data, k=2):
    for _epoch in range(2):
        model.train()
        for i, (x, y) in enumerate(data):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(x), y) / k
            scaler.scale(loss).backward()
            if (i + 1) % k == 0:
                scaler.unscale_(opt)
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(opt)
                scaler.update()
                sched.step()
                opt.zero_grad(set_to_none=True)
                ema.update(model)
        model.eval()
        with torch.inference_mode():
            for x, _y in data[:2]:
                model(x).argmax(1)


def pieces(model, opt):
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 3))
    return sched, torch.amp.GradScaler("cpu"), trickbag.EMA(model, decay=0.9)


def test_correct_loop_no_findings_and_bit_identical_weights():
    data = batches()
    model, opt = make()
    correct_loop(model, opt, *pieces(model, opt), data)
    reference = copy.deepcopy(model.state_dict())
    model, opt = make()
    sched, scaler, ema = pieces(model, opt)
    with audit(model, opt, report=False) as report:
        correct_loop(model, opt, sched, scaler, ema, data)
    assert report.findings == []
    assert report.counts["optimizer steps"] == 8 and report.counts["scheduler steps"] == 8
    assert report.counts["clips"] == 8 and report.counts["EMA updates"] == 8
    assert all(torch.equal(reference[k], v) for k, v in model.state_dict().items())


def test_everything_is_restored():
    model, opt = make()
    scaler = torch.amp.GradScaler("cpu")
    clip, scale_fn, sched_step = nn.utils.clip_grad_norm_, torch.amp.GradScaler.scale, \
        torch.optim.lr_scheduler.LRScheduler.step
    with audit(model, opt, report=False):
        assert nn.utils.clip_grad_norm_ is not clip and "step" in vars(opt)
        model(torch.randn(4, 6)).sum().backward()
    assert nn.utils.clip_grad_norm_ is clip and torch.nn.utils.clip_grad.clip_grad_norm_ is clip
    assert torch.amp.GradScaler.scale is scale_fn and torch.optim.lr_scheduler.LRScheduler.step is sched_step
    assert "step" not in vars(opt) and "zero_grad" not in vars(opt) and "zero_grad" not in vars(model)
    assert not model._forward_pre_hooks and not list(model.parameters())[-1]._backward_hooks
    assert scaler.scale(torch.ones(1)).item() == 65536.0


@pytest.mark.filterwarnings("ignore:Detected call of")
def test_scheduler_per_micro_batch_at_the_user_line():
    model, opt = make()
    sched = torch.optim.lr_scheduler.StepLR(opt, 10)
    with audit(model, opt, report=False) as report:
        for _ in accumulating(model, opt, n=8, k=4):
            sched.step()  # <sched-micro>
    assert where(report, "scheduler-per-micro-batch") == [line_of("sched-micro")]
    # the first micro-batches also run before the first optimizer step: one line, the specific rule only
    assert where(report, "scheduler-before-step") == []
    assert [f.count for f in report.findings] == [7]  # 8 calls for 2 updates: all but the 5th are misplaced


def test_gradients_never_zeroed_at_the_step():
    model, opt = make()
    with audit(model, opt, report=False) as report:
        for x, y in batches(4):
            F.cross_entropy(model(x), y).backward()
            opt.step()  # <no-zero>
    (f,) = report.findings
    assert f.rule == "grads-never-zeroed" and f.count == 3 and where(report, f.rule) == [line_of("no-zero")]


def test_zeroing_by_hand_or_through_the_model_is_fine():
    model, opt = make()
    with audit(model, opt, report=False) as report:
        for i, (x, y) in enumerate(batches(6)):
            if i % 2:
                model.zero_grad()
            else:
                for p in model.parameters():
                    p.grad = None
            F.cross_entropy(model(x), y).backward()
            opt.step()
    assert report.findings == []


def test_clip_before_unscale_and_per_micro_batch():
    model, opt = make()
    scaler = torch.amp.GradScaler("cpu")
    with audit(model, opt, scaler=scaler, report=False) as report:
        for _ in accumulating(model, opt, scaler=scaler):
            nn.utils.clip_grad_value_(model.parameters(), 0.5)  # <clip>
    assert where(report, "clip-before-unscale") == [line_of("clip")]
    assert where(report, "clip-per-micro-batch") == [line_of("clip")]


def test_clip_before_unscale_with_a_disabled_scaler_is_reported_as_wrong_once_enabled():
    model, opt = make()
    scaler = torch.amp.GradScaler("cpu", enabled=False)  # GradScaler(enabled=use_amp), AMP off on this machine
    with audit(model, opt, scaler=scaler, report=False) as report:
        for x, y in batches(3):
            opt.zero_grad()
            scaler.scale(F.cross_entropy(model(x), y)).backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # <clip-disabled>
            scaler.step(opt)
            scaler.update()
    assert where(report, "clip-before-unscale") == [line_of("clip-disabled")]
    assert "harmless while this GradScaler is disabled" in report.findings[0].message


def test_clip_after_step_is_reported_under_the_lint_code():
    model, opt = make()
    with audit(model, opt, report=False) as report:
        for x, y in batches(3):
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # <clip-after>
    assert where(report, "clip-after-step") == [line_of("clip-after")]
    assert [f.code for f in report.findings] == ["TB113"]
    assert report.findings[0].count == 3


def test_clip_of_another_model_after_its_own_backward_is_silent():
    gen, g_opt = make(0)
    disc, d_opt = make(1)
    with audit([gen, disc], [g_opt, d_opt], report=False) as report:
        for x, y in batches(3):
            d_opt.zero_grad()
            F.cross_entropy(disc(x), y).backward()
            d_opt.step()
            g_opt.zero_grad()
            F.cross_entropy(gen(x), y).backward()
            nn.utils.clip_grad_norm_(gen.parameters(), 1.0)  # after d_opt.step(), before g_opt.step()
            g_opt.step()
    assert report.findings == []


def test_unscale_then_clip_with_a_disabled_scaler_is_silent():
    model, opt = make()
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    with audit(model, opt, scaler=scaler, report=False) as report:
        for x, y in batches(3):
            opt.zero_grad()
            scaler.scale(F.cross_entropy(model(x), y)).backward()
            scaler.unscale_(opt)
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
    assert report.findings == []


def test_training_left_in_eval_mode():
    model, opt = make()
    data = batches(6)
    with audit(model, opt, report=False) as report:
        for _epoch in range(2):
            for x, y in data[:2]:
                opt.zero_grad()
                F.cross_entropy(model(x), y).backward()  # <eval-train>
                opt.step()
            model.eval()
            with torch.no_grad():
                model(data[5][0])
    assert where(report, "train-in-eval-mode") == [line_of("eval-train")]
    assert [f.rule for f in report.findings] == ["train-in-eval-mode"]


def test_evaluation_forward_with_grad():
    model, opt = make()
    data = batches(4)
    with audit(model, opt, report=False) as report:
        for x, y in data[:2]:
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
        model.eval()
        for x, _ in data[2:]:
            model(x).argmax(1)  # <eval-grad>
        model.train()
        opt.zero_grad()
        F.cross_entropy(model(data[0][0]), data[0][1]).backward()
        opt.step()
    (f,) = report.findings
    assert f.rule == "eval-with-grad" and f.count == 2 and where(report, f.rule) == [line_of("eval-grad")]


def test_unfrozen_parameters_missing_from_the_optimizer():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    model[0].requires_grad_(False)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    with audit(model, opt, report=False) as report:
        for step, (x, y) in enumerate(batches(4)):
            if step == 2:
                model[0].requires_grad_(True)  # unfrozen, but the optimizer was built without it
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()  # <missing>
    (f,) = report.findings
    assert f.rule == "param-not-in-optimizer" and "0.weight" in f.message and "0.bias" in f.message
    assert where(report, f.rule) == [line_of("missing")]


def test_frozen_parameter_with_stale_grad_in_a_decayed_group():
    model, opt = make()
    with audit(model, opt, report=False) as report:
        for step, (x, y) in enumerate(batches(3)):
            if step == 1:
                model[0].weight.requires_grad_(False)  # frozen, but zero_grad(set_to_none=False) keeps its grad
            opt.zero_grad(set_to_none=False)
            F.cross_entropy(model(x), y).backward()
            opt.step()
    assert [f.rule for f in report.findings] == ["frozen-param-decayed"]


def test_ema_per_micro_batch_supersedes_before_step_on_its_line():
    model, opt = make()
    ema = trickbag.EMA(model, decay=0.9)
    with audit(model, opt, report=False) as report:
        for _ in accumulating(model, opt):
            ema.update(model)  # <ema>
    assert where(report, "ema-per-micro-batch") == [line_of("ema")]
    assert where(report, "ema-before-step") == []


def test_ema_before_step_alone():
    model, opt = make()
    ema = trickbag.EMA(model, decay=0.9)
    with audit(model, opt, report=False) as report:
        for x, y in batches(3):
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            ema.update(model)  # <ema-early>
            opt.step()
    assert [(f.rule, f.count) for f in report.findings] == [("ema-before-step", 3)]
    assert where(report, "ema-before-step") == [line_of("ema-early")]


def test_zero_grad_between_backward_and_step():
    model, opt = make()
    with audit(model, opt, report=False) as report:
        for x, y in batches(2):
            F.cross_entropy(model(x), y).backward()
            opt.zero_grad()  # <zero-late>
            opt.step()
    assert where(report, "zero-grad-before-step") == [line_of("zero-late")]


def test_scheduler_after_a_skipped_amp_step():
    model, opt = make()
    scaler = torch.amp.GradScaler("cpu")
    sched = torch.optim.lr_scheduler.StepLR(opt, 5)
    with audit(model, opt, report=False) as report:
        for i, (x, y) in enumerate(batches(3)):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y) * (float("inf") if i == 1 else 1.0)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            sched.step()  # <skipped>
    assert report.counts["skipped steps"] == 1
    assert where(report, "scheduler-on-skipped-step") == [line_of("skipped")]
    assert [f.rule for f in report.findings] == ["scheduler-on-skipped-step"]


def test_gan_with_two_optimizers_and_penalty_is_clean():
    torch.manual_seed(0)
    gen, critic = nn.Sequential(nn.Linear(4, 6)), nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 1))
    opt_g, opt_d = torch.optim.Adam(gen.parameters()), torch.optim.Adam(critic.parameters())
    with audit([gen, critic], [opt_g, opt_d], report=False) as report:
        for real, _ in batches(4):
            z = torch.randn(8, 4)
            with torch.no_grad():
                fake = gen(z)
            opt_d.zero_grad()
            gp = trickbag.gradient_penalty(critic, real, fake, generator=torch.Generator().manual_seed(0))
            (critic(fake).mean() - critic(real).mean() + 10 * gp).backward()
            opt_d.step()
            opt_g.zero_grad()
            (-critic(gen(z)).mean()).backward()
            opt_g.step()
    assert report.findings == []


def test_table_is_printed_at_exit_unless_turned_off():
    model, opt = make()
    out = io.StringIO()
    with audit(model, opt, file=out):
        for x, y in batches(2):
            F.cross_entropy(model(x), y).backward()
            opt.step()
    text = out.getvalue()
    assert text.startswith("trickbag audit: 1 finding (optimizer steps 2") and "grads-never-zeroed" in text
    assert set(AUDIT_RULES) >= {f for f in text.split() if f in AUDIT_RULES}


def test_arguments_are_checked():
    model, opt = make()
    with pytest.raises(TypeError, match="model must be an nn.Module"):
        audit(opt, opt)
    with pytest.raises(TypeError, match="optimizer must be"):
        audit(model, model)


@pytest.mark.filterwarnings("ignore:Detected call of")
def test_explicit_scheduler_scaler_and_ema_are_wrapped_per_instance():
    model, opt = make()
    sched = torch.optim.lr_scheduler.StepLR(opt, 10)
    scaler = torch.amp.GradScaler("cpu")
    swa = torch.optim.swa_utils.AveragedModel(model)
    with audit(model, opt, scheduler=sched, scaler=scaler, ema=swa, report=False) as report:
        assert "step" in vars(sched) and "update_parameters" in vars(swa) and "unscale_" in vars(scaler)
        for _ in accumulating(model, opt, scaler=scaler, sched=sched):
            swa.update_parameters(model)  # <swa>
    assert "step" not in vars(sched) and "update_parameters" not in vars(swa) and "unscale_" not in vars(scaler)
    assert {f.rule for f in report.findings} == {"ema-per-micro-batch"}
    assert set(where(report, "ema-per-micro-batch")) == {line_of("swa")}


def test_frozen_parameter_without_grad_in_a_decayed_group_is_advised():
    model, opt = make()  # weight_decay=1e-4 on every group
    model[4].requires_grad_(False)  # frozen after the optimizer was built
    with audit(model, opt, report=False) as report:
        for x, y in batches(2):
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
    (f,) = report.findings
    assert f.rule == "frozen-param-decayed" and "4.weight" in f.message and "skipped while" in f.message


def _epochs(model, opt, sched, per_batch, epochs=3, n=10):
    for _epoch in range(epochs):
        for x, y in batches(n):
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
            if per_batch:
                sched.step()  # <sched-per-batch>
        if not per_batch:
            sched.step()  # <sched-per-epoch>


def _warmup_lambda(opt, num_warmup_steps=5, num_training_steps=30):
    def lr_lambda(step):
        return min(1.0, (step + 1) / num_warmup_steps) * max(0.0, 1 - step / num_training_steps)
    return torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)


class _Cfg:
    warmup_steps, max_steps = 5, 30


def _warmup_cosine_from_config(opt):
    cfg = _Cfg()

    def lr_lambda(step):  # the horizon read from a config object: cfg.warmup_steps, cfg.max_steps
        if step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        return 0.5 * (1 + math.cos(math.pi * (step - cfg.warmup_steps) / (cfg.max_steps - cfg.warmup_steps)))
    return torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)


WARMUP_ITERS = 5


def _global_warmup(step):
    return min(1.0, (step + 1) / WARMUP_ITERS)


def _warmup_then_cosine(opt):
    warm = torch.optim.lr_scheduler.LambdaLR(opt, _global_warmup)
    cos = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=25)
    return torch.optim.lr_scheduler.SequentialLR(opt, [warm, cos], milestones=[5])


@pytest.mark.parametrize("build", [
    lambda opt: torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=30),
    _warmup_lambda,
    _warmup_cosine_from_config,
    _warmup_then_cosine,
], ids=["one-cycle", "warmup-lambda", "warmup-cosine-config", "sequential-global-warmup"])
def test_a_per_iteration_schedule_stepped_per_epoch_is_a_finding(build):
    model, opt = make()
    with audit(model, opt, report=False) as wrong:
        _epochs(model, opt, build(opt), per_batch=False)
    assert where(wrong, "scheduler-unit-mismatch") == [line_of("sched-per-epoch")]
    assert wrong.findings[0].code == "TB115"
    model, opt = make()
    with audit(model, opt, report=False) as right:
        _epochs(model, opt, build(opt), per_batch=True)
    assert where(right, "scheduler-unit-mismatch") == []


@pytest.mark.parametrize("build", [
    lambda opt: torch.optim.lr_scheduler.StepLR(opt, step_size=2),
    lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lambda epoch: 0.9 ** epoch),
    lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lambda epoch: 1 - epoch / _Cfg.max_epochs),
], ids=["step-lr", "lambda-of-epoch", "lambda-over-max-epochs"])
def test_an_epoch_schedule_stepped_per_epoch_is_not_a_finding(build):
    _Cfg.max_epochs = 10
    model, opt = make()
    with audit(model, opt, report=False) as report:
        _epochs(model, opt, build(opt), per_batch=False)
    assert report.findings == []


def test_a_step_the_grad_scaler_calls_through_a_replaced_method_is_still_counted():
    """accelerate's fp16 step (as in ``AcceleratedOptimizer.step``): the optimizer's ``step`` method was captured
    before the audit began; for each update it is replaced by a wrapper of that captured method while the GradScaler
    steps, then the captured method is put back. The audit still counts every step, a skipped one as skipped (not as
    a missed step), and a clean loop reports nothing."""
    model, opt = make()
    scaler = torch.amp.GradScaler("cpu")
    captured = opt.step  # what the framework captured when it prepared the optimizer

    def framework_step():
        opt.step = lambda *a, **kw: captured(*a, **kw)  # its per-step patch of the captured method
        scaler.step(opt)
        scaler.update()
        opt.step = captured  # and the captured method put back

    with audit(model, opt, report=False) as report:
        for i, (x, y) in enumerate(batches(4)):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            scaler.scale(loss * (1e38 if i == 2 else 1.0)).backward()  # update 3's gradients overflow
            scaler.unscale_(opt)
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            framework_step()
    assert report.findings == []
    assert report.counts["optimizer steps"] == 3 and report.counts["skipped steps"] == 1
