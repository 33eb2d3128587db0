"""``trickbag lint`` and ``trickbag audit``: exit codes, output formats, usage errors as one line,
and ``lint`` never importing torch."""

import json
import subprocess
import sys
import textwrap

import pytest

from trickbag.cli import main

WRONG = textwrap.dedent("""\
    for x, y in loader:
        loss_fn(model(x), y).backward()
        optimizer.step()
    state = torch.load("w.pt")  # noqa: TB403
    """)
RIGHT = WRONG.replace("for x, y in loader:\n", "for x, y in loader:\n    optimizer.zero_grad()\n")


@pytest.fixture
def files(tmp_path):
    (tmp_path / "wrong.py").write_text(WRONG)
    (tmp_path / "right.py").write_text(RIGHT)
    return tmp_path


def test_lint_exit_codes_and_text_output(files, capsys):
    assert main(["lint", str(files / "right.py")]) == 0
    assert main(["lint", str(files / "wrong.py")]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines() == [f"{files / 'wrong.py'}:3:5: TB104 the loop steps the optimizer but never zeroes the "
                                "gradients: backward() keeps adding into .grad (fix: call optimizer.zero_grad() "
                                "once per update (at the top of the iteration, or after step()))"]
    assert "1 finding in 1 file" in err


def test_lint_json_and_folders(files, capsys):
    assert main(["lint", str(files), "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert [(d["path"], d["line"], d["col"], d["rule"]) for d in data] == [(str(files / "wrong.py"), 3, 5, "TB104")]
    assert {"path", "line", "col", "rule", "message"} <= set(data[0])


def test_lint_select_ignore(files, capsys):
    assert main(["lint", str(files), "--ignore", "TB104"]) == 0
    assert main(["lint", str(files), "--select", "TB4,TB2"]) == 0
    assert main(["lint", str(files), "--select", "grads-never-zeroed"]) == 1


@pytest.mark.parametrize("argv, message", [
    (["lint", "does/not/exist.py"], "no such file or folder"),
    (["lint", ".", "--select", "TB999"], "unknown rule 'TB999'"),
    (["lint", ".", "--ignore", "nonsense"], "unknown rule 'nonsense'"),
    (["lint", "--explain", "TB999"], "unknown rule 'TB999'"),
    (["lint"], "give at least one file"),
    (["audit", "does/not/exist.py"], "no such script"),
    (["audit"], "give the training script to run"),
    (["audit", "--steps", "3"], "ARGS are optional"),
])
def test_usage_errors_are_one_line_and_exit_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("trickbag: error:") and message in err[0]


def test_explain_and_list(capsys):
    assert main(["lint", "--explain", "tb105"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("TB105 accumulated-loss-not-divided:") and "Wrong:" in out and "Right:" in out
    assert main(["lint", "--list"]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert len(listing) >= 20 and listing[0].startswith("TB001")


def test_lint_markdown_page(tmp_path, capsys):
    page = tmp_path / "page.md"
    page.write_text("Text\n\n```python\n>>> import os\n>>> os.environ['CUDA_VISIBLE_DEVICE'] = '0'\n```\n")
    assert main(["lint", str(page)]) == 1
    assert capsys.readouterr().out.startswith(f"{page}:5:5: TB401 ")


def test_audit_steps_before_the_script_is_checked_by_argparse(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["audit", "--steps", "0", "x.py"])
    assert exc.value.code == 2 and "must be >= 1" in capsys.readouterr().err


@pytest.mark.parametrize("args", [["lint", "RIGHT"], ["lint", "--explain", "TB101"], ["lint", "--list"]])
def test_lint_does_not_import_torch(files, args):
    argv = [str(files / "right.py") if a == "RIGHT" else a for a in args]
    code = (f"import sys\nfrom trickbag.cli import main\nrc = main({argv!r})\n"
            "assert 'torch' not in sys.modules, 'torch imported'\nsys.exit(rc)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


@pytest.mark.filterwarnings("ignore:Detected call of")
def test_audit_command(tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""\
        import sys, torch
        from torch import nn
        model = nn.Linear(3, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        print("argv", sys.argv[1:])
        for _ in range(100):
            model(torch.randn(2, 3)).sum().backward()
            opt.step()
        """))
    assert main(["audit", "--steps", "3", str(script), "--flag"]) == 1
    out, err = capsys.readouterr()
    assert "argv ['--flag']" in out
    assert "grads-never-zeroed" in err and f"{script.name}:8" in err and "stopped after 3 optimizer steps" in err
    clean = tmp_path / "clean.py"
    clean.write_text(script.read_text().replace("    model(", "    opt.zero_grad()\n    model("))
    assert main(["audit", "--steps", "5", str(clean)]) == 0


def test_lint_all_shows_low_confidence_findings_and_the_exit_status_follows_what_is_shown(tmp_path, capsys):
    script = tmp_path / "load.py"
    script.write_text("import torch\nstate = torch.load('last.pt')\n")
    (tmp_path / ".git").mkdir()  # the repository's root: no packaging file names torch
    assert main(["lint", str(script)]) == 0
    assert capsys.readouterr().out == ""
    assert main(["lint", "--all", str(script)]) == 1
    assert capsys.readouterr().out.startswith(f"{script}:2:9: TB403 (low confidence) ")
    assert main(["lint", "--all", "--format", "json", str(script)]) == 1
    assert [(d["rule"], d["severity"], d["confidence"]) for d in json.loads(capsys.readouterr().out)] == [
        ("TB403", "warning", "low")]


def test_lint_list_shows_severity_opt_in_and_runtime_only_codes(capsys):
    assert main(["lint", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(ln.startswith("TB404") and "[warning, opt-in]" in ln for ln in lines)
    assert any(ln.startswith("TB104") and "[error]" in ln for ln in lines)
    assert any(ln.startswith("TB502") and "param-not-in-optimizer" in ln for ln in lines)


@pytest.mark.filterwarnings("ignore:Detected call of")
def test_lint_and_audit_agree_on_code_and_exit_status(tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""\
        import torch
        from torch import nn
        model = nn.Linear(3, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        for _ in range(10):
            model(torch.randn(2, 3)).sum().backward()
            optimizer.step()
        """))
    assert main(["lint", str(script)]) == 1
    lint_out = capsys.readouterr().out
    assert main(["audit", "--steps", "3", str(script)]) == 1
    audit_err = capsys.readouterr().err
    assert " TB104 " in lint_out and "TB104  grads-never-zeroed" in audit_err
