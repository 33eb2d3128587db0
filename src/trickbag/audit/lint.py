"""``trickbag lint``: run the registered rules over Python files, folders and the ```python blocks of
Markdown pages; ``# noqa`` handling, output as text lines or JSON.  Standard library only.

>>> from trickbag.audit.lint import lint_source
>>> code = '''
... for x, y in loader:
...     loss = loss_fn(model(x), y)
...     loss.backward()
...     optimizer.step()
... '''
>>> for f in lint_source(code, "train.py"):
...     print(f.format())
train.py:5:5: TB104 the loop steps the optimizer but never zeroes the gradients: backward() keeps adding into .grad (fix: call optimizer.zero_grad() once per update (at the top of the iteration, or after step()))
"""

from __future__ import annotations

import ast
import fnmatch
import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Iterator, Optional, Sequence

from trickbag.audit import rules_api, rules_env, rules_eval, rules_loop  # noqa: F401  (registers the rules)
from trickbag.audit._flow import FileModel
from trickbag.audit.registry import RULES, Rule, select_rules

__all__ = ["Finding", "lint_source", "lint_file", "lint_paths", "iter_files", "markdown_python", "to_json",
           "SKIP_DIRS"]

#: folders never walked into when a folder is linted
SKIP_DIRS = {".venv", "venv", ".git", "__pycache__", "build", "dist", ".tox", ".nox", ".eggs", "node_modules",
             "site-packages", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".hg", ".svn", ".ipynb_checkpoints"}
_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*))?", re.I)
_FILE_NOQA = re.compile(r"^#\s*trickbag:\s*noqa\s*$", re.M)


@dataclass(frozen=True)
class Finding:
    """One lint finding: where (1-based line and column), which rule, what and how to fix it."""

    path: str
    line: int
    col: int
    rule: str
    name: str
    message: str
    fix: str

    def format(self) -> str:
        """``path:line:col: CODE message (fix: ...)``."""
        return f"{self.path}:{self.line}:{self.col}: {self.rule} {self.message} (fix: {self.fix})"


def _noqa_codes(line: str) -> Optional[set[str]]:
    """The codes a ``# noqa`` comment silences (an empty set: every code), None without one."""
    m = _NOQA.search(line)
    if not m:
        return None
    return {c.upper() for c in re.split(r"[\s,]+", m.group("codes") or "") if c}


def _silenced(finding: Finding, lines: Sequence[str]) -> bool:
    if not 1 <= finding.line <= len(lines):
        return False
    codes = _noqa_codes(lines[finding.line - 1])
    return codes is not None and (not codes or finding.rule in codes)


def _syntax_finding(path: str, exc: Exception, line_map: Optional[dict[int, int]] = None) -> Finding:
    line = getattr(exc, "lineno", None) or 1
    col = getattr(exc, "offset", None) or 1
    if line_map:
        col += line_map.get(line, 0)
    msg = getattr(exc, "msg", None) or str(exc)
    rule = RULES["TB001"]
    return Finding(path, line, col, rule.code, rule.name, f"the file does not parse: {msg}", rule.fix)


def _run_rules(tree: ast.Module, path: str, rules: Iterable[Rule], col_shift: dict[int, int]) -> list[Finding]:
    model = FileModel(tree)
    seen, out = set(), []
    for r in rules:
        for hit in r.check(model):
            line = getattr(hit.node, "lineno", 1)
            col = getattr(hit.node, "col_offset", 0) + 1 + col_shift.get(line, 0)
            key = (r.code, line, col)
            if key not in seen:
                seen.add(key)
                out.append(Finding(path, line, col, r.code, r.name, hit.message, hit.fix or r.fix))
    return out


def lint_source(text: str, path: str = "<string>", *, select: Optional[Iterable[str]] = None,
                ignore: Optional[Iterable[str]] = None, noqa: bool = True,
                col_shift: Optional[dict[int, int]] = None, noqa_lines: Optional[Sequence[str]] = None) -> list[Finding]:
    """Lint Python source ``text`` (reported as ``path``); ``noqa=False`` ignores ``# noqa`` comments.

    An unknown rule in ``select``/``ignore`` is a ValueError.  A file that does not parse gives one
    TB001 finding.
    """
    rules = select_rules(select, ignore)
    codes = {r.code for r in rules}
    if noqa and _FILE_NOQA.search(text):
        return []
    try:
        tree = ast.parse(text, filename=path)
    except (SyntaxError, ValueError) as exc:
        return [_syntax_finding(path, exc, col_shift)] if "TB001" in codes else []
    findings = _run_rules(tree, path, rules, col_shift or {})
    lines = noqa_lines if noqa_lines is not None else text.splitlines()
    if noqa:
        findings = [f for f in findings if not _silenced(f, lines)]
    return sorted(findings, key=lambda f: (f.line, f.col, f.rule))


