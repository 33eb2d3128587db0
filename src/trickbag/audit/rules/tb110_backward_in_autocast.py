"""TB110 backward-in-autocast: ``backward()`` is called inside an ``autocast`` block.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

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
            if b.in_context("autocast") is not None:
                yield Hit(b.node, "backward() runs inside autocast; autocast should cover forward + loss only")
