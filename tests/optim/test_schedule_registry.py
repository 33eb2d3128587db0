"""The schedule registry: every schedule's LR at every update against formulas written here (torch's own
schedulers for onecycle and plateau), and the recipe's schedule section (one per schedule.name) reading
recipes written when every schedule shared flat keys."""

from __future__ import annotations

import math

import pytest
import torch
from torch.optim import lr_scheduler as lrs

from trickbag.errors import RecipeError
from trickbag.optim import SCHEDULERS, build_scheduler, replan_schedule
from trickbag.optim.schedules import MODULES, SCHEDULES, settle_schedule
from trickbag.recipe import load_recipe, recipe_from_dict

BASES = (0.1, 0.02)


def _opt(momentum: float = 0.0) -> torch.optim.SGD:
    return torch.optim.SGD([{"params": [torch.zeros(2, requires_grad=True)], "lr": b} for b in BASES], lr=0.1,
                           momentum=momentum)


def _rows(opt, sched, n: int, metric=None) -> list[list[float]]:
    rows = [[g["lr"] for g in opt.param_groups]]
    for i in range(n):
        opt.step()
        sched.step() if metric is None else sched.step(metric(i))
        rows.append([g["lr"] for g in opt.param_groups])
    return rows


def formula(name: str, kw: dict, t: int, b: float, total: int, w: int) -> float:
    """LR of update ``t`` for base LR ``b``: build_scheduler's documented formulas, written out again."""
    if t < w:
        s = 1 / (w + 1)
        return b * (s + (1 - s) * t / w)
    x = min(t - w, total - w) / (total - w)
    if name == "constant":
        return b
    if name == "step":
        return b * kw.get("gamma", 0.1) ** ((t - w) // kw["step_size"])
    if name == "multistep":
        return b * kw.get("gamma", 0.1) ** sum(m <= t for m in kw["milestones"])
    if name == "linear":
        e = kw.get("end_factor", 0.0)
        return b * (e + (1 - e) * (1 - x))
    if name == "polynomial":
        return b * (1 - x) ** kw.get("power", 1.0)
    lo = kw.get("min_lr", 0.0)
    if name == "cosine":
        return lo + (b - lo) * (1 + math.cos(math.pi * x)) / 2
    # wsd: stable until D, then the decay's shape to min_lr at total
    d = total - round(kw.get("decay_fraction", 0.2) * (total - w))
    if t < d:
        return b
    y = min(1.0, (t - d) / (total - d))
    shape = kw.get("decay_shape", "1-sqrt")
    unit = {"linear": 1 - y, "cosine": (1 + math.cos(math.pi * y)) / 2, "1-sqrt": 1 - math.sqrt(y)}[shape]
    return lo + (b - lo) * unit


OPTION_SETS = [
    ("constant", {}),
    ("step", {"step_size": 3, "gamma": 0.5}), ("step", {"step_size": 1}), ("step", {"step_size": 7, "gamma": 0.9}),
    ("multistep", {"milestones": [5, 9], "gamma": 0.3}), ("multistep", {"milestones": [4]}),
    ("cosine", {}), ("cosine", {"min_lr": 1e-3}), ("cosine", {"min_lr": 0.02}),
    ("linear", {}), ("linear", {"end_factor": 0.25}), ("linear", {"end_factor": 1.0}),
    ("polynomial", {}), ("polynomial", {"power": 2.0}), ("polynomial", {"power": 0.5}),
    ("wsd", {}), ("wsd", {"decay_fraction": 0.5, "decay_shape": "linear"}),
    ("wsd", {"decay_fraction": 1.0, "decay_shape": "cosine", "min_lr": 1e-3}),
    ("wsd", {"decay_fraction": 0.1, "decay_shape": "1-sqrt", "min_lr": 0.02}),
]


@pytest.mark.parametrize("total", [12, 37])
@pytest.mark.parametrize("w", [0, 1, 3])
@pytest.mark.parametrize("name, kw", OPTION_SETS)
def test_every_lambda_schedule_follows_its_formula_at_every_update(name: str, kw: dict, w: int, total: int):
    opt = _opt()
    rows = _rows(opt, build_scheduler(opt, name, total_steps=total, warmup_steps=w, **kw), 3 * total)
    for t, row in enumerate(rows):
        assert row == pytest.approx([formula(name, kw, t, b, total, w) for b in BASES], rel=1e-12, abs=1e-15), t


@pytest.mark.parametrize("kw", [{}, {"pct_start": 0.5, "div_factor": 10.0, "final_div_factor": 100.0},
                                {"anneal_strategy": "linear", "three_phase": True}])
def test_onecycle_is_torchs_onecycle_then_holds_its_final_lr(kw: dict):
    total = 20
    ours, theirs = _opt(momentum=0.9), _opt(momentum=0.9)
    got = _rows(ours, build_scheduler(ours, "onecycle", total_steps=total, **kw), 2 * total)
    want = _rows(theirs, lrs.OneCycleLR(theirs, max_lr=list(BASES), total_steps=total, **kw), total - 1)
    assert got[:total] == want
    assert all(row == want[-1] for row in got[total:])  # held at the last value of the cycle


@pytest.mark.parametrize("kw", [{"factor": 0.5, "patience": 0, "min_lr": 0.005}, {"factor": 0.1, "patience": 2}])
def test_plateau_is_torchs_reduce_on_plateau(kw: dict):
    ours, theirs = _opt(), _opt()
    metric = lambda i: float(i % 3 == 0)  # noqa: E731
    assert _rows(ours, build_scheduler(ours, "plateau", **kw), 30, metric) == \
        _rows(theirs, lrs.ReduceLROnPlateau(theirs, **kw), 30, metric)


@pytest.mark.parametrize("name", ["cosine", "linear", "polynomial"])
def test_a_replan_continues_the_shape_from_where_it_is(name: str):
    total, t0, new = 20, 8, 30
    opt = _opt()
    sched = build_scheduler(opt, name, total_steps=total, warmup_steps=2)
    _rows(opt, sched, t0)
    f0 = opt.param_groups[0]["lr"] / BASES[0]
    replan_schedule(sched, new)
    rows = _rows(opt, sched, new - t0 + 5)
    for i, row in enumerate(rows):
        x = min(1.0, i / (new - t0))
        unit = {"cosine": (1 + math.cos(math.pi * x)) / 2, "linear": 1 - x, "polynomial": 1 - x}[name]
        assert row[0] == pytest.approx(BASES[0] * f0 * unit, rel=1e-12, abs=1e-15), i


def test_the_registry_is_the_list_of_schedules():
    assert SCHEDULERS == tuple(SCHEDULES) == tuple(m.SCHEDULE.name for m in MODULES)
    assert SCHEDULERS == ("constant", "step", "multistep", "cosine", "onecycle", "linear", "polynomial", "plateau",
                          "wsd")
    for name, s in SCHEDULES.items():
        assert s.options.model_fields["name"].default == name
        assert (s.factor is None) == (s.build is not None), name
        assert s.resume in ("replan", "keep", "refuse") and (s.resume == "refuse") == bool(s.refuse_why)


# --------------------------------------------------------------------------- the recipe's schedule section
OLD_COSINE = {"name": "cosine", "warmup_epochs": 1, "min_lr": 0.0, "step_epochs": 30.0, "milestones": [0.5, 0.75],
              "gamma": 0.1, "power": 1.0, "patience": 2, "decay_fraction": 0.2, "decay_shape": "1-sqrt"}


def test_a_recipe_with_every_schedules_flat_keys_at_their_defaults_loads():
    r = recipe_from_dict({"schedule": OLD_COSINE})
    assert r.schedule.model_dump() == {"name": "cosine", "warmup_epochs": 1.0, "min_lr": 0.0}
    r = recipe_from_dict({"schedule": {**OLD_COSINE, "name": "step", "step_epochs": 2.0}})
    assert r.schedule.model_dump() == {"name": "step", "warmup_epochs": 1.0, "step_epochs": 2.0, "gamma": 0.1}


@pytest.mark.parametrize("section, line", [
    ({**OLD_COSINE, "gamma": 0.5},
     "schedule.gamma=0.5 does not apply to schedule.name=cosine; gamma is a key of step, multistep, plateau"),
    ({"name": "step", "min_lr": 1e-4},
     "schedule.min_lr=0.0001 does not apply to schedule.name=step; min_lr is a key of cosine, wsd"),
    ({"name": "constant", "decay_shape": "linear"},
     "schedule.decay_shape='linear' does not apply to schedule.name=constant; decay_shape is a key of wsd"),
])
def test_a_key_of_another_schedule_with_a_value_of_its_own_is_refused_in_one_line(section, line):
    with pytest.raises(RecipeError) as exc:
        recipe_from_dict({"schedule": section})
    assert str(exc.value) == line
    stored = recipe_from_dict({"schedule": section}, stored=True)  # a run's saved recipe: it did nothing there
    assert set(stored.schedule.model_dump()) == set(SCHEDULES[section["name"]].options.model_fields)


def test_overrides_switch_the_schedule_and_errors_name_the_plain_key():
    r = load_recipe("digits", ["schedule.name=wsd", "schedule.decay_fraction=0.3"])
    assert (r.schedule.name, r.schedule.decay_fraction, r.schedule.warmup_epochs) == ("wsd", 0.3, 1.0)
    assert load_recipe("digits", ["schedule.name=plateau", "schedule.patience=0"]).schedule.patience == 0
    for overrides, line in [
        (["schedule.decay_fraction=0.3"], "schedule.decay_fraction=0.3 does not apply to schedule.name=cosine"),
        (["schedule.name=cosin"], "recipe key 'schedule.name': 'cosin' is not allowed; allowed: constant, step"),
        (["schedule.min_lr=-1"], "recipe key 'schedule.min_lr': -1 is not allowed"),
        (["schedule.minlr=0"], "unknown recipe key 'schedule.minlr' (did you mean 'schedule.min_lr'?)"),
        (["schedule=3"], "recipe key 'schedule' must be a mapping of keys, got 3"),
    ]:
        with pytest.raises(RecipeError) as exc:
            load_recipe("digits", overrides)
        assert str(exc.value).startswith(line), overrides


def test_a_sweep_trial_with_another_schedule_leaves_the_base_schedules_keys_out():
    from trickbag.experiments.sweep.space import recipe_with

    base = load_recipe("digits", ["schedule.min_lr=0.001"]).model_dump(mode="json")
    r = recipe_with(base, {"schedule.name": "step", "schedule.gamma": 0.5})
    assert r.schedule.model_dump() == {"name": "step", "warmup_epochs": 1.0, "step_epochs": 30.0, "gamma": 0.5}
    assert recipe_with(base, {"schedule.name": "wsd"}).schedule.min_lr == 0.001  # wsd takes min_lr too


def test_settle_schedule_leaves_unknown_keys_and_names_to_the_schema():
    assert settle_schedule({"name": "cosine", "nope": 1}) == {"name": "cosine", "nope": 1}
    assert settle_schedule({"name": "nope", "gamma": 3}) == {"name": "nope", "gamma": 3}
    assert settle_schedule(7) == 7
