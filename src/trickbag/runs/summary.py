"""What a finished run reports: :class:`RunResult`, the text of ``summary.txt`` and the model table."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import torch

from trickbag.plugin.state import StopReason

__all__ = ["RunResult", "format_summary", "format_bytes", "model_summary"]


@dataclasses.dataclass(kw_only=True)
class RunResult:
    """Outcome of :func:`trickbag.runs.run.run_recipe` (built from keywords only)."""

    run_dir: Path | None
    history: list[dict[str, float]]
    best: float | None
    test: dict[str, Any]
    wall_time_s: float
    stop_reason: StopReason | None = None
    stop_detail: str = ""
    monitor: str = "val/acc"
    updates: int = 0
    skipped: int = 0
    nonfinite_skipped: int = 0
    checkpoints: dict[str, int] = dataclasses.field(default_factory=dict)  #: file name -> update it holds
    plugins: list[Any] = dataclasses.field(default_factory=list)  #: the run's plug-ins (for their results)
    #: test-only tensors: per-class accuracy, confusion matrix (classification)
    test_details: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: CPU intra-op threads: ``1``, or ``auto -> 1 (2 cores, 1.0 busy with other processes)`` and its changes
    threads: str = ""
    #: file name -> bytes, for the checkpoints in :attr:`checkpoints`
    checkpoint_sizes: dict[str, int] = dataclasses.field(default_factory=dict)
    #: a table's linear baseline on the same split (:mod:`trickbag.runs.baseline`), or None
    baseline: Any = None

    @property
    def final(self) -> dict[str, float]:
        return self.history[-1] if self.history else {}

    @property
    def interrupted(self) -> bool:
        return self.stop_reason is StopReason.INTERRUPTED

    @property
    def stop_message(self) -> str | None:
        if self.stop_reason is None:
            return None
        return f"{self.stop_reason.value}: {self.stop_detail}" if self.stop_detail else self.stop_reason.value


def _monitored(r: RunResult, mode: str) -> list[str]:
    split, _, name = r.monitor.partition("/")
    vals = [(int(h["epoch"]) + 1, h[r.monitor]) for h in r.history if r.monitor in h]
    if not vals:
        return []
    top = (max if mode == "max" else min)(v for _, v in vals)
    best_epoch = [e for e, v in vals if v == top][-1]  # ties go to the later epoch, like best.pt
    return [f"{split} {name:<6} best {top:.4f} (epoch {best_epoch}), final {vals[-1][1]:.4f}"]


def _better(a: float, b: float, mode: str) -> bool:
    return a > b if mode == "max" else a < b


def _averaging_lines(r: RunResult, mode: str) -> list[str]:
    """When averaged weights (EMA, SWA: ``<monitor>_raw`` is logged) evaluate worse than the raw ones at the
    end, say so and which weights best.pt holds (``val/kept_averaged``, logged when a plug-in chooses)."""
    split, _, name = r.monitor.partition("/")
    final, raw_key = r.final, f"{r.monitor}_raw"
    if split != "val" or name.endswith("_raw") or raw_key not in final:
        return []
    averaged = final.get(f"{r.monitor}_ema", final.get(r.monitor))
    raw = final[raw_key]
    kept = [h.get(f"{split}/kept_averaged", 1.0) for h in r.history if r.monitor in h]
    vals = [h[r.monitor] for h in r.history if r.monitor in h]
    best_at = max(i for i, v in enumerate(vals) if v == (max if mode == "max" else min)(vals))  # as best.pt
    holds = "the averaged weights" if kept[best_at] else "the raw weights"
    if averaged is None or not _better(raw, averaged, mode):
        return [f"weights    best.pt holds {holds}"] if not kept[best_at] else []
    fix = "" if f"{r.monitor}_ema" in final else " (with EMA, tricks.ema.select=best keeps whichever is better)"
    return [f"weights    at the end the averaged weights evaluate worse than the raw weights ({r.monitor} "
            f"{averaged:.4f} averaged, {raw:.4f} raw); best.pt holds {holds}{fix}"]


def _test_lines(test: dict[str, Any], names: list[str]) -> list[str]:
    if not test:
        return []
    floats = {k.removeprefix("test/"): v for k, v in test.items() if isinstance(v, float)}
    first = next((n for n in names if n in floats), None)
    lines = []
    if first is not None:
        lines.append(f"test {first:<5} {floats[first]:.4f} on {int(floats.get('n', 0))} samples (best.pt), "
                     f"loss {floats.get('loss', float('nan')):.4f}")
    rest = [f"{n} {floats[n]:.4f}" for n in names if n in floats and n != first]
    if rest:
        lines.append("test       " + ", ".join(rest))
    return lines


def format_bytes(n: int) -> str:
    """A file size for people: ``812 B``, ``45 kB``, ``0.9 MB``, ``134 MB``, ``1.2 GB`` (powers of 1000).

    >>> format_bytes(812), format_bytes(45_100), format_bytes(940_000), format_bytes(134_200_000), format_bytes(1.2e9)
    ('812 B', '45 kB', '0.9 MB', '134 MB', '1.2 GB')
    """
    for unit, scale, start in (("GB", 1e9, 1e9), ("MB", 1e6, 5e5), ("kB", 1e3, 1e3)):
        if n >= start:
            v = n / scale
            return f"{v:.1f} {unit}" if v < 10 else f"{v:.0f} {unit}"
    return f"{int(n)} B"


def format_summary(r: RunResult, *, mode: str, metric_names: list[str], wall_note: str = "") -> str:
    """The text of ``summary.txt``: best / final monitored metric, test metrics, time, why it stopped."""
    lines = [f"run        {r.run_dir}"] + _monitored(r, mode) + _averaging_lines(r, mode)
    if "train/loss" in r.final:
        lines.append(f"train loss final {r.final['train/loss']:.4f}")
    lines += _test_lines(r.test, metric_names)
    if r.test:
        from trickbag.runs.baseline import baseline_line

        lines += [line for line in [baseline_line(r.baseline, r.test)] if line]
    lines.append(f"wall time  {r.wall_time_s:.1f} s for {len(r.history)} epochs, {r.updates} updates{wall_note}")
    if r.threads:
        lines.append(f"threads    {r.threads}")
    if r.stop_message:
        lines.append(f"stopped    {r.stop_message}")
    if r.skipped:
        overflow = r.skipped - r.nonfinite_skipped
        parts = [f"{r.nonfinite_skipped} non-finite loss/gradients"] if r.nonfinite_skipped else []
        parts += [f"{overflow} fp16 overflow (normal, the GradScaler adapts)"] if overflow else []
        lines.append(f"skipped    {r.skipped} updates: {', '.join(parts)}")
    if r.checkpoints:
        sizes = {n: f" {format_bytes(b)}" for n, b in r.checkpoint_sizes.items()}
        held = sorted(r.checkpoints.items())
        lines.append("checkpoints " + ", ".join(f"{n}{sizes.get(n, '')} (update {u})" for n, u in held))
    return "\n".join(lines)


_UNITS = {"NONE": "", "KILOBYTES": "k", "MEGABYTES": "M", "GIGABYTES": "G", "TERABYTES": "T"}


def model_summary(model: torch.nn.Module, input_shape: tuple[int, ...], device: torch.device) -> str:
    """torchinfo's table of ``model`` on one sample (mult-adds in millions, not the enum's name)."""
    from trickbag.train.sharded import is_sharded

    if is_sharded(model) and torch.distributed.get_world_size() > 1:  # a forward on rank 0 alone would wait forever
        n = sum(p.numel() for p in model.parameters())
        return (f"parameters: {n:,}, sharded over {torch.distributed.get_world_size()} processes (no torchinfo table: "
                "it runs the model, which FSDP needs every process for)")
    try:
        import torchinfo

        from trickbag.nn import unwrap

        x = torch.zeros((1, *input_shape), device=device)
        model = unwrap(model)
        was = model.training
        stats = torchinfo.summary(model, input_data=x, verbose=0, device=device)
        model.train(was)
        return re.sub(r"\(Units\.(\w+)\)", lambda m: f"({_UNITS.get(m.group(1), m.group(1))})", str(stats))
    except Exception as exc:  # the summary is informative only (torchinfo missing, a model it cannot trace)
        n = sum(p.numel() for p in model.parameters())
        return f"parameters: {n:,} (torchinfo summary unavailable: {type(exc).__name__})"
