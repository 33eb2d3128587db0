"""TB205 mean-loss-over-samples: Batch-mean losses are summed and the sum divided by the number of samples.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trickbag.audit._ast import call_name, const_value, dotted, name_tokens, walk
from trickbag.audit._flow import FileModel, FunctionModel
from trickbag.audit._project import project_sets_reduction
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []

#: keywords that change a loss's reduction (anything but the default mean)
_REDUCTION = {"reduction", "size_average", "reduce"}
#: names of a loss object
_CRITERION = {"criterion", "crit", "criteria", "loss", "lossfn"}
_CRITERION_WORDS = _CRITERION | {"fn", "func", "function", "obj"}
#: names of a dataset (its len() counts samples)
_SAMPLES = {"dataset", "datasets", "data_set", "sampler", "samples", "examples", "instances"}


def _item_of(value: ast.AST) -> str | None:
    """The name whose scalar ``value`` takes, unweighted: ``loss.item()``, ``loss.data.item()``,
    ``loss.detach().item()``, ``float(loss)``; None otherwise."""
    if isinstance(value, ast.Call) and call_name(value) == "float" and len(value.args) == 1:
        value = value.args[0]
    elif not (isinstance(value, ast.Call) and call_name(value) == "item" and not value.args):
        return None
    else:
        value = value.func.value  # type: ignore[attr-defined]  # an attribute call: .item()
    while True:
        if isinstance(value, ast.Call) and call_name(value) in ("detach", "cpu", "item") and not value.args \
                and isinstance(value.func, ast.Attribute):
            value = value.func.value
        elif isinstance(value, ast.Attribute) and value.attr == "data":
            value = value.value
        else:
            break
    return value.id if isinstance(value, ast.Name) else None


def _defaults_to_mean(call: ast.Call) -> bool:
    return not any(k.arg in _REDUCTION or k.arg is None for k in call.keywords)


def _file_criteria(file: FileModel) -> dict[str, bool]:
    """Loss objects built in the file: name (last part: ``criterion`` for ``self.criterion``) -> averages."""
    def build() -> dict[str, bool]:
        out: dict[str, bool] = {}
        for n in file.nodes:
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and len(n.targets) == 1 \
                    and (name := dotted(n.targets[0])) and call_name(n.value).endswith("Loss"):
                last = name.split(".")[-1]
                out[last] = out.get(last, True) and _defaults_to_mean(n.value)
        return out
    return file.memo("tb205_criteria", build)


_PASSED_IN = "a loss object from elsewhere; no reduction keyword in this file"
_PASSED_IN_PROJECT = "a loss object from elsewhere; no reduction keyword in the project"


def _mean_loss(fm: FunctionModel, name: str, line: int) -> str | None:
    """``name`` was last computed, before ``line``, by a loss that averages over the batch: ``F.cross_entropy``
    or ``criterion(...)`` (a ``...Loss()`` of this file) without a reduction keyword, or ``.mean()``."""
    found = [n for n in fm.nodes if isinstance(n, ast.Assign) and n.lineno < line and len(n.targets) == 1
             and isinstance(n.targets[0], ast.Name) and n.targets[0].id == name]
    if not found or not isinstance(value := found[-1].value, ast.Call):
        return None
    func = call_name(value)
    if func == "mean" and not value.args and not value.keywords:
        return ".mean()"
    if not _defaults_to_mean(value):
        return None
    qual = fm.file.imports.qualname(value.func)
    if qual.startswith("torch.nn.functional.") and (func.endswith("_loss") or func in ("cross_entropy",
                                                                                         "binary_cross_entropy")):
        return f"F.{func} without reduction="
    callee = (dotted(value.func) or "").split(".")[-1]
    criteria = _file_criteria(fm.file)
    if criteria.get(callee) is True:
        return f"{callee} is a loss built without reduction="
    words = set(name_tokens(callee))
    if callee not in criteria and words & _CRITERION and words <= _CRITERION_WORDS and not _REDUCTION & {
            k.arg for n in fm.file.nodes if isinstance(n, ast.Call) for k in n.keywords}:
        return _PASSED_IN if project_sets_reduction(fm.file.path) else _PASSED_IN_PROJECT
    return None


def _counts_samples(fm: FunctionModel, loop: ast.AST, divisor: ast.AST) -> bool:
    """``divisor`` counts samples: ``len(loader.dataset)`` / ``len(train_dataset)``, or a name the loop adds
    each batch's size to (``total += labels.size(0)``)."""
    if isinstance(divisor, ast.Call) and call_name(divisor) == "len" and len(divisor.args) == 1:
        return bool(set(name_tokens(dotted(divisor.args[0]) or "")) & _SAMPLES)
    if not isinstance(divisor, ast.Name):
        return False
    for n in walk(loop):
        if isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Add) and dotted(n.target) == divisor.id:
            v = n.value
            if isinstance(v, ast.Call) and call_name(v) in ("size", "numel") and (
                    call_name(v) == "numel" or [const_value(a) for a in v.args] == [0]):
                return True
            if isinstance(v, ast.Subscript) and isinstance(v.value, ast.Attribute) and v.value.attr == "shape" \
                    and const_value(v.slice) == 0:
                return True
            if isinstance(v, ast.Call) and call_name(v) == "len":
                return True
    return False


