"""``train.threads``: the ``auto`` rule (a table of machines), the counters it reads, the per-epoch
re-check, the recipe key, and what a run says about it."""

from __future__ import annotations

import os

import pytest
import torch

from trickbag import runtime
from trickbag.errors import RecipeError
from trickbag.recipe import load_recipe
from trickbag.train.threads import ThreadCheck, apply_threads


@pytest.fixture(autouse=True)
def one_thread_after():
    yield
    torch.set_num_threads(1)  # the suite's setting (conftest), whatever a test chose


# (cores, busy elsewhere, OMP_NUM_THREADS) -> threads, and why
CASES = [
    (2, 0.0, None, 2, "idle: every core"),
    (2, 0.25, None, 2, "a little background work leaves both cores free enough"),
    (2, 0.35, None, 1, "a third of a core busy elsewhere: that core is not free"),
    (2, 1.0, None, 1, "one competing process: the other core"),
    (2, 1.6, None, 1, "load beyond one core still leaves one thread"),
    (2, 4.0, None, 1, "load 4 on 2 cores: never fewer than one thread"),
    (8, 0.0, None, 8, "8 idle cores"),
    (8, 2.2, None, 6, "8 cores, 2.2 busy: 5.8 free, 6 threads"),
    (8, 2.5, None, 5, "8 cores, 2.5 busy: 5.5 free, 5 threads"),
    (1, 0.0, None, 1, "one core"),
    (2, 0.0, "1", 1, "OMP_NUM_THREADS wins over an idle machine"),
    (2, 3.0, "4", 4, "OMP_NUM_THREADS wins over the load (the user's choice, even above the cores)"),
    (2, 0.0, "3,1", 3, "a nested OpenMP list: its first level"),
    (2, 1.0, "0", 1, "OMP_NUM_THREADS=0 is no thread count: the load decides"),
    (2, 0.0, "", 2, "empty: unset"),
    (2, 0.0, "lots", 2, "not a number: unset"),
]


@pytest.mark.parametrize("cores,busy,omp,expected,why", CASES, ids=[c[-1] for c in CASES])
def test_choose_threads(cores, busy, omp, expected, why):
    assert runtime.choose_threads(cores, busy, omp) == expected, why


def test_busy_seconds_sums_the_process_cores_without_idle_and_iowait(tmp_path):
    stat = tmp_path / "stat"
    #        user nice system idle iowait irq softirq steal guest guest_nice
    stat.write_text("cpu  900 0 90 9000 90 0 0 0 0 0\n"
                    "cpu0 100 5 20 1000 50 1 2 3 0 0\n"
                    "cpu1 200 0 40 2000 10 0 0 0 7 0\n"
                    "cpu2 600 0 30 6000 30 0 0 0 0 0\n"
                    "intr 12345\n")
    hz = os.sysconf("SC_CLK_TCK")
    # cpu0: 100+5+20+1+2+3 = 131 busy ticks; cpu1: 200+40 = 240 (guest time is inside user already)
    assert runtime._busy_seconds({0, 1}, str(stat)) == pytest.approx((131 + 240) / hz)
    assert runtime._busy_seconds({2}, str(stat)) == pytest.approx(630 / hz)
    assert runtime._busy_seconds({5}, str(stat)) is None  # none of the process's cores listed
    assert runtime._busy_seconds({0}, str(tmp_path / "missing")) is None


def test_busy_elsewhere_subtracts_this_process():
    before = runtime.CpuSample(wall=10.0, busy=100.0, own=5.0)
    # 2 s: the cores were busy 3.0 CPU-s, 1.0 of them this process -> others used 1.0 core on average
    assert runtime.busy_elsewhere(before, runtime.CpuSample(12.0, 103.0, 6.0)) == pytest.approx(1.0)
    # this process's own threads account for all of it: nobody else is busy
    assert runtime.busy_elsewhere(before, runtime.CpuSample(12.0, 102.0, 7.5)) == 0.0


def test_busy_elsewhere_without_proc_stat_uses_the_load_average(monkeypatch):
    monkeypatch.setattr(os, "getloadavg", lambda: (3.1, 2.0, 1.0))
    before = runtime.CpuSample(wall=0.0, busy=None, own=0.0)
    # load 3.1 of which this process ran 1.0 core over the window
    assert runtime.busy_elsewhere(before, runtime.CpuSample(2.0, None, 2.0)) == pytest.approx(2.1)


def test_sample_cpu_reads_this_machine():
    s = runtime.sample_cpu()
    assert s.own >= 0 and s.wall > 0
    if os.path.exists("/proc/stat"):
        assert s.busy is not None and s.busy > 0


def scripted(monkeypatch, busy_per_window):
    """sample_cpu returning 1-second windows in which other processes use ``busy_per_window[i]`` cores."""
    samples = [runtime.CpuSample(0.0, 0.0, 0.0)]
    for b in busy_per_window:
        last = samples[-1]
        samples.append(runtime.CpuSample(last.wall + 1.0, last.busy + b + 0.5, last.own + 0.5))
    it = iter(samples)
    monkeypatch.setattr(runtime, "sample_cpu", lambda: next(it))
    monkeypatch.setattr(runtime, "usable_cores", lambda: 2)


