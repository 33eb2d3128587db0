"""Exact resume: a run killed with SIGKILL at several points and resumed ends bit-identical.

The reference is the tiny recipe (mixup + EMA + warmup/cosine, dropout, deterministic) trained
without interruption. The same run is crashed four times with the kill-switch plug-in (``TRICKBAG_TEST_KILL_AT``
seam (a real ``SIGKILL`` of a real ``python -m trickbag`` process) and resumed each time with
``trickbag train --resume RUN_DIR``:

1. mid-epoch, two updates after a step checkpoint (update 6; newest checkpoint: update 4);
2. just after a step checkpoint was written (update 12);
3. during the evaluation of epoch 2, EMA weights swapped in (newest checkpoint: update 16);
4. while ``step-00000020.pt`` is being written (temporary file cut in half, never renamed).

The final checkpoint must equal the reference's in every tensor (weights, EMA weights, momentum
buffers, scheduler, mixup generator, RNG states) and every number of the history and metrics.csv,
except timings.
"""

from __future__ import annotations

import shutil
import signal
from pathlib import Path

import pytest

from trickbag.runs.naming import find_resume_checkpoint

from ._helpers import (
    UPDATES_PER_EPOCH,
    csv_without_times,
    load,
    run_inprocess,
    run_subprocess,
    training_state_differences,
    write_recipe,
)
from .killswitch import PLUGIN


def _crash(args: list[str], kill_at: str, cwd: Path) -> str:
    proc = run_subprocess(args + [PLUGIN, "--quiet"], cwd, env={"TRICKBAG_TEST_KILL_AT": kill_at})
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    return proc.stdout


def _newest(run: Path) -> tuple[str, dict]:
    path, ckpt = find_resume_checkpoint(run)
    return path.name, ckpt["counters"]


def test_sigkill_at_four_points_then_resume_is_bit_identical(tmp_path, reference_run, capsys):
    recipe = write_recipe(tmp_path)
    run = tmp_path / "runs" / "k"
    start = ["train", str(recipe), f"run.dir={tmp_path / 'runs'}", "run.name=k"]
    resume = ["train", "--resume", str(run)]

    # 1. mid-epoch: killed after update 6; the newest checkpoint is step 4, epoch 1 batch 4
    _crash(start, "step:6", tmp_path)
    name, c = _newest(run)
    assert (name, c["step"], c["epoch"], c["batch_idx"]) == ("step-00000004.pt", 4, 0, 4)
    assert not (run / "checkpoints" / "last.pt").exists()

    # 2. just after a checkpoint: killed right after step-12 was written (epoch 2, batch 3)
    out = _crash(resume, "step:12", tmp_path)
    assert "from step-00000004.pt" in out
    name, c = _newest(run)
    assert (name, c["step"], c["epoch"], c["batch_idx"]) == ("step-00000012.pt", 12, 1, 12 - UPDATES_PER_EPOCH)

    # 3. during evaluation of epoch 2 (after update 18): only step-16 survives from that epoch
    out = _crash(resume, "eval:2", tmp_path)
    assert "from step-00000012.pt" in out
    name, c = _newest(run)
    assert (name, c["step"]) == ("step-00000016.pt", 16)
    assert load(run / "checkpoints" / "last.pt")["counters"]["epoch"] == 1  # still epoch 1's

    # 4. during a checkpoint write: the half-written temporary file never replaces anything
    out = _crash(resume, "write:step-00000020.pt", tmp_path)
    assert "from step-00000016.pt" in out
    ckpts = run / "checkpoints"
    temporaries = list(ckpts.glob(".step-00000020.pt.*.tmp"))
    assert len(temporaries) == 1 and not (ckpts / "step-00000020.pt").exists()
    name, c = _newest(run)  # epoch 2 finished (last.pt at update 18) before the crash
    assert (name, c["step"], c["epoch"], c["batch_idx"]) == ("last.pt", 18, 2, 0)

    # resume to the end (in-process, same code path as the command line)
    rc, out, err = run_inprocess(resume + ["--quiet"], capsys)
    assert rc == 0, err
    assert "from last.pt at epoch 3, update 18" in out
    assert not list(ckpts.glob(".*.tmp")), "stale temporary files are removed on resume"

    ref, got = load(reference_run / "checkpoints" / "last.pt"), load(ckpts / "last.pt")
    assert got["counters"]["step"] == 3 * UPDATES_PER_EPOCH
    assert "eval_model" in got and got["plugins"].get("mix") is not None  # EMA weights, mixup generator
    assert training_state_differences(ref, got) == []
    assert csv_without_times(reference_run / "metrics.csv") == csv_without_times(run / "metrics.csv")
    assert training_state_differences(load(reference_run / "checkpoints" / "best.pt"), load(ckpts / "best.pt")) == []


