"""build_scheduler: per-update LR sequences against closed-form formulas written here."""

from __future__ import annotations

import math

import pytest
import torch
from torch.optim import lr_scheduler as lrs

from trickbag.optim import SCHEDULERS, build_scheduler, scaled_lr

BASES = (0.1, 0.02)  # two param groups with different base LRs


def _opt(momentum: float = 0.0, bases: tuple[float, ...] = BASES) -> torch.optim.SGD:
    groups = [{"params": [torch.zeros(2, requires_grad=True)], "lr": b} for b in bases]
    return torch.optim.SGD(groups, lr=bases[0], momentum=momentum)


def _run(opt: torch.optim.Optimizer, sched, n: int) -> list[list[float]]:
    """LR of each group at updates 0..n (the value after n scheduler steps is the last row)."""
    rows = [[g["lr"] for g in opt.param_groups]]
    for _ in range(n):
        opt.step()
        sched.step()
        rows.append([g["lr"] for g in opt.param_groups])
    return rows


def _check(rows: list[list[float]], expected) -> None:
    for t, row in enumerate(rows):
        for g, (lr, b) in enumerate(zip(row, BASES)):
            assert lr == pytest.approx(expected(t, b), rel=1e-9, abs=1e-12), (t, g)


def _warm(t: int, b: float, w: int, s: float) -> float:
    return b * (s + (1 - s) * t / w)


def test_cosine_with_warmup_and_min_lr_matches_formula() -> None:
    total, w, min_lr = 20, 5, 1e-3
    opt = _opt()
    rows = _run(opt, build_scheduler(opt, "cosine", total_steps=total, warmup_steps=w, min_lr=min_lr), total)

    def expected(t: int, b: float) -> float:
        if t < w:
            return b * (t + 1) / (w + 1)  # default start factor 1/(w+1)
        return min_lr + (b - min_lr) * (1 + math.cos(math.pi * (t - w) / (total - w))) / 2

    _check(rows, expected)
    assert all(lr > 0 for lr in rows[0])  # never LR 0 at the first update
    assert rows[w] == pytest.approx(list(BASES), rel=1e-12)  # cosine starts exactly at base lr
    assert rows[total] == pytest.approx([min_lr, min_lr], rel=1e-9)  # and ends exactly at min_lr


def test_cosine_without_warmup_is_proportional_per_group() -> None:
    opt = _opt()
    rows = _run(opt, build_scheduler(opt, "cosine", total_steps=12), 12)
    _check(rows, lambda t, b: b * (1 + math.cos(math.pi * t / 12)) / 2)
    for row in rows[:-1]:
        assert row[0] / row[1] == pytest.approx(BASES[0] / BASES[1])


@pytest.mark.parametrize("start", [None, 0.1, 1.0])
@pytest.mark.parametrize("w", [1, 2, 7])
def test_linear_warmup_values(w: int, start: float | None) -> None:
    opt = _opt()
    sched = build_scheduler(opt, "constant", total_steps=w + 3, warmup_steps=w, warmup_start_factor=start)
    rows = _run(opt, sched, w + 3)
    s = 1 / (w + 1) if start is None else start
    _check(rows, lambda t, b: _warm(t, b, w, s) if t < w else b)
    assert rows[0][0] > 0


def test_no_warmup_starts_at_base_lr() -> None:
    opt = _opt()
    rows = _run(opt, build_scheduler(opt, "constant", warmup_steps=0), 3)
    _check(rows, lambda t, b: b)