def test_auto_threads_decides_sets_and_changes_only_when_the_decision_does(monkeypatch):
    scripted(monkeypatch, [1.0, 1.1, 0.0, 0.1, 0.0, 1.5, 0.0, 1.0])
    auto = runtime.AutoThreads(env={})
    assert auto.start() == 1 and torch.get_num_threads() == 1  # one core busy elsewhere
    assert auto.describe() == "auto -> 1 (2 cores, 1.0 busy with other processes)"
    assert auto.recheck() is None  # still one core busy: no change
    assert auto.recheck() is None and torch.get_num_threads() == 1  # the core is free: once is not enough ...
    assert auto.recheck() == 2 and torch.get_num_threads() == 2  # ... twice in a row is
    assert auto.recheck() is None
    assert auto.recheck() == 1 and torch.get_num_threads() == 1  # busy again: fewer threads at once
    assert auto.recheck() is None  # a pause in the other work ...
    assert auto.recheck() is None and torch.get_num_threads() == 1  # ... that does not last: no change


def test_auto_threads_recheck_waits_for_a_long_enough_window(monkeypatch):
    samples = iter([runtime.CpuSample(0.0, 0.0, 0.0), runtime.CpuSample(1.0, 1.0, 0.0),
                    runtime.CpuSample(1.05, 1.05, 0.0), runtime.CpuSample(2.0, 1.0, 0.0)])
    monkeypatch.setattr(runtime, "sample_cpu", lambda: next(samples))
    monkeypatch.setattr(runtime, "usable_cores", lambda: 2)
    auto = runtime.AutoThreads(env={})
    assert auto.start() == 1
    assert auto.recheck(min_window_s=0.2) is None  # 50 ms: too short to judge, the window grows
    # measured from the start-up decision (1.0 s ago): 0.0 busy elsewhere, seen once
    assert auto.recheck(min_window_s=0.2) is None and auto._more == 2


def test_auto_threads_follows_omp_num_threads():
    auto = runtime.AutoThreads(min_window_s=0.0, env={"OMP_NUM_THREADS": "1"})
    assert auto.start() == 1
    assert auto.describe() == "auto -> 1 (OMP_NUM_THREADS=1)"


def test_thread_check_records_changes_at_epoch_starts(monkeypatch):
    scripted(monkeypatch, [1.0, 0.0, 0.0, 1.0])
    check = ThreadCheck(runtime.AutoThreads(env={}))

    class Epoch:
        epoch = 0

    state = Epoch()
    for e in range(3):
        state.epoch = e
        check.on_epoch_start(state)
    assert check.report() == "auto -> 1 (2 cores, 1.0 busy with other processes); 2 from epoch 2, 1 from epoch 3"


def test_apply_threads_numbers_null_and_deterministic(monkeypatch):
    assert apply_threads(3, False) == (None, "3") and torch.get_num_threads() == 3
    torch.set_num_threads(2)
    assert apply_threads(None, False) == (None, "2 (torch's default)") and torch.get_num_threads() == 2
    monkeypatch.setattr(runtime, "usable_cores", lambda: 3)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    auto, text = apply_threads("auto", True)  # deterministic: never the load
    assert auto is None and torch.get_num_threads() == 3 and text.startswith("auto -> 3 (deterministic")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert apply_threads("auto", True)[0] is None and torch.get_num_threads() == 1
    auto, text = apply_threads("auto", False)
    assert isinstance(auto, runtime.AutoThreads) and text == ""


def test_recipe_key_default_and_bad_values():
    from trickbag.config.schema import TrainConfig

    assert TrainConfig().threads == "auto"
    assert load_recipe("digits-tricks", []).train.threads == "auto"  # sets no threads: the default
    assert load_recipe("digits", ["train.threads=null"]).train.threads is None  # older runs' recipe.yaml
    assert load_recipe("digits", ["train.threads=4"]).train.threads == 4
    with pytest.raises(
        RecipeError, match=r"^recipe key 'train.threads': 0 is not allowed: must be auto or a number >= 1$"
    ):
        load_recipe("digits", ["train.threads=0"])
    with pytest.raises(RecipeError, match=r"^recipe key 'train.threads': 'many' is not allowed; allowed: auto, "
                                          r"a whole number, null$"):
        load_recipe("digits", ["train.threads=many"])


def test_a_run_says_what_auto_chose(tiny_recipe, monkeypatch, capsys):
    from trickbag.runs.run import run_recipe

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    result = run_recipe(tiny_recipe("train.threads=auto", "run.plots=false"))
    out = capsys.readouterr().out
    assert "  threads: auto -> 1 (OMP_NUM_THREADS=1)" in out.splitlines()
    summary = (result.run_dir / "summary.txt").read_text().splitlines()
    assert "threads    auto -> 1 (OMP_NUM_THREADS=1)" in summary
    fixed = run_recipe(tiny_recipe("train.threads=1", "run.plots=false", name="b"), quiet=True)
    assert "threads    1" in (fixed.run_dir / "summary.txt").read_text().splitlines()


def test_a_run_on_a_busy_machine_takes_one_thread(tiny_recipe, monkeypatch):
    from trickbag.runs.run import run_recipe

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(runtime, "usable_cores", lambda: 2)
    clock = iter(range(10**6))

    def busy_machine():  # every window: others keep 1.5 cores busy
        t = float(next(clock))
        return runtime.CpuSample(wall=t, busy=2.0 * t, own=0.5 * t)

    monkeypatch.setattr(runtime, "sample_cpu", busy_machine)
    torch.set_num_threads(2)
    result = run_recipe(tiny_recipe("train.threads=auto", "run.plots=false"), quiet=True)
    assert torch.get_num_threads() == 1
    assert result.threads == "auto -> 1 (2 cores, 1.5 busy with other processes)"
