"""Tricks and variants of an ablation: which overrides switch each trick, and which variants to train.

A trick is a name from the recipe's ``tricks`` section (switched with ``tricks.<name>.enabled``), a
dotted true/false recipe key (``data.augment``), or one of the aliases ``mixup`` / ``cutmix`` (the
``tricks.mix`` section with the other method's alpha set to 0). Variants (``--mode``):

* ``leave-one-out`` (default): ``all`` (every listed trick on, the reference), ``-<trick>`` (all but
  that one) for each trick, and ``baseline`` (all off);
* ``add-one``: ``baseline`` (the reference) and ``+<trick>`` (only that one on) for each trick;
* ``factorial``: every run of the 2^k design (or of its ``--fraction``, :mod:`.factorial`), named by the tricks it
  has on (``baseline``, ``+ema+mixup``, ..., ``all``); the reference of the per-variant table is ``baseline``.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Sequence
from typing import Literal

from trickbag.experiments import ExperimentError

__all__ = ["Mode", "MODES", "ALIASES", "Trick", "Variant", "parse_tricks", "ablation_variants", "cell_name"]

Mode = Literal["leave-one-out", "add-one", "factorial"]
MODES = ("leave-one-out", "add-one", "factorial")

#: tricks known under another name: (overrides to switch on, overrides to switch off)
ALIASES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "mixup": (("tricks.mix.enabled=true", "tricks.mix.cutmix_alpha=0"),
              ("tricks.mix.enabled=false", "tricks.mix.cutmix_alpha=0")),
    "cutmix": (("tricks.mix.enabled=true", "tricks.mix.mixup_alpha=0"),
               ("tricks.mix.enabled=false", "tricks.mix.mixup_alpha=0")),
}  # the other alpha is pinned both ways, so on/off variants differ in the switch only


@dataclasses.dataclass(frozen=True)
class Trick:
    """A switch of the recipe: the overrides that turn it on and off."""

    name: str
    on: tuple[str, ...]
    off: tuple[str, ...]

    @property
    def keys(self) -> set[str]:
        return {o.partition("=")[0] for o in self.on + self.off}


@dataclasses.dataclass(frozen=True)
class Variant:
    """One recipe variant of an ablation: a name, the tricks it has on and its overrides."""

    name: str
    slug: str  #: directory-safe name
    enabled: tuple[str, ...]
    overrides: tuple[str, ...]


def cell_name(variant: Variant, seed: int) -> str:
    """Name of the cell (variant, seed): its run directory and its key in ``ablation.json``."""
    return f"{variant.slug}_s{seed}"


def _bool_keys() -> list[str]:
    """Every recipe key whose type is exactly bool, dotted."""
    from pydantic import BaseModel

    from trickbag.recipe import Recipe

    out: list[str] = []

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, field in model.model_fields.items():
            ann = field.annotation
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                walk(ann, f"{prefix}{name}.")
            elif ann is bool:
                out.append(f"{prefix}{name}")

    walk(Recipe, "")
    return out


def _trick(name: str, known: list[str], bool_keys: list[str]) -> Trick:
    if name in ALIASES:
        on, off = ALIASES[name]
        return Trick(name, on, off)
    if "." in name:
        if name not in bool_keys:
            close = difflib.get_close_matches(name, bool_keys, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ExperimentError(
                f"--tricks: {name!r} is not a true/false recipe key{hint}; "
                "give a trick name (see `trickbag tricks`) or a boolean key such as data.augment"
            )
        return Trick(name, (f"{name}=true",), (f"{name}=false",))
    if name in known:
        key = f"tricks.{name}.enabled"
        return Trick(name, (f"{key}=true",), (f"{key}=false",))
    close = difflib.get_close_matches(name, known + list(ALIASES), n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ExperimentError(
        f"--tricks: unknown trick {name!r}{hint}; allowed: {', '.join(known + list(ALIASES))}, "
        "or a true/false recipe key such as data.augment"
    )


def parse_tricks(tricks: str | Sequence[str]) -> list[Trick]:
    """Read ``--tricks`` (comma-separated or a list) into :class:`Trick` switches.

    >>> [t.on for t in parse_tricks("label_smoothing,data.augment")]
    [('tricks.label_smoothing.enabled=true',), ('data.augment=true',)]
    >>> parse_tricks("label_smothing")
    Traceback (most recent call last):
    ...
    trickbag.experiments.ExperimentError: --tricks: unknown trick 'label_smothing' (did you mean 'label_smoothing'?)...
    """
    from trickbag.recipe import TricksConfig

    items = tricks.split(",") if isinstance(tricks, str) else list(tricks)
    names = [str(t).strip() for t in items if str(t).strip()]
    if not names:
        raise ExperimentError("--tricks is empty; give comma-separated trick names, e.g. --tricks mixup,ema")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ExperimentError(f"--tricks names {', '.join(dup)} more than once; list each trick once")
    known, bool_keys = list(TricksConfig.model_fields), _bool_keys()
    out = [_trick(name, known, bool_keys) for name in names]
    for i, a in enumerate(out):
        for b in out[i + 1 :]:
            if a.keys & b.keys:
                raise ExperimentError(
                    f"--tricks {a.name!r} and {b.name!r} switch the same recipe key "
                    f"({', '.join(sorted(a.keys & b.keys))}); list only one of them"
                )
    return out


def _slug(name: str) -> str:
    if name.startswith("-"):
        return "without-" + name[1:]
    if name.startswith("+"):
        return "with-" + name[1:]  # +a+b (a factorial run): with-a+b
    return name


def ablation_variants(tricks: Sequence[Trick], mode: Mode = "leave-one-out",
                      fraction: str | float = 1) -> tuple[list[Variant], str]:
    """The variants of an ablation and the name of the reference variant (``fraction``: of a factorial design).

    >>> ts = parse_tricks("label_smoothing,data.augment")
    >>> vs, ref = ablation_variants(ts, "leave-one-out")
    >>> [v.name for v in vs], ref
    (['all', '-label_smoothing', '-data.augment', 'baseline'], 'all')
    >>> [v.name for v in ablation_variants(ts, "add-one")[0]]
    ['baseline', '+label_smoothing', '+data.augment']
    >>> [v.name for v in ablation_variants(ts, "factorial")[0]]
    ['baseline', '+label_smoothing', '+data.augment', 'all']
    """
    from trickbag.experiments.ablate.factorial import factorial_design, parse_fraction

    if mode not in MODES:
        raise ExperimentError(f"--mode {mode!r} is not allowed; allowed: {', '.join(MODES)}")
    p = parse_fraction(fraction)
    if p and mode != "factorial":
        raise ExperimentError(f"--fraction applies to --mode factorial only (this is --mode {mode})")
    if not tricks:
        raise ExperimentError("an ablation needs at least one trick")

    def variant(name: str, on: set[str]) -> Variant:
        ov: list[str] = []
        for t in tricks:
            ov += t.on if t.name in on else t.off
        return Variant(name, _slug(name), tuple(t.name for t in tricks if t.name in on), tuple(ov))

    names = [t.name for t in tricks]
    if mode == "factorial":
        out = []
        for row in factorial_design(len(tricks), p).rows:
            on = [n for n, x in zip(names, row) if x > 0]
            name = "baseline" if not on else "all" if len(on) == len(names) else "".join(f"+{n}" for n in on)
            out.append(variant(name, set(on)))
        return out, "baseline"
    if mode == "leave-one-out":
        vs = [variant("all", set(names))]
        if len(names) > 1:  # with one trick, "all but it" is the baseline
            vs += [variant(f"-{n}", set(names) - {n}) for n in names]
        vs.append(variant("baseline", set()))
        return vs, "all"
    return [variant("baseline", set())] + [variant(f"+{n}", {n}) for n in names], "baseline"
