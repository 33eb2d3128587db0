"""docs/evidence.md is the rendering of the committed results, and the verdicts follow from the numbers.

The sweep itself (hours of CPU) is not run here: ``benchmarks/evidence.py`` is; these tests check the
document against the committed ``benchmarks/evidence/results.json`` and the analysis against results made
up here with known effects."""

from __future__ import annotations

import importlib.util
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "evidence.py"


@pytest.fixture(scope="module")
def ev():
    sys.path.insert(0, str(SCRIPT.parent))
    spec = importlib.util.spec_from_file_location("evidence_under_test", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_document_is_the_rendering_of_the_committed_results():
    proc = subprocess.run([sys.executable, str(SCRIPT), "render", "--check"], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _fake(effects: dict[str, float], noise: float = 0.01, seeds=range(20), base=0.8, rng_seed=0):
    """Results with a baseline per seed and each trick = baseline + effect + noise (a made-up sweep)."""
    rng = random.Random(rng_seed)
    b = {str(s): {"metric": base + rng.gauss(0, 0.03), "time_s": 10.0} for s in seeds}
    rows = {"acc:baseline": {"trick": "baseline", "kind": "acc", "overrides": [], "seeds": b}}
    for t, e in effects.items():
        rows[f"acc:{t}"] = {"trick": t, "kind": "acc", "overrides": [f"tricks.{t}.enabled=true"], "seeds": {
            s: {"metric": v["metric"] + e + rng.gauss(0, noise), "time_s": 12.0} for s, v in b.items()}}
    return {"recipes": {"digits-noisy": {"about": "x", "rows": rows, "not_run": {"augment": "refused: images"}}},
            "sessions": []}


def test_known_effects_get_their_verdicts(ev):
    res = _fake({"mix": 0.03, "ema": -0.03, "sam": 0.0, "swa": 0.0, "clip": 0.0, "l1": 0.0, "tta": 0.001},
                seeds=range(ev.CONFIRM.stop))
    rows = {r["trick"]: r for r in ev.analyse(res)}
    assert ev.verdict(rows["mix"]) == "helps, confirmed"
    assert ev.verdict(rows["ema"]) == "hurts, confirmed"
    for t in ("sam", "swa", "clip", "l1"):
        assert ev.verdict(rows[t]) == "no evidence", t
    m = rows["mix"]["main"]
    assert m["n"] == len(ev.MAIN) and m["low"] < 0.03 < m["high"]  # the interval covers the effect put in
    assert rows["mix"]["main"]["time"] == pytest.approx(1.2)


def test_holm_is_over_the_whole_table(ev):
    # one small effect that passes alone at 0.05 but not once 8 rows share the family
    effects = {"mix": 0.012}
    alone = {r["trick"]: r for r in ev.analyse(_fake(effects, noise=0.012, rng_seed=5))}["mix"]["main"]
    crowd = {r["trick"]: r for r in ev.analyse(_fake({**effects, **{t: 0.0 for t in (
        "ema", "sam", "swa", "clip", "l1", "tta", "focal")}}, noise=0.012, rng_seed=5))}["mix"]["main"]
    assert alone["p"] == pytest.approx(crowd["p"])  # the same numbers for mix ...
    assert alone["p_holm"] == pytest.approx(alone["p"])  # a family of one: no correction
    assert crowd["p_holm"] == pytest.approx(min(1.0, 8 * crowd["p"]))  # smallest of 8: times 8 (Holm's first step)


def test_a_call_that_fresh_seeds_do_not_repeat_is_not_confirmed(ev):
    res = _fake({"mix": 0.03}, seeds=ev.MAIN)
    rows = res["recipes"]["digits-noisy"]["rows"]
    rng = random.Random(9)
    for s in ev.CONFIRM:  # the fresh seeds: no effect at all
        v = 0.8 + rng.gauss(0, 0.03)
        rows["acc:baseline"]["seeds"][str(s)] = {"metric": v, "time_s": 10.0}
        rows["acc:mix"]["seeds"][str(s)] = {"metric": v + rng.gauss(0, 0.01), "time_s": 10.0}
    (row,) = ev.analyse(res)
    assert ev.verdict(row) == f"helps on seeds {ev._span(ev.MAIN)}, not confirmed on {ev._span(ev.CONFIRM)}"


def test_unconfirmed_and_unrun_rows_say_so(ev):
    (row,) = ev.analyse(_fake({"mix": 0.03}, seeds=ev.MAIN))
    assert ev.verdict(row) == "helps (not yet confirmed)"
    text = ev.render(_fake({"mix": 0.03}, seeds=ev.MAIN))
    assert "| augment" in text and "n/a: refused: images" in text


def test_the_rendering_depends_on_the_results_only(ev):
    res = _fake({"mix": 0.03})
    assert ev.render(res) == ev.render(res)


def _candidate_results(ev, fresh_effect: float):
    """mix: a +0.4-point signal on the 20 main seeds that passes alone but not after Holm over 4 rows; the fresh
    seeds carry ``fresh_effect``."""
    d = [0.01, 0.02, -0.005, 0.015, 0.0, 0.005, 0.02, -0.005, 0.01, 0.0,
         0.005, -0.01, 0.01, 0.0, 0.015, -0.005, 0.005, 0.01, -0.01, 0.005]  # paired t: p = 0.031
    assert len(d) == len(ev.MAIN) and ev.MAIN.start == 0
    res = _fake({"ema": 0.0, "sam": 0.0, "swa": 0.0}, seeds=range(ev.CONFIRM.stop))
    rows = res["recipes"]["digits-noisy"]["rows"]
    base = rows["acc:baseline"]["seeds"]
    rng = random.Random(4)
    rows["acc:mix"] = {"trick": "mix", "kind": "acc", "overrides": [], "seeds": {
        str(s): {"metric": base[str(s)]["metric"] + (d[s] if s in ev.MAIN else fresh_effect + rng.gauss(0, 0.002)),
                 "time_s": 10.0} for s in range(ev.CONFIRM.stop)}}
    return res


def test_a_candidate_that_fresh_seeds_confirm_is_reported_as_such(ev):
    rows = {r["trick"]: r for r in ev.analyse(_candidate_results(ev, 0.01))}
    m = rows["mix"]["main"]
    assert m["p"] < 0.05 <= m["p_holm"]  # a candidate, not a call of the table
    assert ev.verdict(rows["mix"]) == "helps on fresh seeds 20-29 (a candidate on 0-19)"


def test_a_candidate_that_fresh_seeds_do_not_confirm_is_no_evidence(ev):
    rows = {r["trick"]: r for r in ev.analyse(_candidate_results(ev, 0.0))}
    assert ev.verdict(rows["mix"]) == "no evidence (a candidate on 0-19, not confirmed on 20-29)"
    assert ev.verdict(rows["ema"]) == "no evidence"


def test_a_row_is_paired_with_the_baseline_trained_beside_it(ev):
    """A row measured on another machine names its own baseline (``run --baseline-tag``): its effect is against
    that baseline's seeds, not against the recorded one's, and the other rows keep theirs."""
    res = _fake({"mix": 0.0}, seeds=range(ev.CONFIRM.stop))
    rows = res["recipes"]["digits-noisy"]["rows"]
    rng = random.Random(3)
    other = {str(s): {"metric": 0.6 + rng.gauss(0, 0.03), "time_s": 5.0} for s in range(ev.CONFIRM.stop)}
    rows["acc:baseline@m2"] = {"trick": "baseline@m2", "kind": "acc", "overrides": [], "seeds": other}
    rows["acc:resample"] = {"trick": "resample", "kind": "acc", "overrides": [], "paired_with": "baseline@m2",
                            "seeds": {s: {"metric": v["metric"] + 0.02, "time_s": 6.0} for s, v in other.items()}}
    out = {r["trick"]: r for r in ev.analyse(res)}
    assert set(out) == {"mix", "resample"}  # a baseline is never a row of the table
    assert out["resample"]["main"]["delta"] == pytest.approx(0.02)  # +0.02 on every seed of its own baseline
    assert out["resample"]["main"]["time"] == pytest.approx(1.2)
    assert abs(out["mix"]["main"]["delta"]) < 0.01  # mix still against the recorded baseline
    text = ev.render(res)
    assert "| resample (vs baseline@m2)" in text and "*baseline@m2*: the recipe's baseline trained again" in text


def _fresh_seeds(rows: dict, seeds, effect: float, rng_seed: int) -> None:
    rng = random.Random(rng_seed)
    for s in seeds:
        v = 0.8 + rng.gauss(0, 0.03)
        rows["acc:baseline"]["seeds"][str(s)] = {"metric": v, "time_s": 10.0}
        rows["acc:mix"]["seeds"][str(s)] = {"metric": v + effect + rng.gauss(0, 0.01), "time_s": 10.0}


def test_a_second_confirmation_only_for_calls_the_first_did_not_confirm(ev):
    res = _fake({"mix": 0.03}, seeds=ev.MAIN)
    rows = res["recipes"]["digits-noisy"]["rows"]
    _fresh_seeds(rows, ev.CONFIRM, 0.0, 9)  # the first confirmation sees nothing
    (row,) = ev.analyse(res)
    assert ev._replicable(row)
    _fresh_seeds(rows, ev.REPLICATE, 0.03, 11)  # the second sees the effect
    (row,) = ev.analyse(res)
    assert ev.verdict(row) == (f"helps, confirmed on fresh seeds {ev._span(ev.REPLICATE)} "
                               f"(not on {ev._span(ev.CONFIRM)})")
    assert re.search(rf"\|\s*Δ seeds {ev._span(ev.REPLICATE)}\s*\|", ev.render(res))
    _fresh_seeds(rows, ev.REPLICATE, 0.0, 12)  # ... or does not
    (row,) = ev.analyse(res)
    assert ev.verdict(row) == (f"helps on seeds {ev._span(ev.MAIN)}, confirmed on neither {ev._span(ev.CONFIRM)} "
                               f"nor {ev._span(ev.REPLICATE)}")


def test_a_confirmed_call_or_a_candidate_gets_no_second_confirmation(ev):
    res = _fake({"mix": 0.03}, seeds=range(ev.CONFIRM.stop))
    (row,) = ev.analyse(res)
    assert ev.verdict(row) == "helps, confirmed" and not ev._replicable(row)
    res = _fake({"mix": 0.012, **{t: 0.0 for t in ("ema", "sam", "swa", "clip", "l1", "tta", "focal")}},
                noise=0.012, seeds=range(ev.CONFIRM.stop), rng_seed=5)
    rows = {r["trick"]: r for r in ev.analyse(res)}
    assert not any(ev._replicable(r) for r in rows.values() if not ev._called(r))
