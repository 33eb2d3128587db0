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
train.py:5:5: TB104 the loop steps the optimizer but never zeroes the gradients: backward() keeps adding into .grad
(fix: call optimizer.zero_grad() once per update (at the top of the iteration, or after step()))
"""

from __future__ import annotations

import ast
import fnmatch
import io
import json
import os
import re
import tokenize
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from trickbag.audit import rules as _rules  # noqa: F401  (registers the rules)
from trickbag.audit._flow import FileModel
from trickbag.audit._intent import stated_intent
from trickbag.audit._project import torch_support
from trickbag.audit.registry import RULES, Rule, select_rules

__all__ = ["Finding", "lint_source", "lint_file", "lint_paths", "iter_files", "markdown_python", "to_json",
           "SKIP_DIRS", "PYTHON_SUFFIXES", "MARKDOWN_SUFFIXES", "NotPythonError"]

#: folders never walked into when a folder is linted
SKIP_DIRS = {".venv", "venv", ".git", "__pycache__", "build", "dist", ".tox", ".nox", ".eggs", "node_modules",
             "site-packages", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".hg", ".svn", ".ipynb_checkpoints"}
#: suffixes linted as Python source; a file named on the command line with another suffix must be a
#: script whose first line is a ``#!...python`` line (pre-commit's ``types: [python]`` passes those)
PYTHON_SUFFIXES = (".py", ".pyw", ".pyi")
#: suffixes linted as Markdown pages (their ```python blocks)
MARKDOWN_SUFFIXES = (".md", ".markdown")
_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*))?", re.I)
_FILE_NOQA = re.compile(r"^#\s*trickbag:\s*noqa\s*$", re.M)


@dataclass(frozen=True)
class Finding:
    """One lint finding: where (1-based line and column), which rule, what and how to fix it, how bad
    (``severity``: error / warning) and how sure (``confidence``: high, shown by default / low, ``--all``)."""

    path: str
    line: int
    col: int
    rule: str
    name: str
    message: str
    fix: str
    severity: str = "error"
    confidence: str = "high"

    def format(self) -> str:
        """``path:line:col: CODE message (fix: ...)``; a low-confidence finding says so after its code."""
        low = " (low confidence)" if self.confidence == "low" else ""
        return f"{self.path}:{self.line}:{self.col}: {self.rule}{low} {self.message} (fix: {self.fix})"


def _noqa_codes(line: str) -> set[str] | None:
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


def _syntax_finding(path: str, exc: Exception, line_map: dict[int, int] | None = None) -> Finding:
    if isinstance(exc, (RecursionError, MemoryError)):
        return _too_deep(path, f"Python's parser gives up ({exc or type(exc).__name__})")
    line = getattr(exc, "lineno", None) or 1
    col = getattr(exc, "offset", None) or 1
    if line_map:
        col += line_map.get(line, 0)
    msg = getattr(exc, "msg", None) or str(exc)
    rule = RULES["TB001"]
    return Finding(path, line, col, rule.code, rule.name, f"the file does not parse: {msg}", rule.fix)


_ASYNC_KW = re.compile(r"(?<=[(,\s])async(?=\s*=[^=])")


def _python2_repaired(text: str) -> tuple[str, ast.Module, tuple[int, int]] | None:
    """Source written for Python < 3.7 that passes ``async=True`` (torch's old name of ``non_blocking``): the
    text with ``async`` renamed ``asyn_`` (same columns), its tree and where the first one was; None when that
    is not the only trouble."""
    def in_comment(m: re.Match) -> bool:
        return "#" in text[text.rfind("\n", 0, m.start()) + 1:m.start()]

    m = next((m for m in _ASYNC_KW.finditer(text) if not in_comment(m)), None)
    if m is None:
        return None
    fixed = _ASYNC_KW.sub("asyn_", text)
    try:
        tree = ast.parse(fixed)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    line = text.count("\n", 0, m.start()) + 1
    return fixed, tree, (line, m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1)


def _python2_finding(path: str, where: tuple[int, int], line_map: dict[int, int] | None) -> Finding:
    rule = RULES["TB001"]
    line, col = where
    return Finding(path, line, col + (line_map or {}).get(line, 0), rule.code, rule.name,
                   "the file does not parse on Python 3.7+: async=True is Python 2 / 3.6 era (async is a keyword "
                   "now); the rest of the file was checked as if it said non_blocking=True",
                   "write non_blocking=True (torch's name for it since 0.4)")


def _too_deep(path: str, why: str = "it nests beyond the recursion limit of the analysis") -> Finding:
    """One TB001 line for a file nested too deeply for Python's parser or for the rules' analysis."""
    rule = RULES["TB001"]
    return Finding(path, 1, 1, rule.code, rule.name, f"the file is too deeply nested to analyse: {why}; nothing in "
                   "it was checked", "split the deeply nested expression or block (the file was not checked)")


def _run_rules(tree: ast.Module, path: str, rules: Iterable[Rule], col_shift: dict[int, int],
               torch: str | None = None, text: str = "") -> list[Finding]:
    model = FileModel(tree, path, torch)
    seen, out = set(), []
    if _other_framework(model.nodes):  # an MXNet / TensorFlow / Paddle ... script: torch's loop rules do not apply
        rules = [r for r in rules if not r.code.startswith(("TB1", "TB2", "TB3"))]
    for r in rules:
        for hit in r.check(model):
            line = getattr(hit.node, "lineno", 1)
            col = getattr(hit.node, "col_offset", 0) + 1 + col_shift.get(line, 0)
            key = (r.code, line, col)
            if key not in seen:
                seen.add(key)
                sure = "low" if model.test_file and r.quiet_in_tests else hit.confidence
                message = hit.message
                said = stated_intent(model, text, line) if sure == "high" and r.code != "TB001" else None
                if said:
                    sure, message = "low", f"{message} (a comment near it says it is meant: \"{said[:60]}\")"
                out.append(Finding(path, line, col, r.code, r.name, message, hit.fix or r.fix, r.severity, sure))
    return out


#: deep-learning frameworks whose training loops look like torch's (``net(x)``, ``trainer.step()``) but are not
_OTHER_FRAMEWORKS = {"mxnet", "tensorflow", "paddle", "jax", "flax", "mindspore", "oneflow", "jittor", "megengine",
                     "keras", "chainer", "theano"}


def _other_framework(nodes: list[ast.AST]) -> bool:
    """The module (every node of it, ``FileModel.nodes``) imports another deep-learning framework (``import mxnet as
    mx``) and not torch: its ``net(x)`` and ``trainer.step()`` are that framework's, with other semantics (Gluon has
    no eval())."""
    roots = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            roots.add(node.module.split(".")[0])
    return bool(roots & _OTHER_FRAMEWORKS) and "torch" not in roots


def lint_source(text: str, path: str = "<string>", *, select: Iterable[str] | None = None,
                ignore: Iterable[str] | None = None, noqa: bool = True,
                col_shift: dict[int, int] | None = None, noqa_lines: Sequence[str] | None = None,
                show_all: bool = False, torch: str | None = None) -> list[Finding]:
    """Lint Python source ``text`` (reported as ``path``); ``noqa=False`` ignores ``# noqa`` comments.
    Only high-confidence findings unless ``show_all``.  ``torch`` is which torch the project supports
    (``'old'``: some version < 2.6 allowed, ``'new'``, None: unknown; see :func:`lint_file`).

    An unknown rule in ``select``/``ignore`` is a ValueError.  A file that does not parse, or is nested
    too deeply to analyse (beyond the recursion limit), gives one TB001 finding and nothing else.
    """
    rules = select_rules(select, ignore)
    codes = {r.code for r in rules}
    if noqa and _FILE_NOQA.search(text):
        return []
    head: list[Finding] = []
    try:
        tree = ast.parse(text, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        repaired = _python2_repaired(text)
        if repaired is None:
            return [_syntax_finding(path, exc, col_shift)] if "TB001" in codes else []
        text, tree, where = repaired
        head = [_python2_finding(path, where, col_shift)] if "TB001" in codes else []
    try:
        findings = head + _run_rules(tree, path, rules, col_shift or {}, torch, text)
    except RecursionError:
        return [_too_deep(path)] if "TB001" in codes else []
    lines = noqa_lines if noqa_lines is not None else text.splitlines()
    if not show_all:
        findings = [f for f in findings if f.confidence == "high"]
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
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        found = []
        for src, sh in blocks:
            found += lint_source(src, path, col_shift=sh, noqa_lines=lines, **kw)
        return sorted(found, key=lambda f: (f.line, f.col, f.rule))
    return lint_source(source, path, col_shift=shift, noqa_lines=lines, **kw)


# --------------------------------------------------------------------------- files and folders
def lint_file(path: str | os.PathLike, **kw) -> list[Finding]:
    """Lint one file: Markdown (``.md``/``.markdown``: its python blocks) or Python source, decoded as
    Python decodes it (UTF-8, a BOM, or the PEP 263 ``# -*- coding: ... -*-`` line).  The torch versions
    the project supports are read from the packaging files of its folders (pyproject.toml,
    requirements*.txt, setup.py ... up to the repository's root)."""
    p = Path(path)
    shown = str(path)
    kw.setdefault("torch", torch_support(p))
    data = p.read_bytes()
    if p.suffix.lower() in MARKDOWN_SUFFIXES:
        try:
            return _lint_markdown(data.decode("utf-8-sig"), shown, **kw)
        except UnicodeDecodeError as exc:
            return [_syntax_finding(shown, ValueError(f"not UTF-8 ({exc.reason} at byte {exc.start})"))]
    try:
        text = decode_source(data)
    except ValueError as exc:
        return [_syntax_finding(shown, exc)]
    return lint_source(text, shown, **kw)


def decode_source(data: bytes) -> str:
    """Python source bytes as text, decoded the way the interpreter reads them: UTF-8, a UTF-8 BOM, or
    the encoding of a PEP 263 ``# -*- coding: latin-1 -*-`` line; a ValueError with a one-line reason
    (``not UTF-8 (invalid start byte at byte 0)``, ``unknown encoding: foo`` on bytes that are not UTF-8)
    otherwise.  A coding line naming a codec this Python does not know is one a package registers when it is
    installed (``# -*- coding: future_fstrings -*-``, which only rewrites f-strings for Python < 3.6): the bytes
    are read as UTF-8, as that codec reads them on Python 3."""
    reason: str | None
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:  # a bad coding line, or undeclared bytes that are not UTF-8
        encoding, reason = "utf-8", str(exc)
        if reason.startswith("unknown encoding"):
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                raise ValueError(f"{reason} (and the bytes are not UTF-8)") from None
            return text[1:] if text.startswith("\ufeff") else text
    else:
        reason = None
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        name = "UTF-8" if encoding.startswith("utf-8") else encoding
        raise ValueError(f"not {name} ({exc.reason} at byte {exc.start})") from None
    if reason is not None:
        raise ValueError(reason)
    return text[1:] if text.startswith("\ufeff") else text


def _excluded(path: Path, exclude: Sequence[str]) -> bool:
    if not exclude:
        return False
    text = path.as_posix()
    full = path.resolve().as_posix() if any(p.startswith("/") for p in exclude) else text
    return any(fnmatch.fnmatch(text, pat) or fnmatch.fnmatch(path.name, pat)
               or any(fnmatch.fnmatch(part, pat) for part in path.parts) or text.startswith(pat.rstrip("/") + "/")
               or (pat.startswith("/") and (fnmatch.fnmatch(full, pat) or full.startswith(pat.rstrip("/") + "/")))
               for pat in exclude)


class NotPythonError(ValueError):
    """A file named explicitly that is neither Python source nor a Markdown page."""


def _lintable(path: Path) -> bool:
    """A ``.py``/``.pyw``/``.pyi`` file, a Markdown page, or a script whose first line is ``#!...python``."""
    if path.suffix.lower() in PYTHON_SUFFIXES + MARKDOWN_SUFFIXES:
        return True
    try:
        with open(path, "rb") as fh:
            first = fh.readline(256)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def iter_files(paths: Iterable[str | os.PathLike], exclude: Sequence[str] = ()) -> Iterator[Path]:
    """The files to lint: explicit files as given, folders walked for ``*.py`` (skipping virtual
    environments, VCS and build folders and the ``exclude`` globs).  A missing path is a
    FileNotFoundError; an explicit file that is not Python (``.py``/``.pyw``/``.pyi``, or a script
    with a ``#!...python`` first line) or Markdown (``.md``/``.markdown``) is a :class:`NotPythonError`.
    Every path is checked before the first file is yielded."""
    explicit: list[tuple[Path, bool]] = []
    for raw in paths:
        p = Path(raw)
        if not p.exists():
            raise FileNotFoundError(f"no such file or folder: {str(raw)!r}")
        if p.is_file() and not _excluded(p, exclude) and not _lintable(p):
            raise NotPythonError(f"not a Python file: {str(raw)!r} (lint takes .py files, Python scripts "
                                 f"with a #! line, Markdown pages and folders)")
        explicit.append((p, p.is_file()))
    seen: set[Path] = set()  # a file named twice (``lint src src/train.py``) is linted once
    for p, is_file in explicit:
        for f in ([p] if is_file and not _excluded(p, exclude) else [] if is_file else _walk(p, exclude)):
            key = f.resolve()
            if key not in seen:
                seen.add(key)
                yield f


def _walk(folder: Path, exclude: Sequence[str]) -> Iterator[Path]:
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info")
                         and not _excluded(Path(root) / d, exclude))
        for name in sorted(files):
            f = Path(root) / name
            if name.endswith(".py") and not _excluded(f, exclude):
                yield f


def lint_paths(paths: Iterable[str | os.PathLike], *, select: Iterable[str] | None = None,
               ignore: Iterable[str] | None = None, exclude: Sequence[str] = (),
               show_all: bool = False) -> list[Finding]:
    """Lint files and folders (see :func:`iter_files`); findings sorted by file, line, column (only the
    high-confidence ones unless ``show_all``)."""
    select_rules(select, ignore)  # unknown codes fail before any file is read
    out: list[Finding] = []
    for f in iter_files(paths, exclude):
        out += lint_file(f, select=select, ignore=ignore, show_all=show_all)
    return out


def to_json(findings: Iterable[Finding]) -> str:
    """The findings as a JSON list of objects (path, line, col, rule, name, message, fix, severity,
    confidence)."""
    return json.dumps([asdict(f) for f in findings], indent=2)
