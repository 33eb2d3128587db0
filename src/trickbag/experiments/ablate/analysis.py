"""The ablation's answer: per-variant rows (mean ± sd, paired difference vs the reference, time, memory),
the Markdown table, the CSV and the chart."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trickbag._files import atomic_save_figure, atomic_write_text
from trickbag.experiments.ablate.variants import Variant, cell_name
from trickbag.experiments.report import csv_text, fmt, markdown_table
from trickbag.experiments.stats import mean_sd, paired_difference

__all__ = ["ablation_rows", "format_table", "plot_ablation", "write_outputs", "write_effects", "CSV_HEADER"]

CSV_HEADER = ["variant", "tricks_on", "seeds", "metric", "mean", "sd", "delta", "ci_low", "ci_high",
              "distinguishable", "time_s", "time_ratio", "peak_rss_mb"]


def ablation_rows(
    variants: Sequence[Variant],
    seeds: Sequence[int],
    cells: dict[str, dict[str, Any]],
    reference: str,
    confidence: float = 0.95,
) -> list[dict[str, Any]]:
    """Per variant: metric mean ± sd over seeds, paired difference vs ``reference``, time, memory."""
    done = {k: c for k, c in cells.items() if c.get("status") == "done"}

    def by_seed(v: Variant, field: str) -> dict[int, float]:
        return {s: float(done[cell_name(v, s)][field]) for s in seeds if cell_name(v, s) in done}

    ref = next(v for v in variants if v.name == reference)
    ref_metric, ref_time = by_seed(ref, "metric"), by_seed(ref, "wall_time_s")
    ref_time_mean = mean_sd(list(ref_time.values()))[0]
    rows = []
    for v in variants:
        metric, wall, mem = by_seed(v, "metric"), by_seed(v, "wall_time_s"), by_seed(v, "peak_rss_mb")
        mean, sd = mean_sd(list(metric.values()))
        row: dict[str, Any] = {
            "variant": v.name, "tricks_on": ", ".join(v.enabled) or "—", "seeds": len(metric), "mean": mean,
            "sd": sd, "delta": None, "ci_low": None, "ci_high": None, "distinguishable": None,
            "time_s": mean_sd(list(wall.values()))[0], "time_ratio": None,
            "peak_mb": max(mem.values()) if mem else math.nan,
        }
        if v.name != reference:
            common = [s for s in seeds if s in metric and s in ref_metric]
            d = paired_difference([metric[s] for s in common], [ref_metric[s] for s in common], confidence)
            row.update(delta=d.mean, ci_low=d.low, ci_high=d.high, distinguishable=d.distinguishable)
        if ref_time_mean and not math.isnan(ref_time_mean) and not math.isnan(row["time_s"]):
            row["time_ratio"] = row["time_s"] / ref_time_mean
        rows.append(row)
    return rows


def _delta_cell(r: dict[str, Any]) -> str:
    if r["delta"] is None:
        return "(reference)"
    if math.isnan(r["delta"]):
        return "—"
    if r["ci_low"] is None or math.isnan(r["ci_low"]):
        return f"{r['delta']:+.4f} [n < 2]"
    mark = " *" if r["distinguishable"] else ""
    return f"{r['delta']:+.4f} [{r['ci_low']:+.4f}, {r['ci_high']:+.4f}]{mark}"


def format_table(rows: Sequence[dict[str, Any]], metric: str, reference: str, confidence: float = 0.95) -> str:
    """The Markdown ablation table with its legend."""
    pct = f"{confidence * 100:g} %"
    headers = ["variant", "tricks on", "seeds", f"{metric} mean ± sd", f"Δ vs {reference} [{pct} CI]",
               "time (s)", "time ×", "peak MB"]
    body = [[r["variant"], r["tricks_on"], str(r["seeds"]), f"{fmt(r['mean'])} ± {fmt(r['sd'])}", _delta_cell(r),
             fmt(r["time_s"], 1), fmt(r["time_ratio"], 2), fmt(r["peak_mb"], 0)] for r in rows]
    legend = (
        f"\n\n\\* the {pct} confidence interval of the per-seed paired difference excludes 0: "
        "distinguishable from seed noise. Time: training wall time per run (mean over seeds); "
        "peak MB: largest peak resident memory of a run's process."
    )
    return markdown_table(headers, body) + legend


def plot_ablation(
    rows: Sequence[dict[str, Any]],
    cells: dict[str, dict[str, Any]],
    variants: Sequence[Variant],
    seeds: Sequence[int],
    metric: str,
    path: Path,
) -> Path:
    """PNG: metric mean ± sd per variant (with each seed as a dot) beside the mean training time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(rows)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 0.6 * n + 1.8), sharey=True)
    ys = list(range(n))[::-1]
    for y, r, v in zip(ys, rows, variants):
        color = "C3" if r["distinguishable"] else ("C0" if r["delta"] is None else "C7")
        ax1.errorbar([r["mean"]], [y], xerr=[0.0 if math.isnan(r["sd"]) else r["sd"]], fmt="o", color=color,
                     capsize=4, ms=7)
        pts = [cells[cell_name(v, s)]["metric"] for s in seeds
               if cells.get(cell_name(v, s), {}).get("status") == "done"]
        ax1.plot(pts, [y] * len(pts), "x", color="k", alpha=0.5, ms=5)
        ax2.barh([y], [r["time_s"]], color=color, alpha=0.8)
    ax1.set_yticks(ys, [r["variant"] for r in rows])
    ax1.set_xlabel(f"{metric} (mean ± sd; x = one seed)")
    ax1.grid(alpha=0.3, axis="x")
    ax2.set_xlabel("training time per run (s)")
    ax2.grid(alpha=0.3, axis="x")
    ax1.set_title("metric per variant (red: differs from the reference)")
    ax2.set_title("cost")
    return atomic_save_figure(fig, path)


def write_outputs(out_dir: Path, rows: Sequence[dict[str, Any]], table: str, cells: dict[str, dict[str, Any]],
                  variants: Sequence[Variant], seeds: Sequence[int], metric: str) -> list[Path]:
    """Write ``ablation.md``, ``ablation.csv`` and (once a cell is done) ``ablation.png``; the paths written."""
    csv_rows = [
        [r["variant"], r["tricks_on"], r["seeds"], metric, r["mean"], r["sd"], r["delta"], r["ci_low"],
         r["ci_high"], r["distinguishable"], r["time_s"], r["time_ratio"], r["peak_mb"]]
        for r in rows
    ]
    files = [out_dir / "ablation.md", out_dir / "ablation.csv"]
    atomic_write_text(files[0], table + "\n")
    atomic_write_text(files[1], csv_text(CSV_HEADER, csv_rows))
    if any(r["seeds"] for r in rows):
        files.append(plot_ablation(rows, cells, variants, seeds, metric, out_dir / "ablation.png"))
    return files


def write_effects(out_dir: Path, effects: Sequence[dict[str, Any]]) -> Path:
    """Write a factorial ablation's main effects and interactions as ``effects.csv``; its path."""
    from trickbag.experiments.ablate.factorial import EFFECTS_CSV_HEADER

    rows = [[e["effect"], e["letters"], e["tricks"], " ".join(e["aliases"]), e["seeds"], e["estimate"], e["ci_low"],
             e["ci_high"], e["distinguishable"]] for e in effects]
    path = out_dir / "effects.csv"
    atomic_write_text(path, csv_text(EFFECTS_CSV_HEADER, rows))
    return path
