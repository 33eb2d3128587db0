"""``[tool.trickbag.lint]`` in pyproject.toml (select / ignore / exclude, the CLI's names), found by walking up
from the linted path; ``# noqa: CODE`` keeps working beside it."""

from trickbag.cli import main

WRONG = """
def fit(model, loader, val_loader, optimizer, epochs):
    for _epoch in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
        model.eval(){noqa}
        evaluate(model, val_loader)
"""


def project(tmp_path, section: str | None):
    (tmp_path / ".git").mkdir(parents=True)
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "fixtures").mkdir()
    (tmp_path / "src" / "pkg" / "train.py").write_text(WRONG.format(noqa=""))
    (tmp_path / "fixtures" / "wrong.py").write_text(WRONG.format(noqa=""))
    if section is not None:
        (tmp_path / "pyproject.toml").write_text(f'[project]\nname = "x"\n\n[tool.trickbag.lint]\n{section}\n')
    return tmp_path


def lint(capsys, *args) -> tuple[int, list[str]]:
    code = main(["lint", *map(str, args)])
    out = capsys.readouterr().out
    return code, sorted(line.split(":")[0].rsplit("/", 2)[-2] + "/" + line.split(":")[0].rsplit("/", 1)[-1]
                        for line in out.splitlines() if line.strip())


def test_without_a_section_everything_is_linted(tmp_path, capsys):
    root = project(tmp_path, None)
    assert lint(capsys, root) == (1, ["fixtures/wrong.py", "pkg/train.py"])


def test_exclude_and_ignore_from_pyproject_found_from_a_subfolder(tmp_path, capsys):
    root = project(tmp_path, 'exclude = ["fixtures"]')
    assert lint(capsys, root) == (1, ["pkg/train.py"])
    # pre-commit names files one by one: an excluded file named explicitly is skipped too
    assert lint(capsys, root / "fixtures" / "wrong.py", root / "src" / "pkg" / "train.py") == (1, ["pkg/train.py"])
    root_ignored = project(tmp_path / "b", 'ignore = ["TB202"]')
    assert lint(capsys, root_ignored / "src" / "pkg") == (0, [])


def test_select_from_pyproject_and_the_command_line_wins(tmp_path, capsys):
    root = project(tmp_path, 'select = ["TB403"]')
    assert lint(capsys, root) == (0, [])
    assert lint(capsys, root, "--select", "TB202") == (1, ["fixtures/wrong.py", "pkg/train.py"])


def test_a_bad_section_is_a_usage_error(tmp_path, capsys):
    root = project(tmp_path, 'exlude = ["fixtures"]')
    assert main(["lint", str(root)]) == 2
    assert "unknown key" in capsys.readouterr().err


def test_noqa_still_silences_one_line(tmp_path, capsys):
    root = project(tmp_path, 'exclude = ["fixtures"]')
    (root / "src" / "pkg" / "train.py").write_text(WRONG.format(noqa="  # noqa: TB202"))
    assert lint(capsys, root) == (0, [])
