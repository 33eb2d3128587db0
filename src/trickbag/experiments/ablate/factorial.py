"""The 2^k factorial design of ``trickbag ablate --mode factorial`` and its effects: each trick's main effect and
every two-way interaction, with a confidence interval over paired seeds.

Each of the k tricks is a factor at two levels (off = -1, on = +1), lettered A, B, C, ... (I is skipped: it
names the identity). The full design runs all 2^k combinations; ``--fraction 1/2^p`` runs a regular 2^(k-p)
fraction: the first k-p tricks form a full design and each of the last p is set by a *generator*, a product of
earlier columns (:data:`GENERATORS`, minimum-aberration designs of the largest resolution found by an exhaustive
search over generators, each of resolution V or more). The generators' signs are chosen so that the fraction holds
the baseline (every trick off). The *defining relation* (``I = -ABCDE`` for k = 5, 1/2) lists the products that
are constant over the fraction; an effect is estimated together with its *aliases*, the effect times each word
(``A = -BCDE``: the estimate of A is A - BCDE). Resolution V (every word of 5 or more letters) keeps main effects
clear of anything below four-trick interactions and two-way interactions clear of anything below three-trick
ones.

Estimates, per seed s (every cell of the design runs the same seeds, so contrasts are paired):

* main effect of A: ``mean(y | A on) - mean(y | A off)`` = ``(2/N) sum_r x_rA y_rs`` over the N runs;
* interaction A x B: half the difference between A's effect with B on and with B off =
  ``(2/N) sum_r x_rA x_rB y_rs``;

and the interval is the Student-t interval over seeds of those per-seed contrasts,
``mean ± t_{(1+confidence)/2, n-1} · sd / sqrt(n)`` (a paired t over seeds: seed-level noise shared by a seed's
cells cancels in each contrast). Only seeds whose every cell finished are used.

>>> d = factorial_design(5, 1)
>>> d.runs, d.resolution, d.relation()
(16, 5, 'I = -ABCDE')
>>> d.aliases("A"), d.aliases("AB")
(['-BCDE'], ['-CDE'])
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from trickbag.experiments import ExperimentError

__all__ = ["LETTERS", "MAX_TRICKS", "GENERATORS", "Design", "parse_fraction", "factorial_design", "fraction_text",
           "effect_rows", "format_effects", "EFFECTS_CSV_HEADER"]

LETTERS = "ABCDEFGHJKL"  #: factor letters; no I (the identity of the defining relation)
MAX_TRICKS = len(LETTERS)  #: 11 tricks: 2048 runs per seed at full size

#: (k, p) -> the generators of the last p factors, as products of the first k - p letters. Found by an
#: exhaustive search over generators of 4 or more base letters: the largest resolution, then the fewest words of
#: that length (minimum aberration); the test checks each one's resolution. p = 1 takes every base letter (one
#: word of all k letters, resolution k).
GENERATORS: dict[tuple[int, int], tuple[str, ...]] = {
    **{(k, 1): (LETTERS[: k - 1],) for k in range(5, MAX_TRICKS + 1)},
    (8, 2): ("ABCD", "ABEF"),
    (9, 2): ("ABCDE", "ABCFG"),
    (10, 2): ("ABCDE", "ABCFGH"),
    (10, 3): ("ABCD", "ABEF", "ACEG"),
    (11, 2): ("ABCDEF", "ABCGHJ"),
    (11, 3): ("ABCDE", "ABCFG", "ABDFH"),
    (11, 4): ("ABCD", "ABEF", "ACEG", "BDFG"),
}

_ROMAN = {3: "III", 4: "IV", 5: "V", 6: "VI", 7: "VII", 8: "VIII", 9: "IX", 10: "X", 11: "XI"}


def fraction_text(p: int) -> str:
    """``1`` for p = 0, else ``1/2^p`` written out (``1/4``)."""
    return "1" if p == 0 else f"1/{2**p}"


def parse_fraction(fraction: Any) -> int:
    """``--fraction`` (``1``, ``1/2``, ``1/4``, ``0.125``, ...) -> p, the fraction being 1/2^p.

    >>> parse_fraction("1/4"), parse_fraction(0.5), parse_fraction("1")
    (2, 1, 0)
    >>> parse_fraction("1/3")
    Traceback (most recent call last):
    ...
    trickbag.experiments.ExperimentError: --fraction 1/3 is not a power of 1/2; give 1, 1/2, 1/4, 1/8, ...
    """
    try:
        value = Fraction(str(fraction).strip()) if not isinstance(fraction, bool) else None
    except (ValueError, ZeroDivisionError):
        value = None
    if value is None or not 0 < value <= 1 or value.numerator != 1 or value.denominator & (value.denominator - 1):
        raise ExperimentError(f"--fraction {fraction} is not a power of 1/2; give 1, 1/2, 1/4, 1/8, ...")
    return value.denominator.bit_length() - 1


@dataclasses.dataclass(frozen=True)
class Design:
    """A regular two-level design: ``rows[r][j]`` is trick j's level (-1 off, +1 on) in run r."""

    k: int
    p: int
    rows: tuple[tuple[int, ...], ...]
    words: tuple[tuple[int, str], ...]  #: the defining relation: (sign, letters), shortest first; empty if full

    @property
    def letters(self) -> str:
        return LETTERS[: self.k]

    @property
    def runs(self) -> int:
        return len(self.rows)

    @property
    def resolution(self) -> int | None:
        """The length of the shortest word of the defining relation; ``None`` for the full design."""
        return min((len(w) for _, w in self.words), default=None)

    def relation(self) -> str:
        """``I = -ABCDE`` (``I = ABCD = ...`` with every word), or ``full design`` when there is none."""
        if not self.words:
            return "full design (no aliases)"
        return "I = " + " = ".join(f"{'-' if s < 0 else ''}{w}" for s, w in self.words)

    def aliases(self, effect: str) -> list[str]:
        """The effects estimated together with ``effect`` (letters, e.g. ``"AB"``), signed: ``["-CDE"]``."""
        out = []
        for sign, word in self.words:
            alias = "".join(c for c in self.letters if (c in effect) != (c in word))
            out.append(f"{'-' if sign < 0 else ''}{alias}")
        return sorted(out, key=lambda a: (len(a.lstrip("-")), a.lstrip("-")))

    def column(self, effect: str) -> list[int]:
        """The ±1 column of ``effect`` (a product of letters) over the runs."""
        idx = [self.letters.index(c) for c in effect]
        return [math.prod(row[i] for i in idx) for row in self.rows]


