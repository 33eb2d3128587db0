"""The lint driver: noqa, output format, JSON, Markdown code blocks with the page's line numbers,
folders (skipped directories, --exclude), parse errors as findings."""

import json
import textwrap

import pytest

from trickbag.audit.lint import iter_files, lint_file, lint_paths, lint_source, markdown_python, to_json

NEVER_ZEROED = textwrap.dedent("""
    for x, y in loader:
        loss_fn(model(x), y).backward()
        optimizer.step()
    """)


def test_format_is_path_line_col_code_message_fix():
    (f,) = lint_source(NEVER_ZEROED, "t.py")
    assert (f.path, f.line, f.col, f.rule, f.name) == ("t.py", 4, 5, "TB104", "grads-never-zeroed")
    assert f.format().startswith("t.py:4:5: TB104 ") and "(fix: " in f.format()


@pytest.mark.parametrize("comment, silenced", [
    ("# noqa", True), ("# noqa: TB104", True), ("# NOQA:TB101,TB104", True), ("# noqa: TB101", False),
    ("# noqa: E501", False), ("# trickbag wants zero_grad", False)])
def test_noqa(comment, silenced):
    src = NEVER_ZEROED.replace("optimizer.step()", f"optimizer.step()  {comment}")
    assert (lint_source(src) == []) is silenced
    assert lint_source(src, noqa=False) != []


def test_file_level_noqa():
    assert lint_source("# trickbag: noqa\n" + NEVER_ZEROED) == []


def test_select_ignore():
    assert lint_source(NEVER_ZEROED, select=["TB1"]) != []
    assert lint_source(NEVER_ZEROED, ignore=["grads-never-zeroed"]) == []
    with pytest.raises(ValueError):
        lint_source(NEVER_ZEROED, select=["TB777"])


def test_json_has_the_documented_keys():
    data = json.loads(to_json(lint_source(NEVER_ZEROED, "t.py")))
    assert data == [{"path": "t.py", "line": 4, "col": 5, "rule": "TB104", "name": "grads-never-zeroed",
                     "message": data[0]["message"], "fix": data[0]["fix"], "severity": "error",
                     "confidence": "high"}]


def test_syntax_and_encoding_errors_are_findings(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f(:\n")
    latin = tmp_path / "latin.py"
    latin.write_bytes(b"x = '\xe9'\n")
    assert [f.rule for f in lint_file(bad)] == ["TB001"]
    assert [f.rule for f in lint_file(latin)] == ["TB001"]


def test_a_codec_a_package_registers_is_read_as_utf8(tmp_path):
    """``# -*- coding: future_fstrings -*-`` names a codec the future-fstrings package registers: the file is
    valid Python where the project runs, so it is linted as UTF-8 (its mistakes reported), not one TB001; a coding
    line no codec knows on bytes that are not UTF-8 stays a TB001 that names the encoding."""
    cookie = tmp_path / "cookie.py"
    cookie.write_text("# -*- coding: future_fstrings -*-\n" + NEVER_ZEROED + "print(f'{model}: é')\n")
    plain = lint_source(NEVER_ZEROED, "plain.py")
    assert [(f.rule, f.line + 1) for f in plain] == [(f.rule, f.line) for f in lint_file(cookie)]
    assert plain and "TB001" not in {f.rule for f in lint_file(cookie)}
    broken = tmp_path / "broken.py"
    broken.write_bytes(b"# -*- coding: future_fstrings -*-\nx = '\xe9'\n")
    assert [(f.rule, "unknown encoding: future_fstrings" in f.message) for f in lint_file(broken)] == [("TB001", True)]


MARKDOWN = """\
# Page

```python
>>> import torch
>>> for x, y in loader:
...     loss_fn(model(x), y).backward()
...     optimizer.step()
>>> torch.zeros(2)
tensor([0., 0.])
>>> state = torch.load("w.pt")  # noqa: TB403
```

```text
optimizer.step()
```

```py
os.environ["CUDA_VISIBLE_DEVICE"] = "1"
```
"""


def test_markdown_blocks_keep_the_page_lines_and_columns(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(MARKDOWN)
    blocks = markdown_python(MARKDOWN)
    assert len(blocks) == 2
    assert blocks[0][0].splitlines()[4] == "for x, y in loader:" and blocks[0][1][5] == 4
    assert [(f.rule, f.line, f.col) for f in lint_file(page)] == [("TB104", 7, 9), ("TB401", 18, 1)]


def test_markdown_block_that_does_not_parse_does_not_hide_the_others(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("```python\ndef broken(:\n```\n\n```python\ntorch.load(args.x)\n```\n")
    assert [(f.rule, f.line) for f in lint_file(page, torch="old")] == [("TB001", 2), ("TB403", 6)]


def test_folder_walk_skips_venv_git_build_and_excluded(tmp_path):
    for rel in ["a.py", "pkg/b.py", ".venv/c.py", ".git/d.py", "build/e.py", "pkg/__pycache__/f.py",
                "skip/g.py", "notes.md", "x.egg-info/h.py"]:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(NEVER_ZEROED)
    files = {p.relative_to(tmp_path).as_posix() for p in iter_files([tmp_path], exclude=["skip"])}
    assert files == {"a.py", "pkg/b.py"}
    assert {f.path for f in lint_paths([tmp_path], exclude=["skip"])} == {str(tmp_path / "a.py"),
                                                                        str(tmp_path / "pkg" / "b.py")}
    with pytest.raises(FileNotFoundError):
        list(iter_files([tmp_path / "missing"]))
