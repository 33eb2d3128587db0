"""Progress a person can read: a bar on a terminal, plain lines (no carriage return) in a log."""

from __future__ import annotations

import io
import subprocess
import sys

from trickbag.train.plugins.progress import ProgressBar, format_duration


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _fit(plugin, tiny_recipe):
    from trickbag.train.build import build

    trainer, _ = build(tiny_recipe("train.epochs=3"))
    trainer.add_plugin(plugin)
    return trainer.fit()


def test_plain_lines_when_not_a_terminal(tiny_recipe):
    out = io.StringIO()
    _fit(ProgressBar(file=out, monitor="val/acc", mode="max"), tiny_recipe)
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue() and len(lines) == 3
    assert all(line.startswith(f"epoch {i}/3  loss ") for i, line in enumerate(lines, 1))
    assert all("val/acc" in line and "run ETA" in line for line in lines)
    assert lines[-1].endswith("run ETA 0s")


def test_a_bar_on_a_terminal_shows_the_monitored_metric(tiny_recipe):
    out = FakeTerminal()
    _fit(ProgressBar(file=out, every_steps=1, monitor="val/loss", mode="min"), tiny_recipe)
    text = out.getvalue()
    assert "\r" in text and "epoch 3/3" in text and "val/loss" in text


def _last_render_per_epoch(text):
    last = {}
    for part in text.replace("\r", "\n").splitlines():
        if part.startswith("epoch "):
            last[part.split()[1].rstrip(":")] = part
    return last


def test_the_bar_ends_each_epoch_at_every_batch_whatever_the_refresh_and_accumulation(tiny_recipe):
    from trickbag.train.build import build

    for every, accumulate in ((10, 1), (3, 1), (2, 4)):  # refresh interval not a divisor; a short last update
        out = FakeTerminal()
        trainer, ctx = build(tiny_recipe("train.epochs=2", f"train.accumulate={accumulate}"))
        trainer.add_plugin(ProgressBar(file=out, every_steps=every))
        trainer.fit()
        n = len(ctx.train_loader)
        last = _last_render_per_epoch(out.getvalue())
        assert sorted(last) == ["1/2", "2/2"], out.getvalue()
        for line in last.values():
            assert "100%" in line and f" {n}/{n} " in line, (every, accumulate, line)


def test_format_duration():
    assert [format_duration(s) for s in (0, 59.4, 60, 3599, 3600)] == ["0s", "59s", "1m00s", "59m59s", "1h00m"]


def test_a_redirected_command_line_run_has_no_carriage_return(tmp_path):
    log = tmp_path / "train.log"
    with open(log, "w") as fh:
        r = subprocess.run([sys.executable, "-m", "trickbag", "train", "data.name=fake", "data.num_samples=120",
                            "train.epochs=2", f"run.dir={tmp_path}", "run.plots=false", "log.tensorboard=false"],
                           stdout=fh, stderr=subprocess.STDOUT, timeout=300, env={"OMP_NUM_THREADS": "1",
                                                                                 "PATH": "/usr/bin:/bin"})
    text = log.read_text()
    assert r.returncode == 0, text[-2000:]
    assert "\r" not in text and "epoch 1/2  loss" in text and "epoch 2/2  loss" in text