def _check_size(k: int, p: int) -> None:
    if k < 2:
        raise ExperimentError("--mode factorial needs at least 2 tricks (their main effects and interaction); "
                              "for one trick use --mode add-one")
    if k > MAX_TRICKS:
        raise ExperimentError(f"--mode factorial takes at most {MAX_TRICKS} tricks, got {k}; "
                              "ablate fewer at a time")
    if p and (k, p) not in GENERATORS:
        can = [q for q in range(1, k) if (k, q) in GENERATORS]
        if not can:
            raise ExperimentError(
                f"--fraction {fraction_text(p)} cannot reach resolution V with {k} tricks (no fraction of "
                f"{k} tricks can); run the full design (--fraction 1, {2**k} runs per seed)")
        raise ExperimentError(
            f"--fraction {fraction_text(p)} cannot reach resolution V with {k} tricks ({2 ** (k - p)} runs per "
            f"seed); the smallest fraction that can is {fraction_text(max(can))} ({2 ** (k - max(can))} runs)")


def factorial_design(k: int, p: int = 0) -> Design:
    """The 2^(k-p) design of ``k`` tricks: the full design of the first k-p (the first trick changing fastest,
    starting from all off), each of the last p set by its generator with the sign that keeps the baseline."""
    _check_size(k, p)
    base = k - p
    gens = GENERATORS.get((k, p), ())
    signs = [-((-1) ** len(g)) for g in gens]  # at the baseline (all -1) the new factor is -1 too
    rows = []
    for r in range(2**base):
        row = [1 if r >> j & 1 else -1 for j in range(base)]
        row += [s * math.prod(row[LETTERS.index(c)] for c in g) for g, s in zip(gens, signs)]
        rows.append(tuple(row))
    generator_words = [(s, set(g) | {LETTERS[base + i]}) for i, (g, s) in enumerate(zip(gens, signs))]
    words = []
    for n in range(1, p + 1):
        for subset in itertools.combinations(generator_words, n):
            letters: set[str] = set()
            for _, w in subset:
                letters ^= w
            word = "".join(c for c in LETTERS[:k] if c in letters)
            words.append((math.prod(s for s, _ in subset), word))
    words.sort(key=lambda sw: (len(sw[1]), sw[1]))
    return Design(k, p, tuple(rows), tuple(words))


