"""Reading recipes: the built-in recipe files, a safe YAML loader, ``key.sub=value`` overrides.

The loader is PyYAML's safe loader with three more rules, for recipe files and override values
alike: a key given twice in one mapping is refused (YAML would keep the last one silently), the
document may not nest deeper than :data:`MAX_DEPTH` levels nor expand (aliases counted) to more
than :data:`MAX_NODES` values, and ``None`` is read as null like ``null`` and ``~``.
"""

from __future__ import annotations

import copy
import difflib
import importlib.resources
import re
from pathlib import Path
from typing import Any

import yaml

from trickbag.errors import RecipeError

__all__ = ["MAX_DEPTH", "MAX_NODES", "builtin_recipes", "resolve_recipe_path", "run_recipe_path", "safe_load_yaml",
           "read_yaml", "parse_overrides", "apply_overrides"]

#: deepest nesting of lists / mappings a recipe may have (real recipes use 3-4 levels)
MAX_DEPTH = 32
#: most values a recipe may expand to, aliases expanded (real recipes have a few hundred)
MAX_NODES = 100_000


class _Loader(yaml.SafeLoader):
    """Safe loader that refuses duplicate keys."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:  # an unhashable key: the base class reports it
                continue
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is given twice in one mapping", key_node.start_mark
                )
        return super().construct_mapping(node, deep=deep)


_Loader.add_implicit_resolver("tag:yaml.org,2002:null", re.compile(r"^None$"), ["N"])


def _check_size(root: yaml.Node) -> None:
    sizes: dict[int, int] = {}  # an alias is the same node object: counted once per use, computed once

    def size(node: yaml.Node, depth: int) -> int:
        if depth > MAX_DEPTH:
            raise RecipeError(f"nests deeper than {MAX_DEPTH} levels")
        if id(node) in sizes:
            return sizes[id(node)]
        n = 1
        if isinstance(node, yaml.SequenceNode):
            n += sum(size(child, depth + 1) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            n += sum(size(k, depth + 1) + size(v, depth + 1) for k, v in node.value)
        if n > MAX_NODES:
            raise RecipeError(f"expands to more than {MAX_NODES:,} values (aliases counted)")
        sizes[id(node)] = n
        return n

    size(root, 0)


def safe_load_yaml(text: str, what: str) -> Any:
    """Parse ``text`` with the recipe loader; :class:`RecipeError` naming ``what`` on any problem.

    >>> safe_load_yaml("{lr: 0.1, name: None}", "x")
    {'lr': 0.1, 'name': None}
    >>> safe_load_yaml("{lr: 0.05, lr: 50.0}", "my.yaml")
    Traceback (most recent call last):
    ...
    trickbag.errors.RecipeError: my.yaml is not valid YAML at line 1, column 12: key 'lr' is given twice in one mapping
    """
    loader = _Loader(text)
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise RecipeError(f"{what} nests deeper than {MAX_DEPTH} levels") from None
        if node is None:
            return None
        try:
            _check_size(node)
        except RecipeError as exc:
            raise RecipeError(f"{what} {exc}") from None
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "invalid syntax"
        raise RecipeError(f"{what} is not valid YAML{where}: {problem}") from None
    finally:
        loader.dispose()


def builtin_recipes() -> dict[str, Path]:
    """Names and paths of the recipes shipped inside the package."""
    folder = importlib.resources.files("trickbag") / "recipes"
    out: dict[str, Path] = {}
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if entry.name.endswith(".yaml"):
            out[entry.name[: -len(".yaml")]] = Path(str(entry))
    return out


#: data files people pass where a recipe goes, and the command that trains on them
_DATA_HINTS = {".csv": "trickbag train tabular data.root={path} data.label_column=COLUMN",
               ".tsv": "trickbag train tabular data.root={path} data.label_column=COLUMN"}


def read_yaml(path: Path) -> dict[str, Any]:
    """A recipe file as a dict; :class:`RecipeError` (one line) for unreadable, invalid or non-mapping files."""
    hint = _DATA_HINTS.get(Path(path).suffix.lower())
    if hint is not None and Path(path).is_file():
        raise RecipeError(
            f"{str(path)!r} is a data file, not a recipe (YAML); to train on it: {hint.format(path=path)}"
        )
    try:
        text = Path(path).read_text(encoding="utf-8-sig")  # a BOM, as some editors write it, is not content
    except UnicodeDecodeError:
        raise RecipeError(f"recipe {str(path)!r} is not a text file (YAML expected)") from None
    except OSError as exc:
        raise RecipeError(f"recipe {str(path)!r} cannot be read: {exc.strerror}") from None
    data = safe_load_yaml(text, f"recipe {str(path)!r}")
    if data is None:
        raise RecipeError(f"recipe {str(path)!r} is empty; start from a built-in one (`trickbag recipes`)")
    if not isinstance(data, dict):
        raise RecipeError(
            f"recipe {str(path)!r} must be a mapping of sections (data:, model:, ...), got {type(data).__name__}"

        )
    return data


def resolve_recipe_path(name_or_path: str) -> Path:
    """A built-in recipe name or a path to a YAML file (``~`` expanded)."""
    path = Path(name_or_path).expanduser()
    if path.is_file():
        return path
    builtins = builtin_recipes()
    stem = name_or_path[:-5] if name_or_path.endswith(".yaml") else name_or_path
    if stem in builtins and not path.exists():
        return builtins[stem]
    if Path(stem).name in builtins and not path.exists() and path.parent.name == "recipes":
        return builtins[Path(stem).name]
    if path.is_dir():
        raise RecipeError(f"recipe {name_or_path!r} is a directory; give a YAML file or a built-in name (to train on "
                          f"a folder of images: trickbag train imagefolder-finetune data.root={name_or_path})")
    close = difflib.get_close_matches(stem, list(builtins), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise RecipeError(
        f"recipe {name_or_path!r} not found{hint}; give a YAML file or one of: {', '.join(builtins)}"
    )


def run_recipe_path(run_dir: str | Path, missing: str, error: type[Exception] = RecipeError) -> Path:
    """The ``recipe.yaml`` a run directory holds: ``error(missing)`` when ``run_dir`` is no folder,
    ``error`` naming the folder when it is not a trickbag run directory (no ``recipe.yaml``)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise error(missing)
    path = run_dir / "recipe.yaml"
    if not path.is_file():
        raise error(f"{str(run_dir)!r} is not a trickbag run directory (no recipe.yaml)")
    return path


