"""TB114 accumulated-mean-of-means: A loss averaged over each micro-batch's own valid items is divided by the
accumulation count.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from trickbag.audit._ast import call_name, const_value, dotted, name_tokens, names_in, str_const, walk, walk_no_defs
from trickbag.audit._flow import (
    BACKWARD,
    FileModel,
    FunctionModel,
)
from trickbag.audit._project import imported_definition
from trickbag.audit._query import at_level, loops_of
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []

#: a divisor that is the number of micro-batches of an update
_STEPS = re.compile(r"accum|grad_acc|micro|update_freq")
#: a name of a mask of valid items (``attention_mask``, ``loss_mask``, ``valid``, ``non_pad``)
_MASK = {"mask", "valid", "nonpad", "non_pad", "keep"}
#: a factor that weights a micro-batch by its count of items, or divides by the update's total count
_COUNT = {"num", "count", "counts", "tokens", "ntokens", "ntok", "tok", "items", "total", "weight", "weights",
          "numel", "size", "len", "n"}
_NOT_MEAN = {"sum", "none"}
_LIMIT = 64  # values followed back from one loss


_Values = list[tuple[ast.AST, "ast.operator | None"]]


def _values(fm: FunctionModel, expr: ast.AST, before: int) -> _Values:
    """The loss expression and the values it was computed from in this function, as (expression, operator of an
    in-place assignment or None): ``loss = ce(...); loss /= k; (loss / 2).backward()`` -> the three of them."""
    out: _Values = [(expr, None)]
    todo, seen = [(expr, before)], set()
    while todo and len(out) < _LIMIT:
        value, order = todo.pop()
        for name in names_in(value):
            for a in fm.last_assignments(name, order):
                if id(a) in seen or a.value is None:
                    continue
                seen.add(id(a))
                out.append((a.value, a.op))
                todo.append((a.value, a.order))
    return out


def _factors(values: _Values) -> Iterator[tuple[ast.AST, bool]]:
    """(factor, is a divisor) of every division and multiplication among the loss's values."""
    for value, op in values:
        if isinstance(op, (ast.Div, ast.Mult)):
            yield value, isinstance(op, ast.Div)
        for n in walk_no_defs(value):
            if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Div, ast.Mult)):
                yield n.right, isinstance(n.op, ast.Div)
                if isinstance(n.op, ast.Mult):
                    yield n.left, False
            elif isinstance(n, ast.Call) and call_name(n) in ("div", "div_", "true_divide", "divide") and n.args:
                yield n.args[0], True


def _words(expr: ast.AST) -> set[str]:
    out: set[str] = set()
    for name in names_in(expr):
        out.update(name_tokens(name.split(".")[-1]))
        out.add(name.split(".")[-1].lower())
    out.update(call_name(c) for c in walk_no_defs(expr) if isinstance(c, ast.Call))
    return out


def _steps_like(expr: ast.AST, counter: set[str]) -> bool:
    return bool(names_in(expr) & counter) or any(_STEPS.search(n.lower()) for n in names_in(expr)) \
        or any(isinstance(c, ast.Call) and _STEPS.search(call_name(c).lower()) for c in walk_no_defs(expr))


def _mask_like(expr: ast.AST) -> bool:
    """A mask of valid items, or a comparison that makes one (``labels != -100``)."""
    return bool(_words(expr) & _MASK) or any(isinstance(n, ast.Compare) for n in walk_no_defs(expr))


def _mean_call(call: ast.Call) -> bool:
    """A loss call (or a loss constructor) that drops ``ignore_index`` items and averages the rest."""
    kws = {k.arg: k.value for k in call.keywords if k.arg}
    return "ignore_index" in kws and str_const(kws.get("reduction")) not in _NOT_MEAN


