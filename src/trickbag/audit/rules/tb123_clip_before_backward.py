"""TB123 clip-before-backward: Gradients are clipped before the backward() whose gradients the step uses.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

from collections.abc import Iterator

from trickbag.audit._flow import CLIP, Event, FileModel, FunctionModel, backward_like, steps_like
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []


def _within(e: Event, clip: Event) -> bool:
    """``e`` runs in the same iteration as ``clip`` (the same loops, or loops nested inside them)."""
    return e.loops[:len(clip.loops)] == clip.loops and not e.exclusive(clip)


def _misplaced(fm: FunctionModel, clip: Event) -> Event | None:
    """The backward that follows ``clip`` when the clip comes first in its iteration and the step it is meant for
    comes after that backward, with no clip in between; None otherwise."""
    same = sorted((e for e in fm.events if _within(e, clip)), key=lambda e: e.order)
    before = [e for e in same if e.order < clip.order]
    if any(backward_like(e) for e in before):
        return None  # a backward earlier in the iteration: this clip acts on its gradients
    after = [e for e in same if e.order > clip.order]
    back = next((e for e in after if backward_like(e)), None)
    if back is None or any(steps_like(e) for e in after if e.order < back.order):
        return None  # no backward follows, or the clip serves a step before it (a deferred update)
    rest = [e for e in after if e.order > back.order]
    step = next((e for e in rest if steps_like(e)), None)
    if any(e.kind == CLIP for e in rest if step is None or e.order < step.order):
        return None  # clipped again after the backward
    return back


@rule("TB123", "clip-before-backward",
      fix="clip after loss.backward() (after scaler.unscale_(optimizer) under AMP) and before optimizer.step()")
def clip_before_backward(file: FileModel) -> Iterator[Hit]:
    """Gradients are clipped before the backward() whose gradients the step uses.

    ``clip_grad_norm_`` rescales the ``.grad`` tensors that exist when it runs.  Called before ``loss.backward()``,
    it clips the previous step's gradients (or zeros, right after ``zero_grad()``), and the backward then writes
    fresh, unclipped gradients that the optimizer applies: the clipping the configuration asks for never happens,
    and a loss spike goes through at full size.

    Reported at a clip that comes before the first backward of its iteration (or of its function), when a
    backward follows it with no optimizer step in between and no clip after that backward.  Not reported when an
    optimizer step sits between the clip and the backward (an update deferred to the start of the next
    iteration), nor when the clip and the backward are in the two branches of one ``if``.

    Wrong::

        optimizer.zero_grad()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        loss.backward()
        optimizer.step()

    Right::

        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.step()
    """
    for fm in file.functions:
        for clip in fm.events:
            if clip.kind != CLIP:
                continue
            back = _misplaced(fm, clip)
            if back is not None:
                yield Hit(clip.node, f"gradients are clipped before the backward at line "
                                     f"{getattr(back.node, 'lineno', 0)}: the step then applies that backward's "
                                     "unclipped gradients")