def test_truncated_newest_checkpoint_falls_back_to_previous_and_resumes_exactly(tmp_path, reference_run, capsys):
    run = tmp_path / "ref"
    shutil.copytree(reference_run, run)
    ckpts = run / "checkpoints"
    final = load(ckpts / "last.pt")
    # the newest checkpoint (last.pt, update 27) is cut short, as a crash while copying leaves it
    data = (ckpts / "last.pt").read_bytes()
    (ckpts / "last.pt").write_bytes(data[: len(data) // 3])

    rc, out, err = run_inprocess(["train", "--resume", str(run), "--quiet"], capsys)
    assert rc == 0, err
    assert "last.pt" in err and "truncated" in err  # says which file was unusable, and why
    assert "falling back to" in err and "step-00000024.pt" in err
    assert "from step-00000024.pt at epoch 3, update 24" in out
    # updates 25-27 re-run from the older checkpoint reproduce the lost one exactly
    assert training_state_differences(final, load(ckpts / "last.pt")) == []


def test_resume_order_follows_recorded_position_not_file_times(tmp_path, reference_run, capsys):
    """A copied run directory (``cp -r``) loses file times: the counters inside decide."""
    run = tmp_path / "ref"
    shutil.copytree(reference_run, run)
    ckpts = run / "checkpoints"
    import os

    # make the oldest checkpoint look newest
    os.utime(ckpts / "step-00000020.pt", (2e9, 2e9))
    path, ckpt = find_resume_checkpoint(run)
    assert path.name == "last.pt" and ckpt["counters"]["step"] == 27


@pytest.mark.parametrize("counters", [None, {"epoch": "x", "step": 1}])
def test_checkpoint_without_training_position_is_skipped(tmp_path, counters, capsys):
    import torch

    ckpts = tmp_path / "checkpoints"
    ckpts.mkdir()
    bad = {"model": {}} if counters is None else {"model": {}, "counters": counters}
    torch.save(bad, ckpts / "step-00000009.pt")
    torch.save({"model": {}, "counters": {"epoch": 0, "step": 4, "batch_idx": 4}}, ckpts / "step-00000004.pt")
    path, ckpt = find_resume_checkpoint(tmp_path)
    assert path.name == "step-00000004.pt"
    assert "step-00000009.pt" in capsys.readouterr().err


def test_epoch_end_checkpoint_holds_the_state_every_plugin_recorded_for_that_epoch(tmp_path):
    """EPOCH_END runs plug-ins in reverse order; ``last.pt`` must still include what early stopping
    and the CSV logger recorded for the epoch (written at the CHECKPOINT event, after every EPOCH_END)."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from trickbag.train.plugins.checkpoints import Checkpointing
    from trickbag.train.plugins.early_stopping import EarlyStop
    from trickbag.train.plugins.loggers import CSVLogger
    from trickbag.train.trainer import Trainer

    from ._helpers import differences

    torch.manual_seed(0)
    x, y = torch.randn(32, 4), torch.randint(0, 2, (32,))
    model = torch.nn.Linear(4, 2)
    early = EarlyStop("val/acc", "max", patience=5)
    csv = CSVLogger(tmp_path / "metrics.csv")
    ckpt = Checkpointing(tmp_path / "ckpt")
    loader = DataLoader(TensorDataset(x, y), batch_size=8)
    t = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), loader, loader,
                plugins=[early, csv, ckpt], max_epochs=2, device="cpu")
    t.fit()
    saved = load(tmp_path / "ckpt" / "last.pt")
    assert saved["plugins"]["EarlyStop"] == early.state_dict()
    assert differences(saved["plugins"]["CSVLogger"], csv.state_dict()) == []
    assert len(saved["plugins"]["CSVLogger"]["rows"]) == 2  # both epochs' rows


def test_kill_before_the_first_checkpoint_resumes_from_the_beginning(tmp_path, reference_run, capsys):
    """No dead end: killed after update 3 (the first step checkpoint is at 4), the run has no checkpoint;
    the same ``train`` command points at ``--resume``, which trains it from the start to the reference's end."""
    recipe = write_recipe(tmp_path)
    run = tmp_path / "runs" / "k"
    start = ["train", str(recipe), f"run.dir={tmp_path / 'runs'}", "run.name=k"]
    _crash(start, "step:3", tmp_path)
    assert (run / "recipe.yaml").is_file() and not list(run.rglob("*.pt"))
    rc, out, err = run_inprocess(start + ["--quiet"], capsys)
    assert rc == 2 and "already exists" in err and f"trickbag train --resume {run}" in err
    rc, out, err = run_inprocess(["train", "--resume", str(run), "--quiet"], capsys)
    assert rc == 0, err
    assert f"resuming {run}: it has no checkpoint yet, so it trains from the beginning" in out
    assert "the beginning (no checkpoint yet)" in (run / "resumes.log").read_text()
    got, ref = load(run / "checkpoints" / "last.pt"), load(reference_run / "checkpoints" / "last.pt")
    assert training_state_differences(ref, got) == []
    assert csv_without_times(reference_run / "metrics.csv") == csv_without_times(run / "metrics.csv")
