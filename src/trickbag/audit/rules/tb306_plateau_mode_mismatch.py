"""TB306 plateau-mode-mismatch: ReduceLROnPlateau waits for the metric to go the wrong way.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trickbag.audit._ast import call_name, const_value, dotted, name_tokens, walk
from trickbag.audit._flow import FileModel
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []

#: words of a metric that improves by going down
_LOWER = {"loss", "losses", "err", "error", "errors", "mse", "mae", "rmse", "nll", "perplexity", "ppl", "wer", "cer",
          "distance", "dist", "cost"}
#: words of a metric that improves by going up
_HIGHER = {"acc", "accuracy", "auc", "auroc", "f1", "score", "map", "miou", "iou", "bleu", "psnr", "ssim",
           "precision", "recall", "dice", "r2", "top1", "top5", "reward", "return", "fscore"}


def _mode(call: ast.Call) -> tuple[str, ast.AST] | None:
    """The constant mode a ReduceLROnPlateau is built with (``'min'`` by default) and the node that says it."""
    node: ast.AST = call
    value: object = "min"
    if len(call.args) > 1:
        node, value = call.args[1], const_value(call.args[1])
    for k in call.keywords:
        if k.arg == "mode":
            node, value = k.value, const_value(k.value)
        elif k.arg is None:
            return None  # ``**kwargs`` may set it
    return (str(value), node) if value in ("min", "max") else None


def _direction(arg: ast.AST) -> str | None:
    """'min' for a loss-like value, 'max' for an accuracy-like one, None when the name says neither or the
    expression flips it (``-loss``, ``1 - acc``)."""
    if any(isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub) or isinstance(n, ast.BinOp)
           and isinstance(n.op, ast.Sub) for n in walk(arg)):
        return None
    words: set[str] = set()
    for n in walk(arg):
        if isinstance(n, (ast.Name, ast.Attribute)):
            words |= set(name_tokens((dotted(n) or "").split(".")[-1]))
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            words |= set(name_tokens(n.value))
    lower, higher = bool(words & _LOWER), bool(words & _HIGHER)
    return "min" if lower and not higher else "max" if higher and not lower else None


@rule("TB306", "plateau-mode-mismatch",
      fix="mode='min' for a loss (or an error), mode='max' for an accuracy (or a score)")
def plateau_mode_mismatch(file: FileModel) -> Iterator[Hit]:
    """ReduceLROnPlateau waits for the metric to go the wrong way.

    ``ReduceLROnPlateau`` lowers the learning rate when the value passed to ``step(value)`` stops improving, and
    ``mode`` says which way is better: ``'min'`` (the default) for a loss, ``'max'`` for an accuracy.  Built with
    ``'max'`` and stepped with a validation loss, every epoch whose loss falls counts as "no improvement": the LR is
    cut after ``patience`` epochs of progress and keeps being cut while training goes well.  With the default
    ``'min'`` and an accuracy, the LR drops while accuracy climbs.  Nothing fails; the run just stalls early.

    Reported at the mode (or at the constructor, for the default) when the scheduler built in the file is stepped
    with a value whose names say it goes the other way: loss, error, MSE, perplexity, WER... for ``'max'``;
    accuracy, AUC, F1, score, mIoU, BLEU, PSNR, reward... for ``'min'``.  Not reported when the stepped value is
    negated or subtracted (``-val_loss``, ``1 - acc``), when its names say both or neither, when the mode is not
    a constant, or when the file builds the same scheduler name in both modes (one per branch).

    Wrong::

        scheduler = ReduceLROnPlateau(optimizer, "max", patience=10)
        for epoch in range(epochs):
            train_one_epoch(model, loader, optimizer)
            val_loss = evaluate(model, val_loader)
            scheduler.step(val_loss)

    Right::

        scheduler = ReduceLROnPlateau(optimizer, "min", patience=10)
        for epoch in range(epochs):
            train_one_epoch(model, loader, optimizer)
            val_loss = evaluate(model, val_loader)
            scheduler.step(val_loss)
    """
    if "ReduceLROnPlateau" not in file.identifiers():
        return
    built: dict[str, tuple[str, ast.AST]] = {}
    ambiguous: set[str] = set()
    for n in file.nodes:
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and call_name(n.value) == "ReduceLROnPlateau" \
                and len(n.targets) == 1 and (name := dotted(n.targets[0])) and (made := _mode(n.value)):
            key = name.split(".")[-1]
            if key in built and built[key][0] != made[0]:
                ambiguous.add(key)  # built in two modes (one per branch): which one a step meets is not known here
            built[key] = made
    for key in ambiguous:
        del built[key]
    if not built:
        return
    reported: set[int] = set()
    for n in file.nodes:
        if not (isinstance(n, ast.Call) and call_name(n) == "step" and isinstance(n.func, ast.Attribute) and n.args):
            continue
        recv = (dotted(n.func.value) or "").split(".")[-1]
        if recv not in built:
            continue
        mode, where = built[recv]
        goes = _direction(n.args[0])
        if goes is not None and goes != mode and id(where) not in reported:
            reported.add(id(where))
            what = "a loss-like value (lower is better)" if goes == "min" \
                else "an accuracy-like value (higher is better)"
            yield Hit(where, f"ReduceLROnPlateau in mode '{mode}' is stepped with {what} at line {n.lineno}: it "
                             "cuts the learning rate while the metric improves")
