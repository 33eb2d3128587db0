"""build_scheduler: per-update LR sequences against closed-form formulas written here."""

from __future__ import annotations

import io
import math
import warnings

import pytest
import torch
from torch.optim import lr_scheduler as lrs

from trickbag.optim import SCHEDULERS, LRSchedule, add_param_group, build_scheduler, replan_schedule, scaled_lr

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


# --------------------------------------------------------------------------- reference formulas
OPTIONS = {
    "constant": {},
    "step": {"step_size": 3, "gamma": 0.5},
    "multistep": {"milestones": [5, 9], "gamma": 0.3},
    "cosine": {"min_lr": 1e-3},
    "linear": {"end_factor": 0.25},
    "polynomial": {"power": 2.0},
}
LAMBDA_NAMES = tuple(OPTIONS)


def ref_lr(name: str, t: int, b: float, total: int, w: int) -> float:
    """LR of update t for base LR b, written from build_scheduler's documented formulas (floor after total)."""
    if t < w:
        return _warm(t, b, w, 1 / (w + 1))
    o = OPTIONS[name]
    u, length = t - w, total - w
    x = min(u, length) / length
    if name == "constant":
        return b
    if name == "step":
        return b * o["gamma"] ** (u // o["step_size"])
    if name == "multistep":
        return b * o["gamma"] ** sum(m <= t for m in o["milestones"])
    if name == "cosine":
        return o["min_lr"] + (b - o["min_lr"]) * (1 + math.cos(math.pi * x)) / 2
    if name == "linear":
        return b * (1 + (o["end_factor"] - 1) * x)
    return b * (1 - x) ** o["power"]


def _same_rows(rows: list[list[float]], row: list[float]) -> None:
    for got in rows:
        assert got == pytest.approx(row, rel=1e-12, abs=1e-15)


def _step(opt, sched, n: int = 1, metric=None) -> None:
    for _ in range(n):
        opt.step()
        sched.step() if metric is None else sched.step(metric)


# --------------------------------------------------------------------------- past the end
@pytest.mark.parametrize("w", [0, 2])
@pytest.mark.parametrize("name", LAMBDA_NAMES)
def test_every_schedule_follows_its_formula_for_three_times_total_steps(name: str, w: int) -> None:
    total = 12
    opt = _opt()
    sched = build_scheduler(opt, name, total_steps=total, warmup_steps=w, **OPTIONS[name])
    assert isinstance(sched, LRSchedule) and isinstance(sched, lrs.LambdaLR)
    rows = _run(opt, sched, 3 * total)
    _check(rows, lambda t, b: ref_lr(name, t, b, total, w))
    floor = {"cosine": [1e-3, 1e-3], "linear": [0.25 * b for b in BASES], "polynomial": [0.0, 0.0]}
    if name in floor:  # stays at the final value, never periodic
        for row in rows[total:]:
            assert row == pytest.approx(floor[name], rel=1e-12, abs=1e-15)
    assert sched.get_last_lr() == rows[-1]


def test_onecycle_stays_at_its_final_lr_instead_of_raising() -> None:
    total, div, final_div = 10, 10.0, 100.0
    opt = _opt(momentum=0.9)
    sched = build_scheduler(opt, "onecycle", total_steps=total, div_factor=div, final_div_factor=final_div)
    assert isinstance(sched, lrs.OneCycleLR)
    rows = _run(opt, sched, 3 * total)
    for row in rows[total - 1:]:
        assert row == pytest.approx([b / div / final_div for b in BASES], rel=1e-12)
    assert opt.param_groups[0]["momentum"] == pytest.approx(0.95)  # the cycle's final momentum too


# --------------------------------------------------------------------------- state without torch internals
@pytest.mark.parametrize("name", LAMBDA_NAMES)
def test_state_dict_is_plain_data_and_resumes_through_a_weights_only_load(name: str) -> None:
    def build(opt):
        return build_scheduler(opt, name, total_steps=12, warmup_steps=2, **OPTIONS[name])

    opt1 = _opt()
    sched1 = build(opt1)
    _run(opt1, sched1, 5)
    buf = io.BytesIO()
    torch.save({"opt": opt1.state_dict(), "sched": sched1.state_dict()}, buf)
    buf.seek(0)
    state = torch.load(buf, weights_only=True)
    opt2 = _opt()
    sched2 = build(opt2)
    opt2.load_state_dict(state["opt"])
    sched2.load_state_dict(state["sched"])
    assert _run(opt2, sched2, 20) == _run(opt1, sched1, 20)


# --------------------------------------------------------------------------- add_param_group
def _two_group_opt(momentum: float = 0.9, second: bool = True):
    params = [torch.zeros(2, requires_grad=True), torch.zeros(3, requires_grad=True)]
    groups = [{"params": [params[0]], "lr": 0.1}]
    if second:
        groups.append({"params": [params[1]], "lr": 0.03})
    return torch.optim.SGD(groups, lr=0.1, momentum=momentum), params[1]


CASES = [(n, w) for n in LAMBDA_NAMES for w in (0, 2)] + [("onecycle", 0), ("plateau", 0)]


@pytest.mark.parametrize("k", [0, 1, 4, 15])
@pytest.mark.parametrize("name, w", CASES)
def test_a_group_added_later_follows_the_schedule_as_if_there_from_the_start(name: str, w: int, k: int) -> None:
    total = 12
    kw = dict(OPTIONS.get(name, {}), total_steps=total, warmup_steps=w)
    if name == "plateau":
        kw = {"factor": 0.5, "patience": 0, "min_lr": 0.005}
    metric = 1.0 if name == "plateau" else None  # a flat metric: reduce after every step (patience 0)
    if name == "onecycle" and k > total:
        k = total  # reaching the end is enough; the clamp is tested above
    ref_opt, _ = _two_group_opt()
    ref = build_scheduler(ref_opt, name, **kw)
    opt, extra = _two_group_opt(second=False)
    sched = build_scheduler(opt, name, **kw)
    _step(ref_opt, ref, k, metric)
    _step(opt, sched, k, metric)
    group = add_param_group(opt, {"params": [extra], "lr": 0.03}, sched)
    assert group is opt.param_groups[1] and len(sched.get_last_lr()) == 2 or name == "plateau"
    for _ in range(total + 3):
        for key in ("lr", "momentum"):
            assert opt.param_groups[1][key] == pytest.approx(ref_opt.param_groups[1][key], rel=1e-9, abs=1e-15), key
        assert opt.param_groups[0]["lr"] == ref_opt.param_groups[0]["lr"]
        if name == "onecycle" and ref.last_epoch >= total:
            break
        _step(ref_opt, ref, 1, metric)
        _step(opt, sched, 1, metric)
    if name != "plateau":
        assert sched.get_last_lr() == pytest.approx(ref.get_last_lr(), rel=1e-9)


def test_add_param_group_after_a_replan_and_resume_from_its_state_dict() -> None:
    opt, extra = _two_group_opt(second=False)
    sched = build_scheduler(opt, "cosine", total_steps=10, min_lr=0.001)
    _step(opt, sched, 4)
    replan_schedule(sched, 20)
    _step(opt, sched, 2)
    add_param_group(opt, {"params": [extra], "lr": 0.03}, sched)
    # the new group follows the re-planned curve: lr - min_lr in proportion to base - min_lr
    ratio = [(g["lr"] - 0.001) / (g["initial_lr"] - 0.001) for g in opt.param_groups]
    assert ratio[1] == pytest.approx(ratio[0], rel=1e-12)
    state = sched.state_dict()
    opt2, extra2 = _two_group_opt(second=False)
    sched2 = build_scheduler(opt2, "cosine", total_steps=10, min_lr=0.001)
    add_param_group(opt2, {"params": [extra2], "lr": 0.03}, sched2)  # groups first, then the states
    opt2.load_state_dict(opt.state_dict())
    sched2.load_state_dict(state)
    assert _run(opt2, sched2, 20) == _run(opt, sched, 20)


def test_add_param_group_defaults_and_errors() -> None:
    opt, extra = _two_group_opt(second=False)
    group = add_param_group(opt, {"params": [extra]})  # no scheduler: plain add, optimizer's default lr
    assert group["lr"] == 0.1 and "initial_lr" not in group and len(opt.param_groups) == 2
    opt, extra = _two_group_opt(second=False)
    sched = build_scheduler(opt, "constant", warmup_steps=3)
    _step(opt, sched, 1)
    group = add_param_group(opt, {"params": [extra]}, sched)
    assert group["initial_lr"] == 0.1 and group["lr"] == pytest.approx(_warm(1, 0.1, 3, 1 / 4))
    with pytest.raises(TypeError, match="add_param_group: scheduler StepLR is not supported"):
        opt, extra = _two_group_opt(second=False)
        add_param_group(opt, {"params": [extra]}, lrs.StepLR(opt, step_size=2))
    assert len(opt.param_groups) == 1  # refused before the optimizer changed
    with pytest.raises(ValueError, match="does not drive this optimizer"):
        other, _ = _two_group_opt()
        add_param_group(opt, {"params": [extra]}, build_scheduler(other, "constant"))
    with pytest.raises(ValueError, match="min_lr=0.05 of the cosine schedule is above the new group's lr=0.01"):
        add_param_group(opt, {"params": [extra], "lr": 0.01}, build_scheduler(opt, "cosine", total_steps=5,
                                                                                min_lr=0.05))
    with pytest.raises(TypeError, match="optimizer must be a torch.optim.Optimizer"):
        add_param_group("sgd", {"params": [extra]})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="initial_lr"):
        opt, extra = _two_group_opt(second=False)
        add_param_group(opt, {"params": [extra]}, lrs.ReduceLROnPlateau(opt))


