"""Profiling from a recipe."""

from __future__ import annotations

import json

from trickbag.recipe import load_recipe

BASE = [
    "data.name=fake", "data.num_samples=96", "data.batch_size=16", "train.epochs=1", "train.device=cpu",
    "log.tensorboard=false", "run.progress=false", "run.plots=false", "schedule.warmup_epochs=0",
    "model.kwargs={width: 8}", "optim.lr=0.1",
]


def test_profile_writes_a_chrome_trace_of_the_requested_steps(tmp_path):
    from trickbag.runs.run import run_recipe

    recipe = load_recipe("digits", [*BASE, "tricks.profile.enabled=true", "tricks.profile.wait=1",
                                    "tricks.profile.warmup=1", "tricks.profile.steps=2",
                                    f"run.dir={tmp_path}", "run.name=prof"])
    result = run_recipe(recipe, quiet=True)
    trace = json.loads((result.run_dir / "profile" / "trace.json").read_text())
    steps = {e["name"] for e in trace["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")}
    assert steps == {"ProfilerStep#2", "ProfilerStep#3"}  # after 1 waiting and 1 warm-up update
    assert any(str(e.get("name", "")).startswith("aten::") for e in trace["traceEvents"])
    assert "Self CPU" in (result.run_dir / "profile" / "ops.txt").read_text()