# --------------------------------------------------------------------------- markdown
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+|~~~+)[ \t]*(?P<lang>[\w+-]*)")


def markdown_python(text: str) -> list[tuple[str, dict[int, int]]]:
    """The ```python blocks of a Markdown page, each as source with the page's line numbers (other
    lines blank) and the column shift of each line (doctest prompts ``>>> ``/``... `` removed)."""
    lines = text.splitlines()
    blocks: list[tuple[str, dict[int, int]]] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip().startswith(m.group("fence"))), len(lines))
        if m.group("lang").lower() in ("python", "py", "python3", "pycon"):
            blocks.append(_block_source(lines, i + 1, end, len(m.group("indent"))))
        i = end + 1
    return blocks


def _block_source(lines: list[str], start: int, end: int, indent: int) -> tuple[str, dict[int, int]]:
    out = [""] * len(lines)
    shift: dict[int, int] = {}
    body = [ln[indent:] if ln[:indent].strip() == "" else ln for ln in lines[start:end]]
    doctest = any(ln.startswith(">>>") for ln in body)
    in_source = False
    for k, ln in enumerate(body):
        row = start + k
        if not doctest:
            out[row], shift[row + 1] = ln, indent
            continue
        if ln.startswith(">>>") or (in_source and (ln.startswith("... ") or ln.rstrip() == "...")):
            code = ln[4:] if len(ln) > 3 and ln[3] == " " else ln[3:]
            out[row], shift[row + 1], in_source = code, indent + 4, True
        else:
            in_source = False
    return "\n".join(out) + "\n", shift


def _lint_markdown(text: str, path: str, **kw) -> list[Finding]:
    lines = text.splitlines()
    blocks = markdown_python(text)
    if not blocks:
        return []
    merged = [""] * len(lines)
    shift: dict[int, int] = {}
    for src, sh in blocks:
        for k, ln in enumerate(src.splitlines()):
            if ln:
                merged[k] = ln
        shift.update(sh)
    source = "\n".join(merged) + "\n"
    try:
        ast.parse(source)
    except (SyntaxError, ValueError):
        found = []
        for src, sh in blocks:
            found += lint_source(src, path, col_shift=sh, noqa_lines=lines, **kw)
        return sorted(found, key=lambda f: (f.line, f.col, f.rule))
    return lint_source(source, path, col_shift=shift, noqa_lines=lines, **kw)


# --------------------------------------------------------------------------- files and folders
def lint_file(path: str | os.PathLike, **kw) -> list[Finding]:
    """Lint one file: Markdown (``.md``/``.markdown``: its python blocks) or Python source."""
    p = Path(path)
    shown = str(path)
    try:
        text = p.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return [_syntax_finding(shown, ValueError(f"not UTF-8 ({exc.reason} at byte {exc.start})"))]
    if p.suffix.lower() in (".md", ".markdown"):
        return _lint_markdown(text, shown, **kw)
    return lint_source(text, shown, **kw)


def _excluded(path: Path, exclude: Sequence[str]) -> bool:
    text = path.as_posix()
    return any(fnmatch.fnmatch(text, pat) or fnmatch.fnmatch(path.name, pat)
               or any(fnmatch.fnmatch(part, pat) for part in path.parts) or text.startswith(pat.rstrip("/") + "/")
               for pat in exclude)


def iter_files(paths: Iterable[str | os.PathLike], exclude: Sequence[str] = ()) -> Iterator[Path]:
    """The files to lint: explicit files as given, folders walked for ``*.py`` (skipping virtual
    environments, VCS and build folders and the ``exclude`` globs); a missing path is a FileNotFoundError."""
    for raw in paths:
        p = Path(raw)
        if not p.exists():
            raise FileNotFoundError(f"no such file or folder: {str(raw)!r}")
        if p.is_file():
            if not _excluded(p, exclude):
                yield p
            continue
        for root, dirs, files in os.walk(p):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info")
                             and not _excluded(Path(root) / d, exclude))
            for name in sorted(files):
                f = Path(root) / name
                if name.endswith(".py") and not _excluded(f, exclude):
                    yield f


def lint_paths(paths: Iterable[str | os.PathLike], *, select: Optional[Iterable[str]] = None,
               ignore: Optional[Iterable[str]] = None, exclude: Sequence[str] = ()) -> list[Finding]:
    """Lint files and folders (see :func:`iter_files`); findings sorted by file, line, column."""
    select_rules(select, ignore)  # unknown codes fail before any file is read
    out: list[Finding] = []
    for f in iter_files(paths, exclude):
        out += lint_file(f, select=select, ignore=ignore)
    return out


def to_json(findings: Iterable[Finding]) -> str:
    """The findings as a JSON list of objects (path, line, col, rule, name, message, fix)."""
    return json.dumps([asdict(f) for f in findings], indent=2)
