"""A leading underscore says who depends on a name: no module of src/trickbag uses another module's private name
(``from m import _x``, ``m._x``), except the few listed here with their reasons. A private module (``_roles.py``)
is its package's: modules of the same package may import it, others may not."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

#: (module using it, the private name it uses) -> why
ALLOWED: dict[tuple[str, str], str] = {}


def _module(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    path = SRC / name.replace(".", "/")
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _package(module: str) -> str:
    return module.rpartition(".")[0]


def private_uses(source: str, me: str) -> list[tuple[int, str]]:
    """``(line, 'target._name')`` for each use in ``source`` (the module ``me``) of another trickbag module's private
    name: imported by name, or read as an attribute of an imported trickbag module."""
    tree = ast.parse(source)
    aliases: dict[str, str] = {}
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("trickbag"):
            for a in node.names:
                full = f"{node.module}.{a.name}"
                if _is_module(full):
                    aliases[a.asname or a.name] = full
                private = a.name.startswith("_") and not a.name.startswith("__")
                if private and node.module != me:
                    out.append((node.lineno, full))
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("trickbag"):
                    aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            if node.attr.startswith("_") and not node.attr.startswith("__") and aliases[node.value.id] != me:
                out.append((node.lineno, f"{aliases[node.value.id]}.{node.attr}"))
    return [(line, t) for line, t in out if not _package_private(t, me)]


def _package_private(target: str, me: str) -> bool:
    """A private module imported by a module of its own package (or below it)."""
    return _is_module(target) and (me + ".").startswith(_package(target) + ".")


def test_no_module_uses_another_modules_private_names():
    found = []
    for path in sorted((SRC / "trickbag").rglob("*.py")):
        me = _module(path)
        for line, target in private_uses(path.read_text(encoding="utf-8"), me):
            if (me, target.rpartition(".")[2]) not in ALLOWED:
                found.append(f"{me}:{line} uses {target}")
    assert found == [], "give the name a public name, or move it to the module that uses it:\n" + "\n".join(found)
    assert len(ALLOWED) <= 5


def test_the_check_sees_private_names_across_modules():
    me = "trickbag.train.build"
    src = ("from trickbag.data.mix import _sample\nfrom trickbag import runtime\nx = runtime._seed\n"
           "from trickbag.audit import _roles\ny = _roles.thing\n")
    assert [t for _, t in private_uses(src, me)] == ["trickbag.data.mix._sample", "trickbag.audit._roles",
                                                     "trickbag.runtime._seed"]
    assert private_uses("from trickbag.audit import _roles\n", "trickbag.audit.rules.tb101") == []
    assert private_uses("def _own():\n    pass\n_own()\n", me) == []