def test_plateau_new_group_gets_the_reduction_so_far_and_a_min_lr() -> None:
    opt, extra = _two_group_opt(second=False)
    sched = build_scheduler(opt, "plateau", factor=0.5, patience=0, min_lr=[0.01])
    _step(opt, sched, 3, metric=1.0)  # best, then two reductions
    assert opt.param_groups[0]["lr"] == pytest.approx(0.025)
    group = add_param_group(opt, {"params": [extra], "lr": 0.2}, sched)
    assert group["lr"] == pytest.approx(0.05) and group["initial_lr"] == 0.2
    assert sched.min_lrs == [0.01, 0.01]  # one shared min_lr
    _step(opt, sched, 2, metric=1.0)
    assert [g["lr"] for g in opt.param_groups] == pytest.approx([0.01, 0.0125])  # group 0 held at min_lr
    _step(opt, sched, 1, metric=1.0)
    assert [g["lr"] for g in opt.param_groups] == pytest.approx([0.01, 0.01])
    opt, extra = _two_group_opt(second=False)
    sched = build_scheduler(opt, "plateau", factor=0.5, patience=0, min_lr=0.01)
    _step(opt, sched, 8, metric=1.0)  # group 0 at min_lr: a new group starts no lower than its min_lr
    assert add_param_group(opt, {"params": [extra], "lr": 0.05}, sched)["lr"] == 0.01


