"""TB108 ema-misplaced: The EMA / SWA average is updated per micro-batch or before the optimizer step.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

from collections.abc import Iterator

from trickbag.audit._flow import (
    EMA_UPDATE,
    FileModel,
)
from trickbag.audit._loop_facts import per_micro_batch
from trickbag.audit._query import at_level, stepish, train_loop
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []



@rule("TB108", "ema-misplaced", fix="update the EMA / SWA model right after optimizer.step(), once per update")
def ema_misplaced(file: FileModel) -> Iterator[Hit]:
    """The EMA / SWA average is updated per micro-batch or before the optimizer step.

    An average of the weights must be taken after each real update.  Per micro-batch, the average
    sees the same weights ``k`` times (its decay is effectively ``decay**k``); before the step, it
    always lags one update and misses the last one.
    The update may be ``ema.update(model)``, ``swa_model.update_parameters(model)``, a helper named like
    one called with the model (``update_ema(ema_model, model)``, ``moving_average(ema, model, decay)``)
    or a local helper that blends one model's parameters into another's (``lerp_``, ``mul_`` + ``add_``).
    An ``*ema*`` object updated with numbers (``.item()``, ``float(...)``, a string key, a tensor reduced whole by
    ``out.mean()`` / ``torch.mean(out)``: a running mean of outputs or losses, such as LeCam regularisation's
    anchors) averages no weights and is not reported, nor one updated with a reward, loss or metric
    (``baseline.update(reward)``: REINFORCE's moving-average baseline).

    Wrong::

        for i, (x, y) in enumerate(loader):
            (loss_fn(model(x), y) / accum).backward()
            ema.update(model)
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()

    Right::

        for i, (x, y) in enumerate(loader):
            (loss_fn(model(x), y) / accum).backward()
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
                ema.update(model)
    """
    for fm in file.functions:
        for e in fm.kind_events(EMA_UPDATE):
            loop = train_loop(e)
            if per_micro_batch(e):
                yield Hit(e.node, "the weight average is updated on every micro-batch, not once per update")
            elif loop is not None and at_level(e, loop):
                steps = [s for s in loop.events if stepish(s) and not s.exclusive(e)]
                if steps and all(s.order > e.order for s in steps):
                    yield Hit(e.node, "the weight average is updated before the optimizer step of the iteration")
