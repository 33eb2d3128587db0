"""The ablation table against scipy: mean ± sd over seeds, the paired t-interval over the seeds both
variants have, time ratios, peak memory, and the `*` marks."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from trickbag.experiments.ablate import ablation_rows, ablation_variants, cell_name, format_table, parse_tricks


def test_rows_match_scipy_and_pair_only_common_seeds():
    variants, ref = ablation_variants(parse_tricks("label_smoothing,ema"), "leave-one-out")
    rng = np.random.default_rng(0)
    seeds = [0, 1, 2, 3]
    noise = rng.normal(0.9, 0.03, size=len(seeds))
    effect = {"all": 0.0, "-label_smoothing": -0.02, "-ema": 0.001, "baseline": -0.03}
    cells = {}
    for v in variants:
        for i, s in enumerate(seeds):
            cells[cell_name(v, s)] = {
                "status": "done",
                "metric": float(noise[i] + effect[v.name] + rng.normal(0, 0.002)),
                "wall_time_s": 2.0 + (v.name == "all") + 0.1 * i,
                "peak_rss_mb": 100.0 + i,
            }
    cells[cell_name(variants[2], 3)] = {"status": "failed", "message": "boom"}  # -ema lost seed 3
    rows = {r["variant"]: r for r in ablation_rows(variants, seeds, cells, ref)}
    ref_vals = np.array([cells[cell_name(variants[0], s)]["metric"] for s in seeds])
    ref_time = np.mean([cells[cell_name(variants[0], s)]["wall_time_s"] for s in seeds])
    for v in variants:
        ok = [s for s in seeds if cells[cell_name(v, s)]["status"] == "done"]
        vals = np.array([cells[cell_name(v, s)]["metric"] for s in ok])
        r = rows[v.name]
        assert r["seeds"] == len(ok)
        assert r["mean"] == pytest.approx(vals.mean()) and r["sd"] == pytest.approx(vals.std(ddof=1))
        times = [cells[cell_name(v, s)]["wall_time_s"] for s in ok]
        assert r["time_ratio"] == pytest.approx(np.mean(times) / ref_time)
        assert r["peak_mb"] == max(cells[cell_name(v, s)]["peak_rss_mb"] for s in ok)
        if v.name == "all":
            assert r["delta"] is None
            continue
        test = stats.ttest_rel(vals, ref_vals[[seeds.index(s) for s in ok]])
        ci = test.confidence_interval(0.95)
        assert r["delta"] == pytest.approx(float(np.mean(vals - ref_vals[[seeds.index(s) for s in ok]])))
        assert (r["ci_low"], r["ci_high"]) == pytest.approx((ci.low, ci.high))
        assert r["distinguishable"] == bool(test.pvalue < 0.05)
    assert rows["baseline"]["distinguishable"] and rows["-label_smoothing"]["distinguishable"]
    assert not rows["-ema"]["distinguishable"]
    table = format_table(list(rows.values()), "test/acc", "all")
    marked = {line.split("|")[1].strip() for line in table.splitlines() if line.startswith("|") and " *" in line}
    assert marked == {"-label_smoothing", "baseline"}