# --------------------------------------------------------------------------- replan_schedule
def _replanned(name: str, t: int, b: float, *, total: int, w: int, t0: int, new: int) -> float:
    """The documented re-planned curve: the old one up to t0, then the same shape from lr(t0) to the end at new."""
    if t <= t0 or t0 < w:
        return ref_lr(name, t, b, new if t0 < w else total, w)
    start = ref_lr(name, t0, b, total, w)
    end = ref_lr(name, 10**9, b, total, w)  # the floor
    x = 1.0 if t >= new else (t - t0) / (new - t0)
    if name == "cosine":
        return end + (start - end) * (1 + math.cos(math.pi * x)) / 2
    if name == "linear":
        return end + (start - end) * (1 - x)
    return start * (1 - x) ** OPTIONS["polynomial"]["power"]


@pytest.mark.parametrize("t0, new", [(5, 20), (5, 8), (1, 16), (0, 6)])
@pytest.mark.parametrize("name", ["cosine", "linear", "polynomial"])
def test_replan_follows_the_documented_curve(name: str, t0: int, new: int) -> None:
    total, w = 12, 3
    opt = _opt()
    sched = build_scheduler(opt, name, total_steps=total, warmup_steps=w, **OPTIONS[name])
    rows = _run(opt, sched, t0)
    replan_schedule(sched, new)
    assert sched.total_steps == new
    rows = rows[:-1] + _run(opt, sched, 2 * new)
    _check(rows, lambda t, b: _replanned(name, t, b, total=total, w=w, t0=t0, new=new))
    assert all(a[0] >= b[0] for a, b in zip(rows[max(t0, w):], rows[max(t0, w) + 1:]))  # never rises


