"""The layers of docs/design.md: imports only point down (or stay in their layer), and no package imports
itself in a circle. Imports under ``if TYPE_CHECKING:`` are for type hints only and do not count."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "trickbag"

#: (layer, module prefixes), bottom first
LAYERS = [
    ("config", ("trickbag.errors", "trickbag._optional", "trickbag._moved", "trickbag.config")),
    ("runtime", ("trickbag.runtime", "trickbag._files")),
    ("library", ("trickbag.losses", "trickbag.data", "trickbag.nn", "trickbag.optim", "trickbag.models",
                 "trickbag.audit", "trickbag.functional", "trickbag.extras")),
    ("plug-in interface", ("trickbag.plugin",)),
    ("trick modules", ("trickbag.tricks",)),
    ("recipe", ("trickbag.recipe",)),
    ("trainer", ("trickbag.train",)),  # the loop, persistence, the build, and the built-in plug-ins (train.plugins)
    ("integrations", ("trickbag.integrations",)),  # tricks in other trainers (Lightning, HF): reserved, above the
    # trainer (an adapter sets tricks up with its pieces) and below the run path (which never needs an adapter)
    ("runs", ("trickbag.runs",)),
    ("experiments", ("trickbag.experiments",)),
    ("cli", ("trickbag.cli", "trickbag.launch", "trickbag.__main__")),
]


def layer_of(module: str) -> int:
    best = (-1, -1)  # (prefix length, layer): the longest matching prefix decides
    for rank, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if module == p or module.startswith(p + "."):
                best = max(best, (len(p), rank))
    return best[1]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    hints = _type_checking_lines(tree)
    out = []
    for node in ast.walk(tree):
        if node.lineno in hints if hasattr(node, "lineno") else False:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("trickbag"):
            out.append((node.lineno, node.module))
            out += [(node.lineno, f"{node.module}.{a.name}") for a in node.names
                    if (SRC.parent / (node.module + "." + a.name).replace(".", "/")).with_suffix(".py").exists()]
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("trickbag")]
    return out


def test_every_module_belongs_to_a_layer():
    unplaced = [module_name(p) for p in SRC.rglob("*.py") if layer_of(module_name(p)) < 0
                and module_name(p) != "trickbag"]
    assert unplaced == []


def test_imports_only_point_down():
    upward = []
    for path in SRC.rglob("*.py"):
        me = module_name(path)
        if me == "trickbag":  # the top package re-exports the public API lazily
            continue
        for line, target in imports(path):
            if target == "trickbag" or layer_of(target) < 0:
                continue
            if layer_of(target) > layer_of(me):
                upward.append(f"{me}:{line} imports {target} ({LAYERS[layer_of(me)][0]} -> "
                              f"{LAYERS[layer_of(target)][0]})")
    assert upward == []


def test_the_layer_finder_sees_an_upward_import():
    """The check above can fail: a library module importing the trainer is upward."""
    assert layer_of("trickbag.nn.ema") < layer_of("trickbag.train.trainer")
    assert layer_of("trickbag.tricks.mix") < layer_of("trickbag.recipe") < layer_of("trickbag.train.build")
    assert layer_of("trickbag.plugin.interface") < layer_of("trickbag.tricks.mix")


# ---------------------------------------------------------------------- no import circle, hints included
def _target_module(name: str, modules: set[str]) -> str | None:
    """The module an import names (``trickbag.a.b.C`` -> ``trickbag.a.b``), or None outside ``src``."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules it imports, counting every import: top level, inside functions, and under
    ``if TYPE_CHECKING:`` (a type hint is a dependency of the design even when it costs nothing at run time)."""
    paths = {module_name(p): p for p in SRC.rglob("*.py")}
    modules = set(paths)
    graph: dict[str, set[str]] = {}
    for me, path in paths.items():
        out: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("trickbag"):
                out.update(t for a in node.names if (t := _target_module(f"{node.module}.{a.name}", modules)))
            elif isinstance(node, ast.Import):
                out.update(t for a in node.names if a.name.startswith("trickbag")
                           and (t := _target_module(a.name, modules)))
        graph[me] = out - {me, "trickbag"}  # the top package re-exports lazily
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return circles


def test_no_import_circle_in_src():
    assert import_circles(import_graph()) == []


def test_the_circle_finder_finds_a_circle():
    """The check above can fail: a three-module circle (a hint-only edge closing it) is found, a chain is not."""
    assert import_circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_the_import_graph_counts_type_hints_and_deferred_imports():
    graph = import_graph()
    assert "trickbag.plugin.context" in graph["trickbag.plugin.interface"]  # under TYPE_CHECKING
    assert "trickbag.train.setup" in graph["trickbag.train.trainer"]  # inside Trainer.__init__
