"""``trickbag ablate --mode factorial``: the designs against constructions written out here, the effects of a fake
cell runner with known main effects, one known interaction and seeded noise recovered within their intervals,
the intervals' coverage, and bad input refused in one line with nothing written."""

from __future__ import annotations

import csv
import itertools
import math
import subprocess
import sys

import numpy as np
import pytest

from trickbag.cli import main
from trickbag.experiments import ExperimentError
from trickbag.experiments.ablate import run_ablation
from trickbag.experiments.ablate.factorial import GENERATORS, LETTERS, effect_rows, factorial_design, parse_fraction

TRICKS = ["label_smoothing", "ema", "mixup", "data.augment", "cutout"]  # A, B, C, D, E
TINY = ["data.name=fake", "data.num_samples=60", "model.name=mlp", "data.batch_size=16", "train.epochs=1",
        "log.tensorboard=false", "run.plots=false"]


# --------------------------------------------------------------------------- the designs
def test_the_half_of_five_tricks_is_the_defining_relation_written_by_hand():
    """2^(5-1): I = -ABCDE, the half of the 32 combinations that holds the baseline (all off, product -1)."""
    d = factorial_design(5, 1)
    by_hand = {row for row in itertools.product((-1, 1), repeat=5) if math.prod(row) == -1}
    assert len(d.rows) == 16 and set(d.rows) == by_hand
    assert (-1,) * 5 in d.rows and (1,) * 5 not in d.rows
    assert d.relation() == "I = -ABCDE" and d.resolution == 5
    # each main effect is aliased with the four-trick interaction of the others, each pair with the other three
    assert d.aliases("A") == ["-BCDE"] and d.aliases("E") == ["-ABCD"]
    assert d.aliases("AB") == ["-CDE"] and d.aliases("DE") == ["-ABC"]
    rows = np.array(d.rows)
    for eff in [(i,) for i in range(5)] + list(itertools.combinations(range(5), 2)):
        rest = [i for i in range(5) if i not in eff]
        assert np.array_equal(rows[:, list(eff)].prod(1), -rows[:, rest].prod(1))  # [effect] = -[its complement]
    # resolution V: the 5 main effects and 10 two-way interactions are mutually orthogonal, so all 15 are estimable
    cols = [rows[:, list(e)].prod(1) for e in [(i,) for i in range(5)] + list(itertools.combinations(range(5), 2))]
    gram = np.array([[a @ b for b in cols] for a in cols])
    assert np.array_equal(gram, 16 * np.eye(15))


def test_the_full_design_of_three_tricks_is_every_combination_once():
    d = factorial_design(3)
    assert sorted(d.rows) == sorted(itertools.product((-1, 1), repeat=3)) and d.rows[0] == (-1, -1, -1)
    assert d.words == () and d.resolution is None and d.aliases("AB") == []


@pytest.mark.parametrize("k,p", sorted(GENERATORS))
def test_every_fraction_offered_has_resolution_v_or_more(k, p):
    d = factorial_design(k, p)
    rows = np.array(d.rows)
    assert rows.shape == (2 ** (k - p), k) and len(set(d.rows)) == len(d.rows) and (-1,) * k in d.rows
    # read from the rows alone: no product of 1 to 4 tricks is constant (each is balanced), so nothing below
    # resolution V is aliased with the mean
    for n in range(1, 5):
        for sub in itertools.combinations(range(k), n):
            assert rows[:, list(sub)].prod(1).sum() == 0, sub
    # the defining relation: 2^p - 1 words, each constant over the rows with its sign, all of length >= 5
    assert len(d.words) == 2**p - 1 and d.resolution >= 5
    for sign, word in d.words:
        assert set(rows[:, [LETTERS.index(c) for c in word]].prod(1)) == {sign}


