"""``[tool.trickbag.lint]`` in pyproject.toml: the project's own ``select`` / ``ignore`` / ``exclude`` for
``trickbag lint`` (the CLI's names), found by walking up from the linted paths."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["LintConfig", "find_config", "ConfigError"]

_KEYS = ("select", "ignore", "exclude")


class ConfigError(ValueError):
    """A ``[tool.trickbag.lint]`` section that cannot be used (unknown key, wrong type, bad TOML)."""


@dataclass
class LintConfig:
    """The section's settings; ``path`` is the pyproject.toml they came from (None: no section found)."""

    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    path: Path | None = None


def _load_toml(path: Path) -> dict:
    import importlib

    # tomllib from Python 3.11; tomli (a dependency on 3.10) before
    tomllib = importlib.import_module("tomllib" if sys.version_info >= (3, 11) else "tomli")
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read it as TOML ({exc})") from None


def _as_list(path: Path, key: str, value: object) -> list[str]:
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise ConfigError(f"{path}: [tool.trickbag.lint] {key} must be a list of strings (or one comma-separated "
                      f"string), not {value!r}")


def _section(path: Path) -> LintConfig | None:
    table = _load_toml(path).get("tool", {}).get("trickbag", {}).get("lint")
    if table is None:
        return None
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.trickbag.lint] must be a table")
    unknown = sorted(set(table) - set(_KEYS))
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) in [tool.trickbag.lint]: {', '.join(unknown)} "
                          f"(known: {', '.join(_KEYS)})")
    cfg = LintConfig(**{k: _as_list(path, k, table[k]) for k in _KEYS if k in table}, path=path)
    root = path.parent.resolve()
    # an exclude glob is relative to the folder of pyproject.toml; it also matches as written (a folder name)
    cfg.exclude = [*cfg.exclude, *((root / p).as_posix() for p in cfg.exclude if not os.path.isabs(p))]
    return cfg


def find_config(paths: list[str | os.PathLike]) -> LintConfig:
    """The ``[tool.trickbag.lint]`` section of the nearest pyproject.toml that has one, walking up from the
    first linted path (its folder, or the folder itself) to the repository's root (a ``.git`` folder)."""
    start = Path(paths[0]) if paths else Path.cwd()
    try:
        folder = start.resolve()
    except (OSError, RuntimeError):
        return LintConfig()
    if not folder.is_dir():
        folder = folder.parent
    for _ in range(32):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            found = _section(candidate)
            if found is not None:
                return found
        if (folder / ".git").exists() or folder.parent == folder:
            break
        folder = folder.parent
    return LintConfig()
