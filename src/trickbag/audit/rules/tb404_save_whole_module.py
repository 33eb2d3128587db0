"""TB404 save-whole-module: ``torch.save(model)`` pickles the whole module (advisory).

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trickbag.audit import _roles as R
from trickbag.audit._ast import call_name, dotted
from trickbag.audit._flow import FileModel
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []



@rule("TB404", "save-whole-module", fix="torch.save(model.state_dict(), path)", severity="warning", opt_in=True)
def save_whole_module(file: FileModel) -> Iterator[Hit]:
    """``torch.save(model)`` pickles the whole module (advisory).

    An advisory, run only when selected (``--select TB404``).  The file then needs the exact same
    class, module path and source to load, only loads with
    ``weights_only=False`` (arbitrary code), and breaks on refactoring.  Save ``state_dict()``.

    Wrong::

        torch.save(model, "model.pt")

    Right::

        torch.save(model.state_dict(), "model.pt")
    """
    for fm in file.functions:
        for node in fm.nodes:
            if isinstance(node, ast.Call) and call_name(node) == "save" \
                    and file.imports.qualname(node.func) == "torch.save" and node.args:
                name = dotted(node.args[0])
                if name and fm.role(name) == R.MODEL:
                    yield Hit(node, f"torch.save({name}) pickles the whole module; save {name}.state_dict()")