@pytest.mark.parametrize("name", ["cosine", "linear", "polynomial"])
def test_replan_at_the_end_stays_at_the_floor_and_a_short_total_jumps_to_it(name: str) -> None:
    total = 8
    opt = _opt()
    sched = build_scheduler(opt, name, total_steps=total, **OPTIONS[name])
    _run(opt, sched, total + 2)
    floor = [ref_lr(name, total, b, total, 0) for b in BASES]
    replan_schedule(sched, 50)  # would raise the LR again if it re-annealed from the start: it must not
    _same_rows(_run(opt, sched, 10), floor)

    opt = _opt()
    sched = build_scheduler(opt, name, total_steps=total, warmup_steps=2, **OPTIONS[name])
    _run(opt, sched, 4)
    replan_schedule(sched, 3)  # <= the current update: the floor at once, for this very update
    assert [g["lr"] for g in opt.param_groups] == pytest.approx(floor, rel=1e-12, abs=1e-15)
    assert sched.get_last_lr() == [g["lr"] for g in opt.param_groups]
    _same_rows(_run(opt, sched, 5), floor)

    opt = _opt()
    sched = build_scheduler(opt, name, total_steps=total, warmup_steps=4, **OPTIONS[name])
    _run(opt, sched, 2)
    replan_schedule(sched, 1)  # during the warm-up too
    _same_rows(_run(opt, sched, 3), floor)


def test_replan_in_the_warmup_continues_it_and_resumes_from_a_state_dict() -> None:
    total, w = 10, 4
    opt = _opt()
    sched = build_scheduler(opt, "cosine", total_steps=total, warmup_steps=w, min_lr=1e-3)
    _run(opt, sched, 2)
    with pytest.raises(ValueError, match="total_steps=4 ends inside the warm-up"):
        replan_schedule(sched, 4)
    replan_schedule(sched, 14)
    state = sched.state_dict()
    opt2 = _opt()
    sched2 = build_scheduler(opt2, "cosine", total_steps=total, warmup_steps=w, min_lr=1e-3)
    opt2.load_state_dict(opt.state_dict())
    sched2.load_state_dict(state)
    rows = _run(opt, sched, 16)
    assert _run(opt2, sched2, 16) == rows
    _check(rows, lambda t, b: ref_lr("cosine", t + 2, b, 14, w))


def test_replan_of_schedules_without_a_length_and_errors() -> None:
    for name in ("constant", "step"):
        opt = _opt()
        sched = build_scheduler(opt, name, total_steps=10, warmup_steps=2, **OPTIONS[name])
        _run(opt, sched, 3)
        replan_schedule(sched, 40)  # nothing to change
        _check(_run(opt, sched, 10), lambda t, b, name=name: ref_lr(name, t + 3, b, 10, 2))
    plateau = build_scheduler(_opt(), "plateau")
    replan_schedule(plateau, 5)  # follows a metric: nothing to change
    with pytest.raises(ValueError, match="'multistep' cannot be re-planned"):
        replan_schedule(build_scheduler(_opt(), "multistep", milestones=[3]), 20)
    with pytest.raises(ValueError, match="'onecycle' cannot be re-planned"):
        replan_schedule(build_scheduler(_opt(momentum=0.9), "onecycle", total_steps=10), 20)
    with pytest.raises(TypeError, match="replan_schedule: scheduler must be the LRSchedule.*got StepLR"):
        opt = _opt()
        replan_schedule(lrs.StepLR(opt, step_size=3), 20)
    with pytest.raises(ValueError, match="replan_schedule: total_steps must be an integer >= 1"):
        replan_schedule(build_scheduler(_opt(), "cosine", total_steps=5), 0)