@pytest.mark.parametrize("w", [0, 3])
def test_step_schedule(w: int) -> None:
    opt = _opt()
    sched = build_scheduler(opt, "step", total_steps=20, warmup_steps=w, step_size=4, gamma=0.5)
    rows = _run(opt, sched, 20)
    _check(rows, lambda t, b: _warm(t, b, w, 1 / (w + 1)) if t < w else b * 0.5 ** ((t - w) // 4))


@pytest.mark.parametrize("w", [0, 2])
def test_multistep_milestones_are_absolute_update_counts(w: int) -> None:
    milestones = [5, 9, 12]
    opt = _opt()
    sched = build_scheduler(opt, "multistep", total_steps=15, warmup_steps=w, milestones=milestones, gamma=0.1)
    rows = _run(opt, sched, 15)
    _check(
        rows,
        lambda t, b: _warm(t, b, w, 1 / (w + 1)) if t < w else b * 0.1 ** sum(m <= t for m in milestones),
    )


@pytest.mark.parametrize("power", [1.0, 2.0, 0.5])
def test_polynomial_schedule(power: float) -> None:
    total, w = 10, 2
    opt = _opt()
    sched = build_scheduler(opt, "polynomial", total_steps=total, warmup_steps=w, power=power)
    rows = _run(opt, sched, total)
    _check(rows, lambda t, b: _warm(t, b, w, 1 / 3) if t < w else b * (1 - (t - w) / (total - w)) ** power)
    assert rows[total] == pytest.approx([0.0, 0.0], abs=1e-15)


@pytest.mark.parametrize("end", [0.0, 0.25])
def test_linear_decay_to_end_factor(end: float) -> None:
    total = 8
    opt = _opt()
    rows = _run(opt, build_scheduler(opt, "linear", total_steps=total, end_factor=end), total)
    _check(rows, lambda t, b: b * (1 + (end - 1) * t / total))


def test_onecycle_matches_formula_and_keeps_group_ratio() -> None:
    total, pct, div, final_div = 20, 0.25, 10.0, 100.0
    opt = _opt(momentum=0.9)
    sched = build_scheduler(
        opt, "onecycle", total_steps=total, pct_start=pct, div_factor=div, final_div_factor=final_div
    )
    rows = _run(opt, sched, total - 1)

    def cos_anneal(a: float, z: float, frac: float) -> float:
        return z + (a - z) * (1 + math.cos(math.pi * frac)) / 2

    def expected(t: int, b: float) -> float:
        end_up = pct * total - 1
        if t <= end_up:
            return cos_anneal(b / div, b, t / end_up)
        return cos_anneal(b, b / div / final_div, (t - end_up) / (total - 1 - end_up))

    _check(rows, expected)
    assert max(r[0] for r in rows) == pytest.approx(BASES[0])
    assert opt.param_groups[0]["momentum"] == pytest.approx(0.95)  # cycled because SGD used momentum


def test_onecycle_leaves_momentum_alone_for_plain_sgd() -> None:
    opt = _opt(momentum=0.0)
    sched = build_scheduler(opt, "onecycle", total_steps=10)
    _run(opt, sched, 5)
    assert [g["momentum"] for g in opt.param_groups] == [0.0, 0.0]


def test_plateau_reduces_on_stalled_metric_and_rejects_warmup() -> None:
    opt = _opt()
    sched = build_scheduler(opt, "plateau", factor=0.5, patience=1)
    assert isinstance(sched, lrs.ReduceLROnPlateau)
    for metric in (1.0, 1.0, 1.0):  # best at step 1, no improvement for 2 > patience=1 steps
        opt.step()
        sched.step(metric)
    assert [g["lr"] for g in opt.param_groups] == pytest.approx([b * 0.5 for b in BASES])
    with pytest.raises(ValueError, match="warmup"):
        build_scheduler(_opt(), "plateau", total_steps=10, warmup_steps=2)


def test_every_name_builds_and_state_dict_resumes() -> None:
    options = {"step": {"step_size": 3}, "multistep": {"milestones": [6]}}
    for name in SCHEDULERS:
        warm = 0 if name in ("onecycle", "plateau") else 2
        opt = _opt(momentum=0.9)
        sched = build_scheduler(opt, name, total_steps=12, warmup_steps=warm, **options.get(name, {}))
        if name == "plateau":
            continue
        full = _run(opt, sched, 11)
        # resume after 5 updates from (optimizer, scheduler) state dicts, the way checkpoints do
        opt1 = _opt(momentum=0.9)
        sched1 = build_scheduler(opt1, name, total_steps=12, warmup_steps=warm, **options.get(name, {}))
        _run(opt1, sched1, 5)
        opt2 = _opt(momentum=0.9)
        sched2 = build_scheduler(opt2, name, total_steps=12, warmup_steps=warm, **options.get(name, {}))
        opt2.load_state_dict(opt1.state_dict())
        sched2.load_state_dict(sched1.state_dict())
        resumed = _run(opt2, sched2, 6)
        torch.testing.assert_close(torch.tensor(resumed), torch.tensor(full[5:]), msg=name)
        assert len({tuple(r) for r in full}) > 1 or name == "constant", name  # the schedule moves


def test_argument_errors_are_actionable() -> None:
    with pytest.raises(ValueError, match="allowed: constant, step, multistep, cosine"):
        build_scheduler(_opt(), "cosin", total_steps=10)
    with pytest.raises(TypeError, match="allowed options: min_lr"):
        build_scheduler(_opt(), "cosine", total_steps=10, eta_min=0.1)
    with pytest.raises(ValueError, match="needs total_steps"):
        build_scheduler(_opt(), "cosine")
    with pytest.raises(ValueError, match="warmup_steps=10 must be smaller than total_steps=10"):
        build_scheduler(_opt(), "cosine", total_steps=10, warmup_steps=10)
    with pytest.raises(ValueError, match="warmup_start_factor"):
        build_scheduler(_opt(), "cosine", total_steps=10, warmup_steps=2, warmup_start_factor=0.0)
    with pytest.raises(ValueError, match="min_lr=0.05 is above param_groups\\[1\\]"):
        build_scheduler(_opt(), "cosine", total_steps=10, min_lr=0.05)
    with pytest.raises(ValueError, match="step_size"):
        build_scheduler(_opt(), "step")
    with pytest.raises(ValueError, match="milestones"):
        build_scheduler(_opt(), "multistep", warmup_steps=3, milestones=[2, 5])
    with pytest.raises(ValueError, match="pct_start"):
        build_scheduler(_opt(), "onecycle", total_steps=10, warmup_steps=2)
    with pytest.raises(ValueError, match="total_steps"):
        build_scheduler(_opt(), "linear", total_steps=0)
    with pytest.raises(TypeError, match="Optimizer"):
        build_scheduler("sgd", "constant")  # type: ignore[arg-type]


def test_scaled_lr_linear_rule() -> None:
    for base, bs, ref in ((0.1, 256, 256), (0.1, 8192, 256), (3e-4, 48, 32)):
        assert scaled_lr(base, bs, base_batch_size=ref) == pytest.approx(base * bs / ref)
    assert scaled_lr(0.1, 512) == pytest.approx(0.2)
    with pytest.raises(ValueError, match="batch_size"):
        scaled_lr(0.1, 0)
    with pytest.raises(ValueError, match="base_lr"):
        scaled_lr(-1.0, 64)