@pytest.mark.parametrize("k,p,message", [
    (4, 1, "--fraction 1/2 cannot reach resolution V with 4 tricks (no fraction of 4 tricks can); run the full "
           "design (--fraction 1, 16 runs per seed)"),
    (5, 2, "--fraction 1/4 cannot reach resolution V with 5 tricks (8 runs per seed); the smallest fraction that "
           "can is 1/2 (16 runs)"),
    (7, 2, "--fraction 1/4 cannot reach resolution V with 7 tricks (32 runs per seed); the smallest fraction that "
           "can is 1/2 (64 runs)"),
    (9, 3, "--fraction 1/8 cannot reach resolution V with 9 tricks (64 runs per seed); the smallest fraction that "
           "can is 1/4 (128 runs)"),
])
def test_a_fraction_below_resolution_v_is_refused(k, p, message):
    with pytest.raises(ExperimentError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        factorial_design(k, p)


def _reaches_resolution_v(k, p):
    """Whether any choice of p generators (products of the k - p base letters) gives every word >= 5 letters."""
    base = k - p
    candidates = [m for m in range(1, 2**base) if bin(m).count("1") >= 4]  # with its own letter: >= 5
    for gens in itertools.combinations(candidates, p):
        ok = True
        for n in range(1, p + 1):
            for sub in itertools.combinations(gens, n):
                word = 0
                for g in sub:
                    word ^= g
                if bin(word).count("1") + n < 5:
                    ok = False
                    break
            if not ok:
                break
        if ok:
            return True
    return False


def test_the_table_offers_every_fraction_that_can_reach_resolution_v():
    """An exhaustive search written here: a (k, p) outside the table has no resolution V design."""
    for k in range(2, len(LETTERS) + 1):
        for p in range(1, k):
            assert ((k, p) in GENERATORS) == _reaches_resolution_v(k, p), (k, p)


def test_fractions_are_powers_of_one_half():
    assert [parse_fraction(f) for f in ("1", "1/2", "1/4", "1/8", "0.25", 0.125, 1)] == [0, 1, 2, 3, 2, 3, 0]
    for bad in ("1/3", "3/4", "0.3", "2", "0", "-1/2", "half", True):
        with pytest.raises(ExperimentError, match="is not a power of 1/2"):
            parse_fraction(bad)


# --------------------------------------------------------------------------- effects from a fake cell runner
MAIN = {"label_smoothing": 0.02, "ema": -0.01, "mixup": 0.0, "data.augment": 0.006, "cutout": 0.0}
INTERACTION = ("label_smoothing", "ema", -0.015)  # label smoothing helps less with EMA on
NOISE = 0.003


class FakeCells:
    """metric = 0.9 + sum_j e_j x_j / 2 + i x_A x_B / 2 + a per-seed offset + noise (seeded by the cell), so the
    main effect of j (mean on - mean off) is e_j and the A x B interaction is i."""

    def __init__(self, names):
        self.names = names
        self.calls = []

    def __call__(self, variant, seed):
        self.calls.append((variant.name, seed))
        x = {n: 1.0 if n in variant.enabled else -1.0 for n in self.names}
        a, b, i = INTERACTION
        rng = np.random.default_rng([seed, *(int(x[n] > 0) for n in self.names)])
        value = (0.9 + sum(MAIN[n] * x[n] / 2 for n in self.names) + i * x[a] * x[b] / 2
                 + 0.01 * math.sin(seed) + rng.normal(0, NOISE))
        return {"status": "done", "metric": value, "wall_time_s": 1.0, "peak_rss_mb": 100.0, "variant": variant.name,
                "seed": seed}


def _truth(effect_row):
    tricks = effect_row["tricks"].split(" x ")
    if len(tricks) == 1:
        return MAIN[tricks[0]]
    return INTERACTION[2] if set(tricks) == set(INTERACTION[:2]) else 0.0


@pytest.mark.parametrize("fraction,runs", [("1", 32), ("1/2", 16)])
def test_known_effects_are_recovered_within_their_intervals(tmp_path, fraction, runs):
    """All 15 intervals contain the true values. At 99.9 %: fifteen 95 % intervals all hold for only about half
    of the noise draws (0.95^15), so the 95 % level is checked by its coverage over many draws (the next test)."""
    fake = FakeCells(TRICKS)
    out = tmp_path / "abl"
    res = run_ablation("digits", TRICKS, mode="factorial", fraction=fraction, seeds=8, out=out, overrides=TINY,
                       cell_runner=fake, jobs=2, confidence=0.999, stream=open(tmp_path / "log", "w"))
    assert len(fake.calls) == runs * 8 and {s for _, s in fake.calls} == set(range(8))  # every run, the same seeds
    assert res.design == factorial_design(5, parse_fraction(fraction))
    assert [v.name for v in res.variants][0] == "baseline"
    assert len(res.effects) == 5 + 10
    # the estimates, computed here from the cells: per seed mean(on) - mean(off), then the mean over seeds
    metric = np.array([[res.cells[f"{v.slug}_s{s}"]["metric"] for s in range(8)] for v in res.variants])
    for e in res.effects:
        tricks = e["tricks"].split(" x ")
        sign = np.prod([[1 if t in v.enabled else -1 for t in tricks] for v in res.variants], axis=1)
        # (for a pair this is half the difference of one's effect with the other on and off)
        per_seed = metric[sign > 0].mean(0) - metric[sign < 0].mean(0)
        assert e["estimate"] == pytest.approx(per_seed.mean(), abs=1e-12)
        assert e["seeds"] == 8
        assert e["ci_low"] <= _truth(e) <= e["ci_high"], e
        if abs(_truth(e)) >= 0.01:
            assert e["distinguishable"], e
    md = (out / "ablation.md").read_text()
    assert "A = label_smoothing, B = ema, C = mixup, D = data.augment, E = cutout" in md
    assert "| AxB    | label_smoothing x ema" in md
    if fraction == "1/2":
        assert "resolution V; I = -ABCDE." in md and "-CDE" in md.split("| AxB")[1].splitlines()[0]
    else:
        assert "2^5: 32 runs per seed; full design (no aliases)" in md
    with open(out / "effects.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["letters"] for r in rows][:6] == ["A", "B", "C", "D", "E", "AB"]
    # resumed: nothing runs again
    again = run_ablation("digits", TRICKS, mode="factorial", fraction=fraction, seeds=8, out=out, overrides=TINY,
                         cell_runner=FakeCells(TRICKS), confidence=0.999, stream=open(tmp_path / "log2", "w"))
    assert again.ran == [] and [e["estimate"] for e in again.effects] == [e["estimate"] for e in res.effects]


def test_the_intervals_cover_the_true_effects_95_percent_of_the_time():
    """2^3 design, 5 seeds, 600 draws of the noise (a shared offset per seed and noise per cell): the pooled
    coverage of the 6 intervals is 95 % (3600 intervals: 95 ± 1.1 % at three standard errors)."""
    d = factorial_design(3)
    rng = np.random.default_rng(0)
    truth = np.array([0.02, -0.01, 0.0, -0.015, 0.0, 0.0])  # A, B, C, AB, AC, BC
    cols = np.array([d.column(e) for e in ["A", "B", "C", "AB", "AC", "BC"]], dtype=float)
    mean = 0.9 + truth @ cols / 2  # per run
    hits = total = 0
    for _ in range(600):
        y = mean[:, None] + rng.normal(0, 0.01, size=(1, 5)) + rng.normal(0, NOISE, size=(d.runs, 5))
        rows = effect_rows(d, ["a", "b", "c"], {(r, s): y[r, s] for r in range(d.runs) for s in range(5)}, range(5))
        hits += sum(r["ci_low"] <= t <= r["ci_high"] for r, t in zip(rows, truth))
        total += len(rows)
    assert 0.935 <= hits / total <= 0.965


# --------------------------------------------------------------------------- the command
@pytest.mark.parametrize("args,line", [
    (["--tricks", "ema"], "--mode factorial needs at least 2 tricks"),
    (["--tricks", "ema,nope"], "--tricks: unknown trick 'nope'"),
    (["--tricks", "ema,mixup", "--fraction", "1/3"], "--fraction 1/3 is not a power of 1/2"),
    (["--tricks", ",".join(TRICKS), "--fraction", "1/4"], "--fraction 1/4 cannot reach resolution V with 5 tricks"),
    (["--tricks", "ema,mixup,cutout,sam", "--fraction", "1/2"], "--fraction 1/2 cannot reach resolution V with 4"),
])
def test_bad_factorial_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, args, line):
    out = tmp_path / "abl"
    assert main(["ablate", *TINY, "--mode", "factorial", *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"trickbag: error: {line}"), err
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_a_fraction_outside_factorial_mode_is_refused(tmp_path, capsys):
    assert main(["ablate", *TINY, "--tricks", "ema", "--fraction", "1/2", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["trickbag: error: --fraction applies to --mode factorial only (this is --mode leave-one-out)"]
    assert list(tmp_path.iterdir()) == []


def test_two_tricks_on_a_real_recipe_print_main_effects_and_the_interaction(tmp_path):
    """The command end to end on real runs (one seed, so the intervals say n < 2; the fake runner above checks them)."""
    out = tmp_path / "abl"
    run = subprocess.run([sys.executable, "-m", "trickbag", "ablate", *TINY, "--tricks", "label_smoothing,ema",
                          "--mode", "factorial", "--seeds", "1", "--jobs", "2", "--out", str(out)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert "(factorial, 4-run design): 4 variants x 1 seeds = 4 cells" in run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "Factorial design 2^2: 4 runs per seed; full design (no aliases)."
    assert lines[1] == "Letters: A = label_smoothing, B = ema."
    table = {ln.split("|")[1].strip(): ln.split("|")[2:-1] for ln in lines[3:8] if ln.startswith("| ")}
    assert list(table) == ["effect", "A", "B", "AxB"]
    assert [c.strip() for c in table["AxB"][:2]] == ["label_smoothing x ema", "1"]
    assert table["A"][2].strip().endswith("[n < 2]")
    cells = {p.name for p in (out / "runs").iterdir()}
    assert cells == {"baseline_s0", "with-label_smoothing_s0", "with-ema_s0", "all_s0"}
    assert (out / "effects.csv").is_file() and (out / "ablation.png").is_file()
