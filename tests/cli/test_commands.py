"""The command line, run as a user runs it: ``python -m trickbag ...`` in a subprocess."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch
import yaml
from PIL import Image

from trickbag.config import builtin_recipes

TIMEOUT = 300


# one intra-op thread, like the test process: on a loaded 2-core machine torch's default thread pool
# makes a one-epoch run an order of magnitude slower
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def trickbag(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trickbag", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=TIMEOUT, env=ENV)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A 1-epoch digits run with a narrow CNN, trained through the CLI."""
    tmp = tmp_path_factory.mktemp("cli")
    r = trickbag("train", "digits", "train.epochs=1", "model.kwargs={width: 8}", "run.dir=runs", "run.name=t",
                 "run.progress=false", "run.plots=false", "log.tensorboard=false", cwd=tmp)
    assert r.returncode == 0, r.stderr
    return tmp, tmp / "runs" / "t", r


def test_train_writes_the_run_and_prints_the_summary(run_dir):
    tmp, d, r = run_dir
    assert (d / "checkpoints" / "best.pt").is_file() and (d / "summary.txt").is_file()
    assert re.search(r"test acc\s+\d\.\d{4} on 360 samples", r.stdout)  # 20 % of digits' 1797 images
    assert str(d.relative_to(tmp)) in r.stdout


def test_eval_prints_the_test_metrics_of_best_pt(run_dir):
    tmp, d, train = run_dir
    r = trickbag("eval", str(d), "--device", "cpu", cwd=tmp)
    assert r.returncode == 0, r.stderr
    m = re.fullmatch(r"test acc (\d\.\d{4})  loss (\d+\.\d{4})  \((\d+) samples\)\n  top5 \d\.\d{4}  f1 \d\.\d{4}  "
                     r"auroc \d\.\d{4}\n", r.stdout)
    assert m, r.stdout
    expected = re.search(r"test acc\s+(\d\.\d{4}) on (\d+) samples.*loss (\d+\.\d{4})", train.stdout)
    assert (m.group(1), m.group(3), m.group(2)) == expected.groups()


def test_predict_classifies_a_png_like_the_model_does(run_dir):
    from sklearn.datasets import load_digits

    from trickbag.data.sources import build_data
    from trickbag.recipe import recipe_from_dict
    from trickbag.train.checkpoint_files import load_checkpoint
    from trickbag.train.parts import model_for

    tmp, d, _ = run_dir
    digits = load_digits()
    img = digits.images[5]  # an 8x8 image with values 0..16 (bright = ink)
    png = tmp / "digit.png"
    Image.fromarray((img * 255 / 16).round().astype(np.uint8), mode="L").save(png)
    r = trickbag("predict", str(d / "checkpoints" / "best.pt"), str(png), "--top", "10", cwd=tmp)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    head = re.fullmatch(r"class (\d)  \(p=(\d\.\d{4})\)", lines[0])
    assert head, r.stdout
    ranked = [(int(name), float(p)) for name, p in (line.split() for line in lines[1:])]
    assert len(ranked) == 10 and sorted(c for c, _ in ranked) == list(range(10))
    probs = [p for _, p in ranked]
    assert probs == sorted(probs, reverse=True) and sum(probs) == pytest.approx(1.0, abs=1e-3)
    assert (int(head.group(1)), float(head.group(2))) == ranked[0]

    # reference: the checkpoint's model on the same pixels, normalised like the training data
    ckpt = load_checkpoint(d / "checkpoints" / "best.pt")
    recipe = recipe_from_dict(ckpt["recipe"])
    data = build_data(recipe.data)
    model = model_for(recipe, data)
    model.load_state_dict(ckpt.get("eval_model") or ckpt["model"])  # the weights predict uses (EMA here)
    model.eval()
    x = data.normalise(torch.tensor(img, dtype=torch.float32).view(1, 1, 8, 8) / 16.0)
    with torch.no_grad():
        ref = torch.softmax(model(x), dim=1)[0]
    for c, p in ranked:
        assert p == pytest.approx(float(ref[c]), abs=0.02)  # 8-bit PNG quantisation only


