"""TB113 clip-after-step: Gradients are clipped after the optimizer step that used them.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

from collections.abc import Iterator

from trickbag.audit._flow import (
    BACKWARD,
    CALL,
    CLIP,
    Event,
    FileModel,
    FunctionModel,
    backward_like,
    steps_like,
)
from trickbag.audit._loop_facts import helper_name, pure_call
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []


@rule("TB113", "clip-after-step", fix="clip between backward() and optimizer.step() (after scaler.unscale_ with AMP)")
def clip_after_step(file: FileModel) -> Iterator[Hit]:
    """Gradients are clipped after the optimizer step that used them.

    ``clip_grad_norm_`` rescales the ``.grad`` tensors in place; the optimizer reads them in ``step()``.
    Clipped after the step, the update has already used the unclipped gradients and the clipped ones are
    thrown away by the next ``zero_grad()`` (or added to by the next backward): the clip does nothing but
    cost time, and a ``--max-grad-norm`` option silently has no effect.

    Reported when, in one iteration of the training loop (or one call of a step function), the clip comes
    after an optimizer step with no backward between them and no step after it.  A clip followed by the step
    of another optimizer (one model's update, then another's clip and step) is in its place.  A helper that
    only clips counts where it is called.

    Wrong::

        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)

    Right::

        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
    """
    for fm in file.functions:
        steps = [s for s in fm.events if steps_like(s)]
        if not steps:
            continue
        for c in fm.events:
            if (c.kind == CLIP or pure_call(c, CLIP)) and _after_its_step(fm, c, steps):
                where = f" (in {helper_name(c)}())" if c.kind == CALL else ""
                yield Hit(c.node, f"gradients are clipped{where} after the optimizer step that used them: the "
                                  f"update was not clipped")


def _after_its_step(fm: FunctionModel, c: Event, steps: list[Event]) -> bool:
    """A step of the same iteration runs before ``c`` with no backward between, and none runs after it."""
    def same_pass(e: Event) -> bool:  # the same iteration of the same loops, not in another branch
        return e.loops == c.loops and not e.exclusive(c)

    before = [s for s in steps if s.order < c.order and same_pass(s)]
    if not before or any(s.order > c.order and same_pass(s) for s in steps):
        return False
    last = max(s.order for s in before)
    return not any(last < b.order < c.order and (backward_like(b) or BACKWARD in b.kinds()) and not b.exclusive(c)
                   for b in fm.events)