def test_lr_schedule_direct_construction_names_itself_in_errors() -> None:
    with pytest.raises(ValueError, match="LRSchedule: unknown schedule name 'onecycle'"):
        LRSchedule(_opt(), "onecycle", total_steps=10)
    with pytest.raises(ValueError, match="^build_scheduler: step_size must be an integer >= 1, got 0$"):
        build_scheduler(_opt(), "step", step_size=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # building and stepping normally warns about nothing
        opt = _opt()
        sched = LRSchedule(opt, "cosine", total_steps=4, warmup_steps=1)
        _run(opt, sched, 6)
    assert (sched.name, sched.total_steps, sched.warmup_steps) == ("cosine", 4, 1)


@pytest.mark.parametrize("name,options", [("cosine", {}), ("linear", {}), ("polynomial", {"power": 2.0}),
                                          ("step", {"step_size": 3}), ("constant", {})])
@pytest.mark.parametrize("warmup", [0, 2])
def test_scale_lr_mid_schedule_equals_the_schedule_built_with_the_scaled_base(name, options, warmup):
    """Scaling the base LR after k updates gives, from then on, the LRs of a schedule built at that base."""
    from trickbag.optim import scale_lr

    def run(lr, scale_at=None, factor=1.0):
        opt = torch.optim.SGD([torch.zeros(1, requires_grad=True), torch.zeros(1, requires_grad=True)], lr=lr)
        opt.param_groups[0]["lr"] = lr  # two groups: the second at a tenth
        opt.add_param_group({"params": [torch.zeros(1, requires_grad=True)], "lr": lr / 10})
        sched = build_scheduler(opt, name, total_steps=12, warmup_steps=warmup, **options)
        seen = []
        for t in range(14):
            if t == scale_at:
                scale_lr(opt, sched, factor)
            seen += [g["lr"] for g in opt.param_groups]
            opt.step()
            sched.step()
        return seen

    scaled, reference = run(0.2, scale_at=5, factor=0.25), run(0.05)
    assert scaled[10:] == pytest.approx(reference[10:], rel=1e-12, abs=1e-15)  # 2 groups per update
    assert scaled[:10] == run(0.2)[:10]


# ---------------------------------------------------------------------- wsd (warmup-stable-decay)
_SHAPES = {"linear": lambda x: 1 - x, "cosine": lambda x: (1 + math.cos(math.pi * x)) / 2,
           "1-sqrt": lambda x: 1 - math.sqrt(x)}


@pytest.mark.parametrize("shape", list(_SHAPES))
@pytest.mark.parametrize("w, fraction", [(0, 0.2), (4, 0.5), (3, 1.0)])
def test_wsd_warms_up_stays_then_decays_with_its_shape(shape: str, w: int, fraction: float) -> None:
    total, min_lr = 24, 1e-3
    opt = _opt()
    sched = build_scheduler(opt, "wsd", total_steps=total, warmup_steps=w, decay_fraction=fraction,
                            decay_shape=shape, min_lr=min_lr)
    rows = _run(opt, sched, total + 3)
    decay = total - round(fraction * (total - w))  # the decay's first update, written out here

    def expected(t: int, b: float) -> float:
        if t < w:
            return b * (t + 1) / (w + 1)
        if t < decay:
            return b
        x = min(1.0, (t - decay) / (total - decay))
        return min_lr + (b - min_lr) * _SHAPES[shape](x)

    _check(rows, expected)


def test_wsd_replanned_in_its_stable_phase_stays_stable_and_moves_its_decay() -> None:
    opt = _opt()
    sched = build_scheduler(opt, "wsd", total_steps=20, warmup_steps=2, decay_fraction=0.25, decay_shape="linear")
    _run(opt, sched, 8)  # stable phase (the decay would start at 20 - round(0.25 * 18) = 15)
    assert replan_schedule(sched, 42) is False
    rows = _run(opt, sched, 42 - 8)
    decay = 42 - round(0.25 * 40)  # 32: a quarter of the new length after warm-up
    for i, row in enumerate(rows):
        t = 8 + i
        factor = 1.0 if t < decay else 1 - min(1.0, (t - decay) / (42 - decay))
        assert row == pytest.approx([b * factor for b in BASES], rel=1e-9, abs=1e-12), t


def test_wsd_refuses_bad_options() -> None:
    with pytest.raises(ValueError, match="decay_shape must be one of linear, cosine, 1-sqrt"):
        build_scheduler(_opt(), "wsd", total_steps=10, decay_shape="sqrt")
    with pytest.raises(ValueError, match="decay_fraction"):
        build_scheduler(_opt(), "wsd", total_steps=10, decay_fraction=0)
    with pytest.raises(ValueError, match="needs total_steps"):
        build_scheduler(_opt(), "wsd")
