"""Facts about the project a linted file belongs to, read from its packaging files: which torch versions
it supports (``torch>=2.6`` in pyproject.toml, ``torch==1.13.1`` in requirements.txt ...), whether the
file is test code, and the top-level definitions of the project's modules it imports.  Standard library only;
one read per folder, one parse per imported module."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

__all__ = ["torch_support", "is_test_path", "in_test_folder", "test_script", "OLD_TORCH", "NEW_TORCH",
           "imported_definition", "imported_definition_at", "module_definition_at", "project_root", "project_mode_free",
           "torch_pinned_below", "module_file", "parsed_module", "project_methods", "project_method_calls",
           "project_class_of", "MOVES"]

#: the project allows a torch older than 2.6 (``torch.load`` unpickles anything by default there)
OLD_TORCH = "old"
#: the project needs torch >= 2.6, or names torch without a version (a fresh install is current)
NEW_TORCH = "new"

_FILES = ("pyproject.toml", "setup.cfg", "setup.py", "environment.yml", "environment.yaml")
#: pip specs (``torch>=2.1``) and conda pins (``pytorch=1.7.1`` in environment.yml)
_REQUIREMENT = re.compile(r"(?<![\w.-])(?:py)?torch(?![\w-])\s*(?P<spec>(?:\s*,?\s*(?:===|==|~=|>=|<=|!=|>|<|=)\s*"
                          r"[0-9][0-9.*]*)*)")
_CLAUSE = re.compile(r"(===|==|~=|>=|<=|!=|>|<|=)\s*([0-9][0-9.]*)")
_STOP = (".git", ".hg")


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".") if p.isdigit())[:3]


def allows_old_torch(spec: str) -> bool:
    """Does a requirement's version spec (``'>=1.8,<3'``, ``'==2.1.0'``, ``''``) allow a torch < 2.6?
    An empty spec means whatever is current: no.

    >>> [allows_old_torch(s) for s in ("", ">=2.6", ">=1.8", "==2.1.0", "<3", ">=2.6,<3", "~=2.7", "=1.7.1")]
    [False, False, True, True, True, False, False, True]
    """
    clauses = _CLAUSE.findall(spec)
    if not clauses:
        return False
    floor = None
    for op, ver in clauses:
        v = _version(ver)
        if op in ("==", "===", "~=", ">=", ">", "="):
            floor = v if floor is None else max(floor, v)
    return floor is None or floor < (2, 6)


def _requirement_files(folder: Path) -> list[Path]:
    out = [folder / name for name in _FILES if (folder / name).is_file()]
    try:
        out += sorted(p for p in folder.glob("requirements*.txt") if p.is_file())
        out += sorted(p for p in folder.glob("requirements/*.txt") if p.is_file())
    except OSError:
        pass
    return out


@functools.lru_cache(maxsize=1024)
def _folder_support(folder: Path) -> str | None:
    specs = []
    for f in _requirement_files(folder):
        try:
            text = f.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        specs += [m.group("spec") for m in _REQUIREMENT.finditer(text)]
    if specs:
        return OLD_TORCH if any(allows_old_torch(s) for s in specs) else NEW_TORCH
    if any((folder / s).exists() for s in _STOP):
        return ""  # the repository's root: look no further
    return None


def torch_support(path: str | Path) -> str | None:
    """:data:`OLD_TORCH` / :data:`NEW_TORCH` from the nearest folder (the file's, then up to its
    repository's root) whose packaging files name torch; None when none does."""
    try:
        folder = Path(path).resolve().parent
    except (OSError, RuntimeError):
        return None
    for _ in range(8):
        found = _folder_support(folder)
        if found is not None:
            return found or None
        if folder.parent == folder:
            return None
        folder = folder.parent
    return None


_TEST_FILE = re.compile(r"^(test_.*|conftest|tests?)\.py$")
_MAYBE_TEST_FILE = re.compile(r"^.*_test\.py$")
_TEST_FOLDERS = {"tests", "test", "testing", "unittests", "unit_tests"}


def is_test_path(path: str) -> bool:
    """A file named like a test module: ``test_*.py``, ``conftest.py``."""
    return bool(_TEST_FILE.match(Path(path).name))


def test_script(path: str) -> bool:
    """A file named ``*_test.py`` right in a ``tests`` / ``test`` folder: a test script even without pytest."""
    return Path(path).parent.name in _TEST_FOLDERS and bool(_MAYBE_TEST_FILE.match(Path(path).name))


def in_test_folder(path: str) -> bool:
    """A file under a ``tests`` / ``test`` folder, or named ``*_test.py``: a test module when it also imports
    pytest or unittest."""
    return any(p in _TEST_FOLDERS for p in Path(path).parts[:-1]) or bool(_MAYBE_TEST_FILE.match(Path(path).name))


_ROOT_MARKERS = ("setup.py", "pyproject.toml", "setup.cfg", "requirements.txt", "environment.yml")
_MODE_LAYERS = re.compile(r"Dropout|BatchNorm|SyncBatchNorm|InstanceNorm|GroupNorm\w*track|\bdropout\s*\(|"
                          r"\.training\b|torchvision\.models|\btimm\b|\btransformers\b|from_pretrained|torch\.hub|"
                          r"drop_path|DropPath|stochastic_depth|torch_geometric\.nn\.models")
_SCAN_LIMIT = 2000


def _pinned_below(spec: str, floor: tuple[int, ...]) -> bool:
    """Does a version spec keep torch below ``floor`` (``==0.4.1``, ``<1.1``, ``<=1.0.1``)?"""
    for op, ver in _CLAUSE.findall(spec):
        v = _version(ver)
        if op in ("==", "===", "=") and v < floor or op == "<" and v <= floor or op == "<=" and v < floor:
            return True
    return False


@functools.lru_cache(maxsize=1024)
def _folder_pins(folder: Path) -> tuple[str, ...] | None:
    specs = []
    for f in _requirement_files(folder):
        try:
            text = f.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        specs += [m.group("spec") for m in _REQUIREMENT.finditer(text)]
    if specs:
        return tuple(specs)
    if any((folder / s).exists() for s in _STOP):
        return ()
    return None


def torch_pinned_below(path: str | Path, floor: tuple[int, ...]) -> bool:
    """The nearest packaging files that name torch (the file's folder, then up to the repository's root) keep it
    below ``floor``: every torch requirement there is pinned under it (``torch==0.4.1`` and ``floor=(1, 1)``)."""
    try:
        folder = Path(path).resolve().parent
    except (OSError, RuntimeError):
        return False
    for _ in range(8):
        specs = _folder_pins(folder)
        if specs is not None:
            return bool(specs) and all(_pinned_below(s, floor) for s in specs)
        if folder.parent == folder:
            return False
        folder = folder.parent
    return False


def project_root(path: str | Path) -> Path | None:
    """The folder of the repository a file belongs to: the nearest one with ``.git``, else the nearest with a
    packaging file (setup.py, pyproject.toml, requirements.txt ...); None without either (eight levels up)."""
    try:
        folder = Path(path).resolve().parent
    except (OSError, RuntimeError):
        return None
    marked = None
    for _ in range(8):
        if any((folder / s).exists() for s in _STOP):
            return folder
        if marked is None and any((folder / m).is_file() for m in _ROOT_MARKERS):
            marked = folder
        if folder.parent == folder:
            break
        folder = folder.parent
    return marked


@functools.lru_cache(maxsize=256)
def _project_has_mode_layers(root: Path) -> bool:
    count = 0
    for p in root.rglob("*.py"):
        if any(part in (".venv", "venv", "site-packages", "node_modules", ".git") for part in p.parts):
            continue
        count += 1
        if count > _SCAN_LIMIT:
            return True  # too large to know: assume it has some
        try:
            if _MODE_LAYERS.search(p.read_text(encoding="utf-8", errors="replace")):
                return True
        except OSError:
            return True
    return False


def project_mode_free(path: str | Path) -> bool:
    """No module of the file's project uses a layer whose behaviour depends on train/eval mode (dropout,
    BatchNorm, ``self.training``) nor loads models from a zoo (torchvision.models, timm, transformers, the hub):
    ``model.eval()`` changes nothing there.  False when the project's folder is unknown."""
    root = project_root(path)
    return root is not None and not _project_has_mode_layers(root)


_REDUCTION_KEYWORD = re.compile(r"\b(reduction|size_average|reduce)\s*=")


@functools.lru_cache(maxsize=256)
def _project_sets_reduction(root: Path) -> bool:
    files = _files_matching(root, _REDUCTION_KEYWORD)
    return files is None or bool(files)


def project_sets_reduction(path: str | Path) -> bool:
    """Some module of the file's project passes a loss a ``reduction=`` (or the old ``size_average=`` /
    ``reduce=``) keyword: a loss object built elsewhere may sum.  True when the project is unknown or too large
    to scan, or the source has no file."""
    root = project_root(path) if Path(path).is_file() else None
    return root is None or _project_sets_reduction(root)


_TORCH_SAVE = re.compile(r"\btorch\.save\s*\(")


@functools.lru_cache(maxsize=256)
def _project_saves(root: Path) -> bool:
    files = _files_matching(root, _TORCH_SAVE) or []
    return any(not is_test_path(f) and not in_test_folder(f) for f, _ in files)


def project_saves_checkpoints(path: str | Path) -> bool:
    """Some module of the file's project (tests left out) writes files with ``torch.save``: the project makes its
    own checkpoints.  False when the project is unknown or too large to scan (source text without a file)."""
    root = project_root(path) if Path(path).is_file() else None
    return root is not None and _project_saves(root)


#: a project's docs saying it publishes trained models: a link to a checkpoint file or a model host, or the words
_RELEASES = re.compile(
    r"https?://\S+\.(pth|pt|ckpt|pkl|bin|tar|h5|t7|pth\.tar|safetensors)\b|drive\.google\.com|huggingface\.co/|"
    r"releases/download|zenodo\.org|dropbox\.com|pan\.baidu\.com|onedrive|"
    r"pre-?trained (models?|weights|checkpoints?)|model zoo|(download|released?) (the |our )?"
    r"(pre-?trained |trained )?(models?|weights|checkpoints?)", re.IGNORECASE)
_DOC_NAMES = re.compile(r"^(README[^/]*|[^/]+\.(md|rst))$|^docs?/[^/]+\.md$", re.IGNORECASE)


@functools.lru_cache(maxsize=256)
def _project_releases(root: Path) -> bool:
    docs = [p for p in root.glob("*") if p.is_file() and _DOC_NAMES.search(p.name)]
    docs += [p for sub in ("doc", "docs") for p in (root / sub).glob("*.md")]
    docs += [p for p in root.glob("*/README*") if p.is_file()]
    for p in docs[:50]:
        try:
            if _RELEASES.search(p.read_text(encoding="utf-8", errors="replace")):
                return True
        except OSError:
            continue
    return False


def project_releases_models(path: str | Path) -> bool:
    """The project's README or docs say it publishes trained models (a link to a ``.pth`` / ``.ckpt`` file, to
    Google Drive, the Hugging Face hub, GitHub release assets, Zenodo, or the words "pretrained models", "model zoo",
    "download the checkpoints"): a path given on its command line may name one of them.  True when the project is
    unknown (nothing to go by; source text without a file)."""
    root = project_root(path) if Path(path).is_file() else None
    return root is None or _project_releases(root)


@functools.lru_cache(maxsize=1024)
def _option_texts(root: Path, option: str) -> tuple[str, ...]:
    needle = re.compile(rf"""['"]--?{re.escape(option).replace("_", "[-_]")}['"]""")
    out: list[str] = []
    for _, tree in _files_matching(root, needle) or ():
        for n in ast.walk(tree):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "add_argument" \
                    and any(isinstance(a, ast.Constant) and isinstance(a.value, str)
                            and a.value.lstrip("-").replace("-", "_") == option.replace("-", "_") for a in n.args):
                out.extend(c.value for c in ast.walk(n) if isinstance(c, ast.Constant) and isinstance(c.value, str))
    return tuple(out)


def option_texts(path: str | Path, option: str) -> tuple[str, ...]:
    """The strings of the ``add_argument('--option', help=..., default=...)`` calls of the file's project that
    define ``option`` (its flags, help and default); empty when none is found or the source has no file."""
    root = project_root(path) if Path(path).is_file() else None
    return _option_texts(root, option) if root is not None else ()


def _files_matching(root: Path, needle: re.Pattern) -> list[tuple[str, ast.Module]] | None:
    """(path, tree) of the project's Python files whose text matches ``needle``; None when the project is too
    large to scan (virtual environments and ``.git`` left out)."""
    out: list[tuple[str, ast.Module]] = []
    for count, p in enumerate(root.rglob("*.py")):
        if count > _SCAN_LIMIT:
            return None
        if any(part in (".venv", "venv", "site-packages", "node_modules", ".git") for part in p.parts):
            continue
        try:
            if not needle.search(p.read_text(encoding="utf-8", errors="replace")):
                continue
        except OSError:
            continue
        tree = parsed_module(str(p))
        if tree is not None:
            out.append((str(p), tree))
    return out


@functools.lru_cache(maxsize=64)
def _project_methods(root: Path, name: str) -> tuple[ast.FunctionDef, ...]:
    files = _files_matching(root, re.compile(rf"\bdef\s+{re.escape(name)}\s*\("))
    return tuple(n for _, tree in files or [] for n in ast.walk(tree)
                 if isinstance(n, ast.FunctionDef) and n.name == name)


@functools.lru_cache(maxsize=64)
def _project_method_calls(root: Path, name: str) -> tuple[tuple[str, ast.AST, int], ...] | None:
    files = _files_matching(root, re.compile(rf"\.{re.escape(name)}\s*\("))
    if files is None:
        return None  # too large to know
    out: list[tuple[str, ast.AST, int]] = []
    for path, tree in files:
        for fn in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            out += [(path, fn, c.lineno) for c in ast.walk(fn) if isinstance(c, ast.Call)
                    and isinstance(c.func, ast.Attribute) and c.func.attr == name
                    and not (isinstance(c.func.value, ast.Name) and c.func.value.id == "self")]
    return tuple(out)


def project_method_calls(path: str | Path, name: str) -> tuple[tuple[str, ast.AST, int], ...] | None:
    """Every call ``x.name(...)`` in the file's project, ``self.name(...)`` left out (a class's own method): (file,
    the function holding it, line); None when the project's folder is unknown or too large to scan."""
    root = project_root(path)
    return _project_method_calls(root, name) if root is not None else None


def project_methods(path: str | Path, name: str) -> tuple[ast.FunctionDef, ...]:
    """Every function or method called ``name`` defined anywhere in the file's project (an empty tuple when the
    project's folder is unknown or too large to scan)."""
    root = project_root(path)
    return _project_methods(root, name) if root is not None else ()


def imported_definition(tree: ast.Module, path: str, name: str) -> ast.ClassDef | ast.FunctionDef | None:
    """The top-level class or function that ``name`` is bound to in the file ``path`` (parsed as ``tree``) by
    ``from pkg.mod import Name`` / ``from .mod import Name``, when ``pkg/mod.py`` (or its ``__init__.py``) is a
    file of the same project: next to the file or in one of its parent folders (up to the repository root)."""
    at = imported_definition_at(tree, path, name)
    return at[1] if at is not None else None


def imported_definition_at(tree: ast.Module, path: str, name: str) -> tuple[str, ast.ClassDef | ast.FunctionDef] | None:
    """(the defining file, the definition) of :func:`imported_definition`."""
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                if (a.asname or a.name) == name:
                    found = module_file(str(Path(path).parent), tuple(node.module.split(".")), node.level)
                    defn = _top_definition(found, a.name) if found is not None else None
                    return (found, defn) if found is not None and defn is not None else None
    return None


def module_definition_at(path: str, module: str, name: str) -> tuple[str, ast.ClassDef | ast.FunctionDef] | None:
    """(file, definition) of ``name`` in the project module imported by the file ``path`` as ``module`` (its
    qualified name: ``import modules`` then ``modules.GlimpseNetwork``)."""
    found = module_file(str(Path(path).parent), tuple(module.split(".")), 0)
    defn = _top_definition(found, name) if found is not None else None
    return (found, defn) if found is not None and defn is not None else None


@functools.lru_cache(maxsize=4096)
def module_file(folder: str, parts: tuple[str, ...], level: int) -> str | None:
    here = Path(folder)
    if level:
        ups = [here, *here.parents]
        bases = ups[level - 1:level]
    else:
        bases = [here, *here.parents][:8]
    for base in bases:
        for candidate in (base.joinpath(*parts).with_suffix(".py"), base.joinpath(*parts, "__init__.py")):
            if candidate.is_file():
                return str(candidate)
        if any((base / stop).exists() for stop in _STOP):
            break
    return None


def _top_definition(path: str, name: str) -> ast.ClassDef | ast.FunctionDef | None:
    tree = parsed_module(path)
    return next((n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == name), None) \
        if tree is not None else None


@functools.lru_cache(maxsize=64)
def parsed_module(path: str) -> ast.Module | None:
    try:
        return ast.parse(Path(path).read_bytes(), filename=path)
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None


#: calls that move or cast a module and return it (``Model(...).cuda()`` is the same model)
MOVES = frozenset({"to", "cuda", "cpu", "float", "half", "double", "bfloat16"})


def project_class_of(tree: ast.Module, path: str, aliases: dict[str, str], value: ast.AST) -> ast.ClassDef | None:
    """The class of ``value`` when it is ``Name(...)`` (moved with ``.to()`` / ``.cuda()`` or not) of a class imported
    from another module of the project (``from engine import trainer``; ``engine = trainer(...)``), or
    ``module.Name(...)`` of a project module imported as ``module`` (``aliases``: the file's import aliases)."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in MOVES:
        value = value.func.value
    if not isinstance(value, ast.Call) or not path:
        return None
    func = value.func
    if isinstance(func, ast.Name):
        at = imported_definition_at(tree, path, func.id)
    elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in aliases:
        at = module_definition_at(path, aliases[func.value.id], func.attr)
    else:
        return None
    return at[1] if at is not None and isinstance(at[1], ast.ClassDef) else None