def test_existing_run_directory_exits_2_with_one_line(run_dir, capsys, monkeypatch):
    from trickbag.cli import main  # in-process: the refusal comes before anything is built

    tmp, d, _ = run_dir
    before = {p: p.stat().st_mtime_ns for p in d.rglob("*")}
    monkeypatch.chdir(tmp)
    assert main(["train", "train.epochs=1", "run.dir=runs", "run.name=t"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("trickbag: error: run directory") and "--resume" in err
    assert {p: p.stat().st_mtime_ns for p in d.rglob("*")} == before


def test_bad_override_exits_2_with_one_line_and_writes_nothing(tmp_path):
    r = trickbag("train", "optim.lrr=0.1", "run.dir=runs", "run.name=x", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr == "trickbag: error: unknown recipe key 'optim.lrr' (did you mean 'optim.lr'?)\n"
    assert r.stdout == ""
    assert list(tmp_path.iterdir()) == []


def test_recipes_and_no_command(tmp_path):
    procs = {
        "recipes": subprocess.Popen([sys.executable, "-m", "trickbag", "recipes"], cwd=tmp_path, text=True,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV),
        "none": subprocess.Popen([sys.executable, "-m", "trickbag"], cwd=tmp_path, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV),
    }
    out = {k: (p.communicate(timeout=TIMEOUT), p.returncode) for k, p in procs.items()}

    (stdout, stderr), rc = out["recipes"]
    assert rc == 0, stderr
    for name, path in builtin_recipes().items():
        desc = yaml.safe_load(path.read_text()).get("description", "")
        assert re.search(rf"^{name}\s+{re.escape(desc)}$", stdout, re.M), stdout

    (stdout, stderr), rc = out["none"]
    assert rc == 2  # no command: usage, and a non-zero status for scripts
    for cmd in ("train", "eval", "predict", "recipes", "env"):
        assert cmd in stdout
    assert list(tmp_path.iterdir()) == []


def test_env_reports_torch_and_devices(capsys):
    from trickbag.cli import main  # in-process: torch is already imported here

    assert main(["env"]) == 0
    out = capsys.readouterr().out
    assert f"torch        {torch.__version__}" in out
    assert "CUDA         " + ("available" if torch.cuda.is_available() else "not available") in out
    assert f"CPU threads  {torch.get_num_threads()}" in out
    if not torch.cuda.is_available():
        assert "device auto  cpu" in out


def test_a_torchrun_worker_ends_through_exit_handlers_flush_and_os_exit(monkeypatch):
    """Workers skip the interpreter's teardown (gloo threads may still release tensors then)."""
    import atexit
    import io

    from trickbag import cli

    calls = []

    class Stream(io.StringIO):
        def flush(self):
            calls.append("flush")

    class Exited(Exception):
        pass

    def fake_exit(code):
        calls.append(("os._exit", code))
        raise Exited

    monkeypatch.setattr(atexit, "_run_exitfuncs", lambda: calls.append("atexit"))
    monkeypatch.setattr(cli.os, "_exit", fake_exit)
    monkeypatch.setattr(cli.sys, "stdout", Stream())
    monkeypatch.setattr(cli.sys, "stderr", Stream())
    monkeypatch.setattr(cli, "_main", lambda argv: 3)
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(Exited):
        cli.main()  # as a program, in a worker of a 2-process job
    assert calls == ["atexit", "flush", "flush", ("os._exit", 3)]
    calls.clear()
    assert cli.main(["train"]) == 3 and calls == []  # called with arguments (from Python): returns
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert cli.main() == 3 and calls == []  # a single process ends normally
    monkeypatch.delenv("LOCAL_RANK")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert cli.main() == 3 and calls == []  # not started by torchrun


def test_output_piped_into_a_reader_that_left_gives_no_traceback():
    """`trickbag tricks | head -1`: a closed pipe ends the command quietly (exit 1, nothing on stderr)."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the command writes: every write fails with EPIPE
    try:
        r = subprocess.run([sys.executable, "-m", "trickbag", "tricks"], stdout=write_end, stderr=subprocess.PIPE,
                           env=ENV, timeout=TIMEOUT)
    finally:
        os.close(write_end)
    err = r.stderr.decode()
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert r.returncode == 1
