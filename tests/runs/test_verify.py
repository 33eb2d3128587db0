"""``trickbag verify-resume``: a real kill-and-resume certificate, the comparison, bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from trickbag.cli import main
from trickbag.runs.verify import compare_checkpoints, compare_metrics, compare_runs

TINY = ["data.name=fake", "data.num_samples=120", "data.batch_size=16", "train.epochs=2", "model.name=mlp",
        "train.checkpoint_every_steps=3", "run.plots=false", "log.tensorboard=false"]


# --------------------------------------------------------------------------- end to end
def _tensors(obj: object) -> int:
    if isinstance(obj, torch.Tensor):
        return 1
    if isinstance(obj, dict):
        return sum(_tensors(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_tensors(v) for v in obj)
    return 0


def test_two_sigkills_on_a_tiny_recipe_certify_identical(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the children inherit it
    monkeypatch.chdir(tmp_path)
    rc = main(["verify-resume", "digits", *TINY, "--kills", "2", "--seed", "5", "--out", "v"])
    out, err = capsys.readouterr()
    assert rc == 0, out + err
    verdict = out.strip().splitlines()[-1]
    # kill 1 aims at 31 % of training (seed 5): it lands mid-run, so something was resumed
    assert verdict.startswith("verdict: IDENTICAL: killed"), out
    rows = [ln for ln in out.splitlines() if ln.startswith("| 1 |") or ln.startswith("| 2 |")]
    assert len(rows) == 2, out
    # last.pt: weights, optimizer, RNG, ... every tensor in it; best.pt: the MLP's weights alone (weights only)
    ckpts = tmp_path / "v" / "runs" / "reference" / "checkpoints"
    best = torch.load(ckpts / "best.pt", weights_only=True)
    assert best["weights_only"] and "optimizer" not in best
    n_best = sum(isinstance(v, torch.Tensor) for v in best["model"].values())
    n_last = _tensors(torch.load(ckpts / "last.pt", weights_only=True))
    assert n_last > n_best
    assert "differences: none" in out and f"last.pt ({n_last} tensors)" in out and f"best.pt ({n_best} tensors)" in out
    assert (tmp_path / "v" / "certificate.md").read_text() == out
    # the killed run really was SIGKILLed and resumed: its second process is a resume
    killed_logs = sorted(p.name for p in (tmp_path / "v" / "logs").iterdir())
    assert killed_logs[:2] == ["killed-1.log", "killed-2.log"], killed_logs
    assert "train --resume" in (tmp_path / "v" / "logs" / "killed-2.log").read_text()
    assert (tmp_path / "v" / "runs" / "reference" / "checkpoints" / "last.pt").is_file()


# --------------------------------------------------------------------------- the comparison
def _checkpoint(name: str, **change) -> dict:
    ckpt = {
        "model": {"w": torch.zeros(3, 4), "n": torch.tensor(7)},
        "optimizer": {"state": {0: {"momentum_buffer": torch.ones(3, 4)}}, "param_groups": [{"lr": 0.1}]},
        "counters": {"epoch": 2, "step": 12},
        "history": [{"train/loss": 0.5, "train/epoch_time_s": 1.0, "val/acc": float("nan")}],
        "plugins": {"clock": {"wall_time_s": 3.0}, "EMA": {"shadow": torch.full((2,), 0.25)}},
        "recipe": {"name": "r", "train": {"seed": 0}, "run": {"name": name, "dir": f"/runs/{name}"}},
    }
    for key, value in change.items():
        ckpt[key] = value
    return ckpt


def _save(tmp_path: Path, name: str, ckpt: dict) -> Path:
    path = tmp_path / f"{name}.pt"
    torch.save(ckpt, path)
    return path


def test_checkpoints_equal_but_for_run_location_and_timings(tmp_path):
    other = _checkpoint("killed")
    other["history"][0]["train/epoch_time_s"] = 9.0
    other["plugins"]["clock"]["wall_time_s"] = 4.0
    n, found = compare_checkpoints(_save(tmp_path, "a", _checkpoint("reference")), _save(tmp_path, "b", other))
    assert (n, found) == (4, [])


def test_one_element_of_one_tensor_is_found_with_its_difference(tmp_path):
    model = {"w": torch.zeros(3, 4), "n": torch.tensor(7)}
    model["w"][1, 2] = 0.5
    n, found = compare_checkpoints(_save(tmp_path, "a", _checkpoint("reference")),
                                   _save(tmp_path, "b", _checkpoint("killed", model=model)), "last.pt")
    assert [(d.where, d.detail) for d in found] == [
        ("last.pt model/w", "max abs difference 0.5 (1 of 12 elements)")]


def test_every_kind_of_entry_is_compared(tmp_path):
    ref = _save(tmp_path, "a", _checkpoint("reference"))
    cases = {
        "optimizer/state/0/momentum_buffer": {"optimizer": {"state": {0: {"momentum_buffer": torch.ones(3, 4) * 2}},
                                                            "param_groups": [{"lr": 0.1}]}},
        "optimizer/param_groups[0]/lr": {"optimizer": {"state": {0: {"momentum_buffer": torch.ones(3, 4)}},
                                                       "param_groups": [{"lr": 0.2}]}},
        "counters/step": {"counters": {"epoch": 2, "step": 11}},
        "history[0]/train/loss": {"history": [{"train/loss": 0.25, "train/epoch_time_s": 1.0,
                                               "val/acc": float("nan")}]},
        "plugins/EMA/shadow": {"plugins": {"clock": {"wall_time_s": 3.0}, "EMA": {"shadow": torch.full((2,), 0.5)}}},
        "recipe/train/seed": {"recipe": {"name": "r", "train": {"seed": 1}, "run": {"name": "k", "dir": "/k"}}},
        "model/n": {"model": {"w": torch.zeros(3, 4), "n": torch.tensor(7.0)}},  # dtype differs
        "/": {"eval_model": {"w": torch.zeros(3, 4)}},  # an entry only one side has
    }
    for where, change in cases.items():
        _, found = compare_checkpoints(ref, _save(tmp_path, "b", _checkpoint("killed", **change)), "x")
        assert [d.where for d in found] == [f"x {where}"], (where, found)


def _csv(path: Path, rows: list[str]) -> Path:
    path.write_text("\n".join(["epoch,step,train/loss,train/samples_per_s,train/epoch_time_s,val/acc", *rows]) + "\n")
    return path


def test_metrics_rows_differing_in_one_value_or_missing_are_found(tmp_path):
    ref = _csv(tmp_path / "a.csv", ["0,6,1.25,900,0.1,0.8", "1,12,0.5,950,0.1,0.9"])
    timings_only = _csv(tmp_path / "b.csv", ["0,6,1.25,100,7.5,0.8", "1,12,0.5,120,8.0,0.9"])
    assert compare_metrics(ref, timings_only) == (2, [])
    one_value = _csv(tmp_path / "c.csv", ["0,6,1.25,900,0.1,0.8", "1,12,0.5,950,0.1,0.91"])
    _, found = compare_metrics(ref, one_value)
    assert [(d.where, d.detail) for d in found] == [
        ("metrics.csv row 2 (epoch 1, step 12)", "val/acc '0.9' vs '0.91'")]
    short = _csv(tmp_path / "d.csv", ["0,6,1.25,900,0.1,0.8"])
    _, found = compare_metrics(ref, short)
    assert len(found) == 1 and found[0].where.startswith("metrics.csv row 2")
    assert found[0].detail.startswith("only in the reference")


def test_runs_compare_last_best_and_metrics(tmp_path):
    for name in ("reference", "killed"):
        (tmp_path / name / "checkpoints").mkdir(parents=True)
        _save(tmp_path / name / "checkpoints", "last", _checkpoint(name))
        _csv(tmp_path / name / "metrics.csv", ["0,6,1.25,900,0.1,0.8"])
    _save(tmp_path / "reference" / "checkpoints", "best", _checkpoint("reference"))
    compared, found = compare_runs(tmp_path / "reference", tmp_path / "killed")
    assert compared == ["last.pt (4 tensors)", "metrics.csv (1 rows, timing columns ignored)"]
    assert [(d.where, d.detail) for d in found] == [("checkpoints/best.pt", "only in the reference")]


# --------------------------------------------------------------------------- bad input
_LIGHT = ("import sys\nfrom trickbag.cli import main\ntry:\n    rc = main(sys.argv[1:])\nexcept SystemExit as e:\n"
          "    rc = e.code\nprint('rc', rc, 'torch', 'torch' in sys.modules)")


@pytest.mark.parametrize("args, message", [
    (["digits", "optim.lrr=0.1"], "unknown recipe key 'optim.lrr' (did you mean 'optim.lr'?)"),
    (["digits", "--kills", "0"], "argument --kills: must be >= 1, got 0"),
    (["digits", "run.name=x"], "verify-resume chooses run.name itself"),
    (["nosuch"], "recipe 'nosuch' not found"),
])
def test_bad_input_is_one_line_exit_2_nothing_written_torch_not_imported(tmp_path, args, message):
    proc = subprocess.run([sys.executable, "-c", _LIGHT, "verify-resume", *args], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.stdout.strip() == "rc 2 torch False", proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("trickbag: error: ") and message in lines[0], proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_an_existing_out_folder_is_refused(tmp_path, capsys):
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "x").write_text("mine")
    assert main(["verify-resume", "digits", "--out", str(tmp_path / "v")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "already exists" in err
    assert [p.name for p in (tmp_path / "v").iterdir()] == ["x"]
