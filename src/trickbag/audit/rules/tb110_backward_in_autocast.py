"""TB110 backward-in-autocast: ``backward()`` is called inside an ``autocast`` block.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trickbag.audit._flow import (
    BACKWARD,
    FileModel,
)
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []



@rule("TB110", "backward-in-autocast", fix="close the autocast block after the loss; call backward() outside it")
def backward_in_autocast(file: FileModel) -> Iterator[Hit]:
    """``backward()`` is called inside an ``autocast`` block.

    Autocast should wrap the forward pass and the loss only.  The backward pass runs in the dtypes
    the forward chose; running it under autocast is not recommended by PyTorch and can pick
    different (lower-precision) kernels for ops recorded in the backward.

    Not reported: a backward in the branch where the autocast's own ``enabled=`` flag is false (``with
    autocast(enabled=amp):`` ... ``if amp: ... else: loss.backward()``): no autocast is on there.

    Wrong::

        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()

    Right::

        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
    """
    for fm in file.functions:
        for b in fm.kind_events(BACKWARD):
            ctx = b.in_context("autocast")
            if ctx is not None and not _autocast_off_here(b, ctx):
                yield Hit(b.node, "backward() runs inside autocast; autocast should cover forward + loss only")


def _autocast_off_here(b, ctx: ast.AST) -> bool:
    """``with autocast(enabled=self.para['amp']):`` ... ``if self.para['amp']: ... else: loss.backward()``: the
    backward sits in the branch where the flag that enables the autocast is false, so no autocast is on there."""
    call = next((n for n in ast.walk(ctx) if isinstance(n, ast.Call)
                 and any(k.arg == "enabled" for k in n.keywords)), None)
    if call is None:
        return False
    flag = ast.dump(next(k.value for k in call.keywords if k.arg == "enabled"))
    for g in b.guards:
        test = g.node.test
        negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
        core = ast.dump(test.operand if negated else test)
        if core == flag and g.branch == negated:
            return True
    return False