# --------------------------------------------------------------------------- the effects
EFFECTS_CSV_HEADER = ["effect", "letters", "tricks", "aliases", "seeds", "estimate", "ci_low", "ci_high",
                      "distinguishable"]


def effect_rows(design: Design, names: Sequence[str], metric: dict[tuple[int, int], float], seeds: Sequence[int],
                confidence: float = 0.95) -> list[dict[str, Any]]:
    """Main effects, then two-way interactions, of ``design`` from ``metric[(run, seed)]``; paired t over the seeds
    that have every run (see the module's text)."""
    from trickbag.experiments.stats import paired_difference

    complete = [s for s in seeds if all((r, s) in metric for r in range(design.runs))]
    letters = design.letters
    effects = [(c,) for c in letters] + list(itertools.combinations(letters, 2))
    out = []
    for eff in effects:
        col = design.column("".join(eff))
        per_seed = [2.0 / design.runs * math.fsum(x * metric[(r, s)] for r, x in enumerate(col)) for s in complete]
        d = paired_difference(per_seed, [0.0] * len(per_seed), confidence)
        out.append({
            "effect": "main" if len(eff) == 1 else "interaction", "letters": "".join(eff),
            "tricks": " x ".join(names[letters.index(c)] for c in eff), "aliases": design.aliases("".join(eff)),
            "seeds": d.n, "estimate": d.mean, "ci_low": d.low, "ci_high": d.high,
            "distinguishable": d.distinguishable,
        })
    return out


def _estimate_cell(r: dict[str, Any]) -> str:
    if r["seeds"] == 0:
        return "—"
    if math.isnan(r["ci_low"]):
        return f"{r['estimate']:+.4f} [n < 2]"
    return f"{r['estimate']:+.4f} [{r['ci_low']:+.4f}, {r['ci_high']:+.4f}]{' *' if r['distinguishable'] else ''}"


def format_effects(design: Design, names: Sequence[str], rows: Sequence[dict[str, Any]], metric: str,
                   confidence: float = 0.95) -> str:
    """The design in words and the Markdown table of effects, with its legend."""
    from trickbag.experiments.report import markdown_table

    pct = f"{confidence * 100:g} %"
    size = f"2^{design.k}" if not design.p else f"2^({design.k}-{design.p}) ({fraction_text(design.p)} fraction)"
    res = design.resolution
    lines = [
        f"Factorial design {size}: {design.runs} runs per seed"
        + (f", resolution {_ROMAN.get(res, res)}" if res else "") + f"; {design.relation()}.",
        "Letters: " + ", ".join(f"{c} = {n}" for c, n in zip(design.letters, names)) + ".",
    ]
    headers = ["effect", "tricks", "seeds", f"{metric} effect [{pct} CI]"] + (["aliased with"] if design.p else [])
    body = [[r["letters"] if r["effect"] == "main" else r["letters"][0] + "x" + r["letters"][1], r["tricks"],
             str(r["seeds"]), _estimate_cell(r)] + ([", ".join(r["aliases"])] if design.p else []) for r in rows]
    legend = (
        f"\n\nMain effect: the mean {metric} with the trick on minus with it off, over the design's runs (the other "
        "tricks on and off in equal numbers). Interaction AxB: half the difference between A's effect with B on "
        f"and with B off (positive: they help more together than apart). Interval: the {pct} paired Student-t "
        "interval over seeds of the per-seed contrast (every run of the design uses the same seeds); \\* it "
        "excludes 0."
        + (" Aliased with: the effects that enter the same estimate (the estimate of A is A plus its signed "
           "aliases); at resolution V these are interactions of three or more tricks." if design.p else "")
    )
    return "\n".join(lines) + "\n\n" + markdown_table(headers, body) + legend
