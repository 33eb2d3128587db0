"""Security: nothing a checkpoint, a recipe file or a run directory contains can run code, unless the
user names that code; no shell commands built from user strings; no network.

Each refusal test has a control that shows the payload is live (it does run when loaded unsafely),
so the test fails if trickbag ever loads it that way.
"""

from __future__ import annotations

import ast
import socket
import sys
from pathlib import Path

import pytest
import torch
import yaml

import trickbag
from trickbag.errors import CheckpointError
from trickbag.train.checkpoint_files import load_checkpoint

from ._helpers import run_inprocess


class _OpensFile:
    """Unpickling this calls ``open(marker, "w")``: a file appears if the pickle ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _evil_checkpoint(path: Path, marker: Path) -> Path:
    net = torch.nn.Linear(2, 2)
    torch.save({"model": net.state_dict(), "counters": {"epoch": 1, "step": 1}, "x": _OpensFile(marker)}, path)
    return path


def _one_error_line(rc: int, err: str) -> str:
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("trickbag: error: ") and "Traceback" not in err, err
    return lines[0]


def test_code_running_checkpoint_is_refused_and_never_runs(tmp_path, capsys):
    marker = tmp_path / "pwned"
    evil = _evil_checkpoint(tmp_path / "evil.pt", marker)
    # control: the payload is live (torch.load with weights_only=False runs it)
    control_marker = tmp_path / "control"
    torch.load(_evil_checkpoint(tmp_path / "control.pt", control_marker), weights_only=False)  # noqa: TB403 (the control: this load must run the code)
    assert control_marker.exists()

    with pytest.raises(CheckpointError, match="refused: it would import and call 'io.open'.*nothing from it was run"):
        load_checkpoint(evil)
    # every way a checkpoint enters trickbag: eval, resume, initial weights, distillation teacher
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "recipe.yaml").write_text("data: {name: fake}\nmodel: {name: mlp}\n")
    _evil_checkpoint(run / "checkpoints" / "last.pt", marker)
    for argv in (
        ["eval", str(evil)],
        ["train", "--resume", str(run)],
        ["train", "data.name=fake", "model.name=mlp", f"model.weights={evil}", f"run.dir={tmp_path / 'r'}"],
        ["train", "data.name=fake", "model.name=mlp", "tricks.distillation.enabled=true",
         f"tricks.distillation.teacher={evil}", f"run.dir={tmp_path / 'r'}"],
    ):
        line = _one_error_line(*run_inprocess(argv, capsys)[::2])
        assert "refused" in line, (argv, line)
        assert not marker.exists(), argv
    from trickbag.nn import load_matching

    with pytest.raises(CheckpointError):
        load_matching(torch.nn.Linear(2, 2), evil)
    assert not marker.exists()


def test_recipe_yaml_cannot_construct_python_objects(tmp_path, capsys):
    marker = tmp_path / "pwned"
    text = f"data: {{name: fake}}\nmodel: !!python/object/apply:builtins.open [{str(marker)!r}, w]\n"
    control = tmp_path / "control"
    yaml.unsafe_load(text.replace(str(marker), str(control)))  # control: the tag is live
    assert control.exists()

    recipe = tmp_path / "evil.yaml"
    recipe.write_text(text)
    line = _one_error_line(*run_inprocess(["train", str(recipe), f"run.dir={tmp_path / 'r'}"], capsys)[::2])
    assert "could not determine a constructor for the tag" in line
    # the same file as a run directory's recipe.yaml
    run = tmp_path / "run"
    run.mkdir()
    (run / "recipe.yaml").write_text(text)
    line = _one_error_line(*run_inprocess(["train", "--resume", str(run)], capsys)[::2])
    assert "is not valid YAML" in line
    # and as an override value: read as a plain string, then refused by the schema
    rc, _, err = run_inprocess(["train", f"model.kwargs=!!python/object/apply:builtins.open [{marker}, w]",
                                f"run.dir={tmp_path / 'r'}"], capsys)
    _one_error_line(rc, err)
    assert not marker.exists() and not (tmp_path / "r").exists()


@pytest.fixture
def code_module(tmp_path, monkeypatch):
    """A module whose import writes a marker file, with a model factory ``make``."""
    name = f"trickbag_test_code_{tmp_path.name.replace('-', '_')}"
    marker = tmp_path / "imported"
    (tmp_path / f"{name}.py").write_text(
        f"import torch\nopen({str(marker)!r}, 'w').close()\n\n"
        "def make(num_classes, **kw):\n"
        "    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, num_classes))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name, marker
    sys.modules.pop(name, None)


def test_model_code_named_in_a_checkpoint_is_not_imported_without_consent(tmp_path, capsys, code_module):
    from trickbag.recipe import recipe_from_dict

    name, marker = code_module
    recipe = recipe_from_dict({"data": {"name": "fake", "num_samples": 40}, "model": {"name": f"{name}:make"}})
    weights = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 4)).state_dict()
    ckpt = tmp_path / "downloaded.pt"
    torch.save({"recipe": recipe.model_dump(mode="json"), "model": weights, "classes": list("abcd")}, ckpt)

    line = _one_error_line(*run_inprocess(["eval", str(ckpt)], capsys)[::2])
    assert f"names model code '{name}:make'" in line and "--trust-model-code" in line
    line = _one_error_line(*run_inprocess(["train", "data.name=fake", "model.name=mlp", f"run.dir={tmp_path / 'r'}",
                                            "tricks.distillation.enabled=true",
                                            f"tricks.distillation.teacher={ckpt}"], capsys)[::2])
    assert "names model code" in line
    assert not marker.exists() and name not in sys.modules
    # control: with the user's consent the same checkpoint is built, which imports the module
    rc, out, err = run_inprocess(["eval", str(ckpt), "--trust-model-code", "--split", "val"], capsys)
    assert rc == 0, err
    assert marker.exists() and out.startswith("val acc ")


def test_model_code_the_user_names_in_the_recipe_is_allowed(tmp_path, capsys, code_module):
    """``model.name=package.module:function`` on the command line (or in the user's recipe) runs that code."""
    name, marker = code_module
    rc, _, err = run_inprocess(["train", "data.name=fake", "data.num_samples=40", f"model.name={name}:make",
                                "train.epochs=1", f"run.dir={tmp_path / 'r'}", "run.name=mine", "--quiet",
                                "run.plots=false", "run.progress=false", "log.tensorboard=false"], capsys)
    assert rc == 0, err
    assert marker.exists()


def _calls(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
                yield node, f"{f.value.id}.{f.attr}"
            elif isinstance(f, ast.Name):
                yield node, f.id


# argument lists built by trickbag, no shell (verify-resume starts `trickbag train` children to kill them)
SUBPROCESS_ALLOWED = {"launch.py", "experiments/ablate/cells.py", "runs/verify.py"}


def test_no_shell_commands_and_subprocess_only_with_argument_lists():
    src = Path(trickbag.__file__).parent
    found_subprocess = set()
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node, name in _calls(tree):
            assert name not in {"os.system", "os.popen", "os.execv", "os.execvp", "os.execl", "os.execlp",
                                "os.spawnv", "os.spawnl", "pty.spawn", "eval", "exec"}, f"{rel}:{node.lineno} {name}"
            for kw in node.keywords:
                assert not (kw.arg == "shell" and not (isinstance(kw.value, ast.Constant) and not kw.value.value)), \
                    f"{rel}:{node.lineno} shell=..."
            if name.startswith("subprocess."):
                found_subprocess.add(rel)
                first = node.args[0] if node.args else None
                assert not isinstance(first, (ast.Constant, ast.JoinedStr, ast.BinOp)), \
                    f"{rel}:{node.lineno}: {name} with a command string"
    assert found_subprocess <= SUBPROCESS_ALLOWED, found_subprocess


def test_training_opens_no_network_connection(tmp_path, monkeypatch, capsys):
    attempts = []

    def refuse(self, address, *a, **k):
        attempts.append(address)
        raise OSError("network access refused by the test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    rc, _, err = run_inprocess(["train", "data.name=fake", "data.num_samples=40", "model.name=mlp", "train.epochs=1",
                                f"run.dir={tmp_path}", "run.name=n", "--quiet", "log.tensorboard=true",
                                "run.plots=true", "run.progress=false"], capsys)
    assert rc == 0, err
    rc, _, err = run_inprocess(["eval", str(tmp_path / "n")], capsys)
    assert rc == 0, err
    assert attempts == []