def parse_overrides(items: list[str]) -> list[tuple[list[str], Any]]:
    """Parse ``key.sub=value`` strings; values are YAML read with the recipe loader (``0.1``, ``true``, ``[1,2]``).

    >>> parse_overrides(["optim.lr=0.05", "run.name=try1", "data.mean=[0.5]", "run.name=None"])
    [(['optim', 'lr'], 0.05), (['run', 'name'], 'try1'), (['data', 'mean'], [0.5]), (['run', 'name'], None)]
    """
    out = []
    for item in items:
        if "=" not in item:
            raise RecipeError(f"override {item!r} has no '='; write it as key.sub=value, e.g. optim.lr=0.05")
        key, _, raw = item.partition("=")
        key = key.strip()
        if not key or any(not part for part in key.split(".")):
            raise RecipeError(f"override {item!r} has an empty key; write it as key.sub=value")
        value = safe_load_yaml(raw, f"override {item!r}") if raw.strip() else ""
        out.append((key.split("."), value))
    return out


def apply_overrides(data: dict[str, Any], overrides: list[tuple[list[str], Any]]) -> dict[str, Any]:
    """Set each override in a nested dict (a copy); intermediate mappings are created as needed."""
    data = copy.deepcopy(data)
    for parts, value in overrides:
        node = data
        for i, part in enumerate(parts[:-1]):
            nxt = node.get(part)
            if nxt is None:
                nxt = node[part] = {}
            if not isinstance(nxt, dict):
                raise RecipeError(
                    f"override {'.'.join(parts)!r}: {'.'.join(parts[: i + 1])!r} is a value, not a section"
                )
            node = nxt
        node[parts[-1]] = value
    return data
