"""``run_script``: a user's script under the audit, attached to the optimizers it builds, stopped
after N optimizer steps, with findings at the script's lines."""

import sys
import textwrap
from pathlib import Path

import pytest

from trickbag.audit.script import run_script

WRONG = textwrap.dedent("""\
    import sys
    import torch
    import torch.nn.functional as F
    from torch import nn

    print("args:", sys.argv[1:])
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 2))
    teacher = nn.Linear(5, 2).eval()
    optimizer = torch.optim.SGD(model[2].parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 3)
    for i in range(1000):
        x, y = torch.randn(4, 5), torch.randint(0, 2, (4,))
        with torch.no_grad():
            teacher(x)
        loss = F.cross_entropy(model(x), y) / 2
        loss.backward()
        scheduler.step()
        if i % 2 == 1:
            optimizer.step()
            optimizer.zero_grad()
    print("never reached")
    """)

CLEAN = textwrap.dedent("""\
    import torch
    from torch import nn
    from torch.optim.lr_scheduler import LinearLR, SequentialLR, CosineAnnealingLR
    torch.manual_seed(0)
    g, d = nn.Linear(3, 4), nn.Sequential(nn.Linear(4, 1))
    og, od = torch.optim.Adam(g.parameters()), torch.optim.Adam(d.parameters())
    sched = SequentialLR(og, [LinearLR(og, 0.1, total_iters=2), CosineAnnealingLR(og, 5)], milestones=[2])
    for step in range(6):
        z = torch.randn(8, 3)
        od.zero_grad()
        (d(g(z).detach()).mean() - d(torch.randn(8, 4)).mean()).backward()
        od.step()
        og.zero_grad()
        (-d(g(z)).mean()).backward()
        og.step()
        sched.step()
    print("done")
    """)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "train.py"
    path.write_text(text)
    return path


@pytest.mark.filterwarnings("ignore:Detected call of")
def test_wrong_script_is_stopped_and_findings_point_at_its_lines(tmp_path, capsys):
    script = write(tmp_path, WRONG)
    argv = sys.argv[:]
    result = run_script(script, ["--lr", "0.1"], steps=4, report=False)
    assert result.outcome == "stopped" and result.report.counts["optimizer steps"] == 4
    assert sys.argv == argv
    assert "args: ['--lr', '0.1']" in capsys.readouterr().out
    found = {(f.rule, f.where.rpartition(":")[2]) for f in result.report.findings}
    # the optimizer.step() line, as in-process; one line, one rule (per micro-batch explains before-step)
    assert found == {("param-not-in-optimizer", "20"), ("scheduler-per-micro-batch", "18")}
    assert all(Path(f.where.rpartition(":")[0]).resolve() == script.resolve() for f in result.report.findings)


def test_clean_script_runs_to_the_end(tmp_path, capsys):
    result = run_script(write(tmp_path, CLEAN), steps=50)
    captured = capsys.readouterr()
    assert result.outcome == "finished" and result.report.findings == []
    assert result.report.counts["optimizer steps"] == 12 and result.report.counts["scheduler steps"] == 6
    assert "done" in captured.out and captured.err.startswith("trickbag audit: no findings")


def test_failing_and_exiting_scripts(tmp_path):
    failing = write(tmp_path, "raise RuntimeError('boom')\n")
    assert run_script(failing, report=False).outcome == "failed"
    (tmp_path / "exit.py").write_text("import sys\nsys.exit(3)\n")
    result = run_script(tmp_path / "exit.py", report=False)
    assert (result.outcome, result.exit_code) == ("exited", 3)


def test_missing_script(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such script"):
        run_script(tmp_path / "nope.py")
