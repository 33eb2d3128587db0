"""TB103 zero-grad-misplaced: ``zero_grad()`` erases gradients that the next optimizer step needs.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trickbag.audit import _roles as R
from trickbag.audit._ast import call_name, dotted
from trickbag.audit._flow import (
    BACKWARD,
    FORWARD,
    STEP,
    ZERO,
    Event,
    FileModel,
    FunctionModel,
    backward_like,
)
from trickbag.audit._loop_facts import framework_accumulates, helper_name, micro_batch_events
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []



def _zero_between(fm, s: Event) -> Iterator[Event]:
    backs = [b for b in fm.events if b.kind == BACKWARD and b.order < s.order and not b.exclusive(s)
             and b.loops[:len(s.loops)] == s.loops]
    if not backs:
        return
    b = backs[-1]
    opts = {x.recv for x in fm.kind_events(STEP)}
    for z in fm.kind_events(ZERO):
        if not (b.order < z.order < s.order) or z.exclusive(s) or z.exclusive(b) or z.loops != s.loops:
            continue
        if z.recv == s.recv or z.recv is None or (fm.role(z.recv) == R.MODEL and len(opts) == 1
                                                  and not _part_of_a_model(fm, z.recv)):
            yield z


def _part_of_a_model(fm, recv: str) -> bool:
    """``model.generator.zero_grad()``: one network of a model whose parts one optimizer updates together, zeroed
    between a backward and the step so that the step updates the other part only (a GAN's discriminator step)."""
    head, _, rest = recv.rpartition(".")
    return bool(head) and head not in ("self", "cls") and (fm.role(head) == R.MODEL or any(
        e.kind == FORWARD and e.recv == head for e in fm.events))


@rule("TB103", "zero-grad-misplaced",
      fix="zero the gradients after optimizer.step() (in the update branch), never between backward and step")
def zero_grad_misplaced(file: FileModel) -> Iterator[Hit]:
    """``zero_grad()`` erases gradients that the next optimizer step needs.

    Inside a gradient-accumulation loop, ``optimizer.zero_grad()`` on every micro-batch throws away
    the micro-batches accumulated so far: the update sees only the last one (the "accumulation"
    does nothing but lower the learning rate).  Between ``backward()`` and ``step()`` it zeroes the
    gradients the step was about to use.  In a loop without accumulation, zeroing at the top of the
    iteration is correct.  ``if n % k == 0: optimizer.zero_grad()`` at the top of the iteration and ``if n % k
    == 0: optimizer.step()`` after a backward run on every micro-batch (the same test twice) zero the window's
    gradients in the very iteration that steps: the update sees one micro-batch.

    Under ``accelerator.accumulate`` the prepared optimizer skips its ``zero_grad()`` until the gradients sync, but
    the model's own ``model.zero_grad()`` runs on every micro-batch: reported too; so is the optimizer's
    ``zero_grad()`` placed before the backward inside the block, which runs on the syncing micro-batch and clears
    the gradients of the earlier ones.

    A backward for the gradient of an input (``delta.requires_grad = True`` ... ``delta.grad`` read in the loop: the
    steps of a PGD attack) is not an accumulation, and ``if iteration == 0: optimizer.zero_grad()`` runs once, not
    per micro-batch, also inside the accumulation loop (``if i == 0: opt.zero_grad()`` before the first micro-batch).

    A local helper that only zeroes the gradients (``self._reset()`` setting ``p.grad = None`` in a loop over
    the parameters) counts where it is called, and is reported at that call when it runs on every micro-batch.

    Not reported: a sub-network's ``zero_grad()`` between a backward and the step of one optimizer over the whole
    model (``model.generator.zero_grad()`` in a GAN's discriminator step: only the other part updates), and a loop
    that reads each backward's gradients out (``G[:, k].copy_(p.grad.view(-1))``: GEM's per-task gradients).

    Wrong::

        for i, (x, y) in enumerate(loader):
            optimizer.zero_grad()
            loss = loss_fn(model(x), y) / accum
            loss.backward()
            if (i + 1) % accum == 0:
                optimizer.step()

    Right::

        for i, (x, y) in enumerate(loader):
            loss = loss_fn(model(x), y) / accum
            loss.backward()
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
    """
    for z in micro_batch_events(file, ZERO):
        if framework_accumulates(z):
            if _model_zero_grad_in_accumulate(z):
                yield Hit(z.node, f"{z.recv}.zero_grad() inside accelerator.accumulate runs on every micro-batch (only "
                                  "the prepared optimizer's zero_grad is skipped until the gradients sync): it "
                                  "discards the gradients being accumulated; call optimizer.zero_grad()")
            elif _zero_before_backward_in_accumulate(z):
                yield Hit(z.node, f"{z.recv}.zero_grad() runs before the backward inside accelerator.accumulate: on "
                                  "the micro-batch that syncs it clears the gradients of the earlier ones; zero after "
                                  "optimizer.step()")
            continue
        if z.kind == ZERO:
            yield Hit(z.node, "zero_grad() on every micro-batch discards the gradients being accumulated")
        else:
            yield Hit(z.node, f"{helper_name(z)}() zeroes the gradients on every micro-batch: it discards "
                              f"the gradients being accumulated")
    for fm in file.functions:
        for z in fm.kind_events(ZERO):
            if not framework_accumulates(z) and _zeroes_window_start(fm, z):
                yield Hit(z.node, "zero_grad() under the update test runs before the backward of the micro-batch "
                                  "that steps: it discards the gradients accumulated so far")
        for s in fm.kind_events(STEP):
            for z in _zero_between(fm, s):
                yield Hit(z.node, "zero_grad() between backward() and step() zeroes the gradients the step uses")



def _model_zero_grad_in_accumulate(z: Event) -> bool:
    """``model.zero_grad()`` (not the optimizer's) in a loop whose accumulation ``accelerator.accumulate`` runs,
    outside an ``if accelerator.sync_gradients:`` test."""
    fm = z.fm
    if z.kind != ZERO or not z.recv:
        return False
    accumulated = {dotted(a) for n in fm.nodes if isinstance(n, (ast.With, ast.AsyncWith)) for i in n.items
                   if isinstance(i.context_expr, ast.Call) and call_name(i.context_expr) == "accumulate"
                   for a in i.context_expr.args}  # ``with accelerator.accumulate(policy):``
    if fm.role(z.recv) != R.MODEL and z.recv not in accumulated:
        return False
    if z.recv in {x.recv for x in fm.kind_events(STEP)}:
        return False
    return not any("sync_gradients" in ast.unparse(g.node.test) for g in z.guards if hasattr(g.node, "test"))


def _zero_before_backward_in_accumulate(z: Event) -> bool:
    """The prepared optimizer's ``zero_grad()`` first in ``with accelerator.accumulate(model):``, its backward after
    it in the same block: skipped on the accumulating micro-batches, it runs on the syncing one before its backward."""
    ctx = z.in_context("accumulate")
    if ctx is None or z.kind != ZERO or z.recv not in {x.recv for x in z.fm.kind_events(STEP)}:
        return False
    if any("sync_gradients" in ast.unparse(g.node.test) for g in z.guards if hasattr(g.node, "test")):
        return False
    return any(backward_like(b) and b.in_context("accumulate") is ctx and b.order > z.order for b in z.fm.events)


def _zeroes_window_start(fm: FunctionModel, z: Event) -> bool:
    """``if n % k == 0: zero_grad()``, then a backward run on every micro-batch, then ``if n % k == 0: step()``
    (another ``if`` with the same test): the update keeps one micro-batch of its window."""
    mine = [g for g in z.guards if g.accum]
    for s in fm.kind_events(STEP):
        if s.order < z.order or s.loops != z.loops or s.exclusive(z) or not any(
                g.same_test(h) and g.condition()[1] == h.condition()[1] for g in mine for h in s.guards):
            continue
        if any(z.order < b.order < s.order and b.loops == z.loops and not any(g.accum for g in b.guards)
               and not b.exclusive(s) and not b.exclusive(z) for b in fm.events if backward_like(b)):
            return True
    return False