def _masked_mean(node: ast.AST) -> bool:
    """``(loss * mask).sum() / mask.sum()`` or ``loss[mask].mean()``: a mean over this micro-batch's valid items."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return any(isinstance(c, ast.Call) and call_name(c) in ("sum", "count_nonzero") for c in walk(node.right)) \
            and _mask_like(node.right) and not isinstance(const_value(node.right), (int, float))
    if isinstance(node, ast.Call) and call_name(node) == "mean" and isinstance(node.func, ast.Attribute):
        target = node.func.value
        return isinstance(target, ast.Subscript) and _mask_like(target.slice)
    return False


def _criterion(fm: FunctionModel, callee: str, before: int) -> ast.Call | None:
    """The ``nn.CrossEntropyLoss(ignore_index=pad)`` that built ``criterion`` / ``self.loss_fn``: in this function
    (or at module level) for a plain name, in a method of the class for ``self.<name>``."""
    if "." not in callee:
        assigns = fm.last_assignments(callee, before) or fm.file.module.last_assignments(callee, 1 << 30)
        values = [a.value for a in assigns]
    elif callee.startswith("self.") and fm.cls is not None:
        values = [n.value for n in walk(fm.cls) if isinstance(n, (ast.Assign, ast.AnnAssign))
                  and any(dotted(t) == callee for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))]
    else:
        values = []
    return next((v for v in values if isinstance(v, ast.Call) and _mean_call(v)), None)


def _call_drops(call: ast.Call) -> str:
    """``high`` when the call drops a value it picks (``ignore_index=-100``, ``=tok.pad_id``), ``low`` when it hands
    on a name (``ignore_index=ignore_index``: a default the data may never hold)."""
    kw = next(k.value for k in call.keywords if k.arg == "ignore_index")
    return "high" if _chosen(kw) else "low"


def _helper_drops(fm: FunctionModel, call: ast.Call) -> str | None:
    """A local helper, or a function imported from the project, that computes such a mean: ``high`` when it drops
    items by itself or is told which (``ignore_index=pad_id`` at the call), ``low`` when it only would with its
    parameter's default (``def ce(logits, y, ignore_index=-100)``: the data may hold no such item)."""
    helper = fm.file.resolve(call, fm)
    node = helper.node if helper is not None else \
        imported_definition(fm.file.tree, fm.file.path, call.func.id) if isinstance(call.func, ast.Name) else None
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    if any(_masked_mean(n) for n in walk(node)):
        return "high"
    drops = [n for n in walk(node) if isinstance(n, ast.Call) and _mean_call(n)]
    if not drops:
        return None
    params = {a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs}
    told = any(k.arg == "ignore_index" and _chosen(k.value) for k in call.keywords)
    fixed = any(not names_in(k.value) & params for d in drops for k in d.keywords if k.arg == "ignore_index")
    return "high" if told or fixed else "low"


def _chosen(value: ast.AST) -> bool:
    """An ignored value the caller picks (``0``, ``tokenizer.pad_token_id``), not a default handed on by name
    (``ignore_index=ignore_index``: the data may hold no such item)."""
    return const_value(value) not in (None, ...) or bool(_words(value) & {"pad", "padding", "mask"})


def _labels_item(values: _Values) -> bool:
    """The targets are a batch's ``"labels"`` entry: token labels padded (and prompt-masked) with the ignored
    value by the collator of a fine-tuning set."""
    return any(isinstance(n, ast.Subscript) and "labels" in name_tokens(str_const(n.slice) or "")
               for value, _ in values for n in walk_no_defs(value))


_RESHAPES = {"view", "reshape", "contiguous", "flatten", "long", "to", "cuda"}


def _sliced_from(fm: FunctionModel, expr: ast.AST | None) -> tuple[str, str] | None:
    """(tensor, slice) when ``expr`` is a slice of a named tensor (``data[:, 1:n + 1]``), through reshapes and one
    local assignment."""
    for _ in range(3):
        while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in _RESHAPES:
            expr = expr.func.value
        if isinstance(expr, ast.Name):
            assigns = fm.last_assignments(expr.id, 1 << 30)
            expr = assigns[-1].value if len(assigns) == 1 else None
            continue
        break
    if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Name) \
            and any(isinstance(n, ast.Slice) for n in walk(expr.slice)):
        return expr.value.id, ast.dump(expr.slice)
    return None


def _packed_targets(fm: FunctionModel, call: ast.Call) -> bool:
    """Next-token targets sliced from the same packed token tensor as the inputs (``x = data[:, :n]``,
    ``y = data[:, 1:n + 1]``) with a negative ``ignore_index``: token ids are never negative, so no target is
    dropped and every micro-batch has the same count of items (lit-llama's pre-training on a packed stream)."""
    ignore = next((const_value(k.value) for k in call.keywords if k.arg == "ignore_index"), None)
    if not isinstance(ignore, int) or ignore >= 0:
        return False
    target = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "target"), None)
    src = _sliced_from(fm, target)
    if src is None:
        return False
    return any(isinstance(a.value, ast.AST) and (other := _sliced_from(fm, a.value)) is not None
               and other[0] == src[0] and other[1] != src[1] for a in fm.assigns if a.value is not None)


