"""TB119 train-loader-unshuffled: A LightningModule / DataModule's training DataLoader never shuffles.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trickbag.audit._ast import call_name, const_value
from trickbag.audit._flow import FileModel
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []

_ORDERING = {"sampler", "batch_sampler", "shuffle"}


def _returned_calls(fn: ast.FunctionDef) -> list[ast.Call]:
    return [r.value for r in ast.walk(fn) if isinstance(r, ast.Return) and isinstance(r.value, ast.Call)]


def _unshuffled(call: ast.Call, methods: dict[str, ast.FunctionDef], depth: int = 0) -> ast.Call | None:
    """The ``DataLoader(...)`` call that ``call`` builds without ``shuffle=True``, a sampler or a batch sampler
    (directly, or through a method of the class it returns, given no such keyword), None when it may shuffle or
    cannot be seen."""
    if any(k.arg in _ORDERING and not (k.arg == "shuffle" and const_value(k.value) is False) for k in call.keywords) \
            or any(k.arg is None for k in call.keywords):
        return None  # ``shuffle=True`` / ``shuffle=self.shuffle`` / a sampler / ``**kwargs``: may shuffle
    if call_name(call) == "DataLoader":
        return call if len(call.args) < 3 else None  # the third positional argument is ``shuffle``
    if depth < 2 and isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name) \
            and call.func.value.id == "self" and call.func.attr in methods:
        helper = methods[call.func.attr]
        inner = _returned_calls(helper)
        found = [_unshuffled(c, methods, depth + 1) for c in inner]
        return found[0] if inner and all(f is not None for f in found) else None
    return None


@rule("TB119", "train-loader-unshuffled", fix="DataLoader(train_dataset, batch_size=..., shuffle=True)")
def train_loader_unshuffled(file: FileModel) -> Iterator[Hit]:
    """A LightningModule / DataModule's training DataLoader never shuffles.

    ``DataLoader`` keeps the dataset's order unless asked (``shuffle=False`` is its default).  A
    ``train_dataloader()`` hook returning one without ``shuffle=True`` (or a sampler) trains every epoch on the
    same order: batches are the same, correlated samples arrive together, and for data sorted by class or by
    length the model chases each block in turn.  Lightning adds a ``DistributedSampler`` with ``shuffle=True``
    only when it runs distributed, so the single-device run — the one people debug with — does not shuffle.

    Reported at the ``return`` of ``train_dataloader()`` in a class of the file, when the ``DataLoader`` it returns
    (directly, or through a method of the same class that builds it) has no ``shuffle=`` other than ``False``, no
    ``sampler=``, no ``batch_sampler=`` and no ``**kwargs``.  Not reported in a file that defines or uses an
    ``IterableDataset`` (it cannot be shuffled by the loader; it shuffles itself).

    Wrong::

        class Data(LightningDataModule):
            def train_dataloader(self):
                return DataLoader(self.train_set, batch_size=32, num_workers=4)

    Right::

        class Data(LightningDataModule):
            def train_dataloader(self):
                return DataLoader(self.train_set, batch_size=32, num_workers=4, shuffle=True)
    """
    if any(isinstance(n, (ast.Name, ast.Attribute)) and "IterableDataset" in (getattr(n, "id", "") or
                                                                               getattr(n, "attr", ""))
           for n in file.nodes):
        return
    for cls in file.classes.values():
        methods = {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}
        hook = methods.get("train_dataloader")
        if hook is None:
            continue
        for ret in (r for r in ast.walk(hook) if isinstance(r, ast.Return)):
            loader = _unshuffled(ret.value, methods) if isinstance(ret.value, ast.Call) else None
            if loader is not None:
                yield Hit(ret, "train_dataloader() returns a DataLoader that never shuffles (no shuffle=True, no "
                               "sampler): every epoch sees the training data in the same order")
