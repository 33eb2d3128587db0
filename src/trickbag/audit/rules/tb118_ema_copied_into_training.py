"""TB118 ema-copied-into-training: The EMA weights are copied into the model mid-training and never put back.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trickbag.audit import _roles as R
from trickbag.audit._ast import call_name, dotted
from trickbag.audit._flow import BACKWARD, STEP, Event, FileModel, FunctionModel
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []


def _training_loop_runs(fm: FunctionModel, node: ast.AST, depth: int = 0) -> bool:
    """``node`` (a call in ``fm``) runs inside a loop that trains (a backward or an optimizer step in it), in ``fm``
    or, two calls up, at a call site of ``fm`` in its file (a nested ``save_checkpoint()`` called every N steps)."""
    line = getattr(node, "lineno", 0)
    for lp in fm.loops:
        inside = getattr(lp.node, "lineno", 0) <= line <= (getattr(lp.node, "end_lineno", 0) or 0)
        if inside and any(e.kind in (BACKWARD, STEP) for e in lp.events):
            return True
    if depth >= 2:
        return False
    sites: list[Event] = fm.call_sites()
    return any(_training_loop_runs(s.fm, s.node, depth + 1) for s in sites)


@rule("TB118", "ema-copied-into-training", fix="bracket the copy: ema.store(model.parameters()); "
      "ema.copy_to(model.parameters()); ...save or evaluate...; ema.restore(model.parameters())")
def ema_copied_into_training(file: FileModel) -> Iterator[Hit]:
    """The EMA weights are copied into the model mid-training and never put back.

    ``ema.copy_to(model.parameters())`` (diffusers' ``EMAModel``, and averaging helpers like it) overwrites the
    model's own weights with the average, to save or evaluate them.  Done inside the training loop (or in a helper
    the loop calls every N steps) without ``ema.store(...)`` before and ``ema.restore(...)`` after, the optimizer
    goes on from the average instead of its own weights: every save resets training to a lagging copy, and the
    optimizer's moments no longer match the weights.

    Reported at a ``copy_to`` of an object named like an EMA (``ema_unet``, ``self.ema``) that runs inside a loop
    that trains (a backward or an optimizer step in it) or in a function of the file called from one (two calls
    up), when the same function never calls that object's ``store`` before it nor ``restore`` after it.  A copy
    after the training loop (the final export) is not reported.

    Wrong::

        for step, batch in enumerate(loader):
            unet(batch).mean().backward()
            optimizer.step()
            optimizer.zero_grad()
            ema_unet.step(unet.parameters())
            if step % save_every == 0:
                ema_unet.copy_to(unet.parameters())
                pipeline.save_pretrained(out)

    Right::

        for step, batch in enumerate(loader):
            unet(batch).mean().backward()
            optimizer.step()
            optimizer.zero_grad()
            ema_unet.step(unet.parameters())
            if step % save_every == 0:
                ema_unet.store(unet.parameters())
                ema_unet.copy_to(unet.parameters())
                pipeline.save_pretrained(out)
                ema_unet.restore(unet.parameters())
    """
    for fm in file.functions:
        for n in fm.nodes:
            if not (isinstance(n, ast.Call) and call_name(n) == "copy_to" and isinstance(n.func, ast.Attribute)
                    and n.args):
                continue
            ema = dotted(n.func.value) or ""
            if R.role_by_name(ema) != R.EMA:
                continue
            line = n.lineno
            kept = any(isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and dotted(c.func.value) == ema
                       and ((c.func.attr == "store" and c.lineno <= line)
                            or (c.func.attr == "restore" and c.lineno > line)) for c in fm.nodes)
            if kept or not _training_loop_runs(fm, n):
                continue
            yield Hit(n, f"{ema}.copy_to() overwrites the model's weights with the average while training goes on, "
                         f"and nothing restores them: call {ema}.store(...) before and {ema}.restore(...) after")