def _call_level(fm: FunctionModel, call: ast.Call, before: int) -> str | None:
    """How sure a call of the loss is a mean over its micro-batch's own valid items (None: not such a call)."""
    if fm.file.resolve(call, fm) is not None or (isinstance(call.func, ast.Name) and not _mean_call(call)):
        return _helper_drops(fm, call)
    if _mean_call(call):
        return "low" if _packed_targets(fm, call) else _call_drops(call)
    built = _criterion(fm, callee, before) if (callee := dotted(call.func)) else None
    return _call_drops(built) if built is not None else None


def _mean_over_valid_items(fm: FunctionModel, values: _Values, before: int) -> str | None:
    """Is one of the loss's values a mean over the micro-batch's own valid items?  The confidence, or None."""
    found = None
    for value, _ in values:
        for n in walk_no_defs(value):
            level = "high" if _masked_mean(n) else _call_level(fm, n, before) if isinstance(n, ast.Call) else None
            if level == "high":
                return level
            found = level or found
    return "high" if found == "low" and _labels_item(values) else found


def _weighted(values: _Values, counter: set[str]) -> bool:
    """The loss is scaled by a count other than the number of micro-batches (``* n_tokens``, ``/ total_tokens``):
    each micro-batch already weighs by its items."""
    return any(not _steps_like(f, counter) and not _mask_like(f) and _words(f) & _COUNT
               for f, _ in _factors(values))


@rule("TB114", "accumulated-mean-of-means",
      fix="sum the loss over each micro-batch's items (reduction=\"sum\") and divide by the update's total count "
          "of items, or weight each micro-batch's mean by its count")
def accumulated_mean_of_means(file: FileModel) -> Iterator[Hit]:
    """A loss averaged over each micro-batch's own valid items is divided by the accumulation count.

    With ``ignore_index`` (padding, prompt tokens) or a mask, each micro-batch's loss is the mean over
    its own number of valid items, and that number differs between micro-batches.  Dividing each such
    mean by the number of micro-batches gives a micro-batch with 10 valid tokens the same weight as one
    with 1000: the update is a mean of means, not the gradient of the big batch, and it changes with
    the accumulation count (transformers PR #34191).  ``accelerator.accumulate`` divides by the count
    too.  Next-token targets sliced from the same packed token tensor as the inputs (``x = data[:, :n]``,
    ``y = data[:, 1:n + 1]``) with a negative ``ignore_index`` drop nothing (token ids are never negative):
    low confidence only.  Sum the loss over the items of each micro-batch and divide by the total number of items of
    the whole update, or weight each micro-batch's mean by its count.

    Wrong::

        for i, (x, y) in enumerate(loader):
            loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten(), ignore_index=-100)
            (loss / accum_steps).backward()
            if (i + 1) % accum_steps == 0:
                optimizer.step()
                optimizer.zero_grad()

    Right::

        for batches in update_groups(loader, accum_steps):
            n_items = sum((y != -100).sum() for _, y in batches)
            for x, y in batches:
                loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten(), ignore_index=-100,
                                       reduction="sum")
                (loss / n_items).backward()
            optimizer.step()
            optimizer.zero_grad()
    """
    for fm, loop in loops_of(file):
        acc = fm.accumulation(loop)
        if acc is None:
            continue
        scope = acc.inner or acc.loop
        for b in scope.events:
            loss = b.extra.get("loss")
            if b.kind != BACKWARD or loss is None or (acc.inner is None and not at_level(b, loop)):
                continue
            values = _values(fm, loss, b.order)
            divided = acc.managed or any(d and _steps_like(f, acc.counter) for f, d in _factors(values))
            if not divided or _weighted(values, acc.counter):
                continue
            sure = _mean_over_valid_items(fm, values, b.order)
            if sure is not None:
                by = "accelerator.accumulate" if acc.managed else "the accumulation count"
                yield Hit(b.node, f"the loss is a mean over each micro-batch's own valid items, divided by {by}: "
                                  f"uneven micro-batches weigh alike, not as the big batch's gradient", confidence=sure)
