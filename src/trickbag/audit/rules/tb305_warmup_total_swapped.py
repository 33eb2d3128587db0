"""TB305 warmup-total-swapped: A warm-up schedule gets the warm-up length and the total length the wrong way round.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from trickbag.audit._ast import call_name, dotted, name_tokens, walk
from trickbag.audit._flow import FileModel
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []

#: schedule factories and classes that take (optimizer, warm-up length, total length)
_WARMUP_SCHEDULES = re.compile(r"^get_\w*schedule_with_warmup$|^Warmup(Linear|Cosine|CosineWithHardRestarts)Schedule$|"
                               r"^LinearWarmupCosineAnnealingLR$")
#: the keyword each takes for the two lengths
_WARMUP_KEYS = {"num_warmup_steps", "warmup_steps", "warmup_epochs", "warmup"}
_TOTAL_KEYS = {"num_training_steps", "t_total", "max_epochs", "total_steps"}
_WARM = {"warmup", "warm", "warmups"}


def _words(node: ast.AST | None, file: FileModel, fm) -> set[str]:
    """Tokens of the names and calls in ``node``, following a local name to what the function assigns it once."""
    if node is None:
        return set()
    out: set[str] = set()
    for n in walk(node):
        if isinstance(n, (ast.Name, ast.Attribute)):
            d = dotted(n) or ""
            out |= set(name_tokens(d.split(".")[-1]))
            if isinstance(n, ast.Name) and fm is not None:
                values = [a.value for a in fm.assigns if a.names == [n.id] and a.op is None and a.value is not None]
                if len(values) == 1 and values[0] is not node:
                    out |= {t for m in walk(values[0]) if isinstance(m, (ast.Name, ast.Attribute))
                            for t in name_tokens((dotted(m) or "").split(".")[-1])}
        elif isinstance(n, ast.Call):
            out.add(call_name(n))
    return out


def _argument(call: ast.Call, keys: set[str], position: int) -> ast.AST | None:
    kw = next((k.value for k in call.keywords if k.arg in keys), None)
    return kw if kw is not None else (call.args[position] if len(call.args) > position else None)


@rule("TB305", "warmup-total-swapped", fix="pass the warm-up length as the warm-up argument and the whole run's "
      "length (epochs x updates per epoch) as the total")
def warmup_total_swapped(file: FileModel) -> Iterator[Hit]:
    """A warm-up schedule gets the warm-up length and the total length the wrong way round.

    ``get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps)`` (and the other
    ``get_*_schedule_with_warmup`` factories, ``WarmupLinearSchedule(optimizer, warmup_steps, t_total)``,
    ``LinearWarmupCosineAnnealingLR(optimizer, warmup_epochs, max_epochs)``) take the warm-up first.  Swapped,
    the learning rate climbs for the whole run and never decays (or decays to zero within the "warm-up"), and
    nothing fails.

    Reported when the total-length argument is named after the warm-up (``num_training_steps=args.warmup``) while
    the warm-up argument is not (``num_warmup_steps=args.num_epochs * len(loader)``), by keyword or position,
    following a local name to the expression it was assigned.  A total that adds the warm-up to the rest
    (``num_training_steps=warmup + decay_steps``) is named after both and not reported.

    Wrong::

        scheduler = get_linear_schedule_with_warmup(
            optimizer, num_warmup_steps=epochs * len(loader), num_training_steps=args.warmup)

    Right::

        scheduler = get_linear_schedule_with_warmup(
            optimizer, num_warmup_steps=args.warmup, num_training_steps=epochs * len(loader))
    """
    for fm in file.functions:
        for n in fm.nodes:
            if not (isinstance(n, ast.Call) and _WARMUP_SCHEDULES.match(call_name(n))):
                continue
            warm, total = _argument(n, _WARMUP_KEYS, 1), _argument(n, _TOTAL_KEYS, 2)
            if warm is None or total is None:
                continue
            if _words(total, file, fm) & _WARM and not _words(warm, file, fm) & _WARM:
                yield Hit(n, f"{call_name(n)}(): the total length is the warm-up ({ast.unparse(total)}) and the "
                             f"warm-up is {ast.unparse(warm)}: the two are swapped, so the learning rate warms up "
                             f"for the whole run")