def _divided(fm: FunctionModel, acc: str, after: int, loop: ast.AST) -> ast.BinOp | ast.AugAssign | None:
    """The division of ``acc`` by a count of samples after line ``after``, if any."""
    for n in fm.nodes:
        if getattr(n, "lineno", 0) <= after:
            continue
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div) and dotted(n.left) == acc \
                and _counts_samples(fm, loop, n.right):
            return n
        if isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Div) and dotted(n.target) == acc \
                and _counts_samples(fm, loop, n.value):
            return n
    return None


@rule("TB205", "mean-loss-over-samples",
      fix="weight each batch by its size (total += loss.item() * x.size(0)) or divide by the number of batches")
def mean_loss_over_samples(file: FileModel) -> Iterator[Hit]:
    """Batch-mean losses are summed and the sum divided by the number of samples.

    A loss with the default ``reduction='mean'`` is already an average over its batch.  Adding ``loss.item()``
    per batch and dividing the total by the number of samples (``len(loader.dataset)``, or a counter of
    ``x.size(0)``) divides by the batch size twice: the reported epoch loss is about ``batch_size`` times too
    small, changes when the batch size changes, and cannot be compared with the validation loss computed the
    same way at another batch size, nor with a loss curve from another run.  Early stopping or a plateau
    scheduler fed with it still sees the right trend, so the mistake survives.

    Reported at ``total += loss.item()`` (also ``float(loss)``, ``loss.data.item()``) inside a loop, when
    ``loss`` was last computed in the function by ``torch.nn.functional``'s loss functions or by a ``...Loss()``
    object built in the file, with no ``reduction`` keyword, or by ``.mean()``, and ``total`` is later divided by
    ``len(...dataset)`` / ``len(...sampler)`` or by a name the same loop adds ``x.size(0)``, ``x.shape[0]``,
    ``len(x)`` or ``x.numel()`` to.  A loss object passed in from elsewhere, or built with any ``reduction=``,
    is not reported.

    Wrong::

        criterion = nn.CrossEntropyLoss()
        for x, y in loader:
            loss = criterion(model(x), y)
            ...
            total += loss.item()
        epoch_loss = total / len(loader.dataset)

    Right::

        criterion = nn.CrossEntropyLoss()
        for x, y in loader:
            loss = criterion(model(x), y)
            ...
            total += loss.item() * x.size(0)
        epoch_loss = total / len(loader.dataset)
    """
    for fm in file.functions:
        for a in fm.nodes:
            if not (isinstance(a, ast.AugAssign) and isinstance(a.op, ast.Add) and (acc := dotted(a.target))
                    and (name := _item_of(a.value))):
                continue
            loops = [lp for lp in fm.loops if any(x is a for x in walk(lp.node))]
            if not loops or not (how := _mean_loss(fm, name, a.lineno)):
                continue
            div = _divided(fm, acc, a.lineno, loops[-1].node)
            if div is not None:
                yield Hit(a, f"{acc} adds up batch means ({name}: {how}), then line {div.lineno} divides it by a "
                             "count of samples: the result is about batch_size times too small",
                          confidence="high" if how != _PASSED_IN else "low")
