"""TB105 accumulated-loss-not-divided: The loss of a gradient-accumulation micro-batch is not divided by the
accumulation count.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

from collections.abc import Iterator

from trickbag.audit._flow import (
    BACKWARD,
    FileModel,
    rescales_grads,
)
from trickbag.audit._query import at_level, loops_of, scaled_loss
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []



@rule("TB105", "accumulated-loss-not-divided",
      fix="divide the loss by the number of accumulated micro-batches before backward()")
def accumulated_loss_not_divided(file: FileModel) -> Iterator[Hit]:
    """The loss of a gradient-accumulation micro-batch is not divided by the accumulation count.

    Summing the gradients of ``k`` micro-batches gives ``k`` times the gradient of their mean: the
    effective learning rate is multiplied by ``k`` (and so is what gradient clipping sees).  Divide
    each micro-batch loss by ``k`` so that ``k`` micro-batches equal one big batch.
    A step function that splits its batch itself (``for cx, cy in zip(x.chunk(n), y.chunk(n))``, or
    ``for _ in range(accum)``, with ``optimizer.step()`` after that loop) accumulates over ``n`` too.
    ``optimizer.backward(loss)`` (apex's FP16_Optimizer) back-propagates its argument.  ``loss.div_(k)`` as a
    statement before the backward divides it in place, and ``p.grad /= k`` over the parameters before the step
    averages the summed gradients afterwards.

    Wrong::

        for i, (x, y) in enumerate(loader):
            loss = loss_fn(model(x), y)
            loss.backward()
            if (i + 1) % accum_steps == 0:
                optimizer.step()
                optimizer.zero_grad()

    Right::

        for i, (x, y) in enumerate(loader):
            loss = loss_fn(model(x), y) / accum_steps
            loss.backward()
            if (i + 1) % accum_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
    """
    for fm, loop in loops_of(file):
        acc = fm.accumulation(loop)
        if acc is None or acc.managed or rescales_grads(fm):
            continue  # accelerator.backward divides the loss itself; ``p.grad /= k`` averages the sum afterwards
        scope = acc.inner or acc.loop
        for b in scope.events:
            if b.kind != BACKWARD or (acc.inner is None and not at_level(b, loop)):
                continue
            if scaled_loss(fm, b.extra.get("loss"), b.order, acc.counter) is False:
                yield Hit(b.node, "the micro-batch loss is not divided by the accumulation count: the update "
                                  "is the sum of the gradients, not their mean")
