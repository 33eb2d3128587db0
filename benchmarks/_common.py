"""Shared helpers of the trickbag benchmarks: machine report, thread pinning, peak RSS, paired timing, tables.

Every benchmark script:

* fixes torch's thread count (``--threads``, default 1) and prints it with the machine it ran on
  (CPU model, cores, load average, torch / Python versions), so a number always comes with its context;
* discards warm-up runs;
* compares the variants *in one process, alternating* (the order rotates every round), and reports
  the median over rounds of the per-round ratio against the reference, which stays meaningful on a
  machine shared with other jobs: a background load slows both members of a round alike.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import os
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

# `python benchmarks/x.py` from a checkout without an installed trickbag still finds the package
_SRC = Path(__file__).resolve().parents[1] / "src"
if _SRC.is_dir() and str(_SRC) not in sys.path:
    sys.path.insert(0, str(_SRC))

import torch  # noqa: E402

__all__ = [
    "add_common_args",
    "setup",
    "machine_info",
    "PeakRSS",
    "alternate",
    "median",
    "ratios",
    "spread",
    "markdown_table",
    "command_line",
]


# --------------------------------------------------------------------------- machine / setup
def _cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine()
    m = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    return m.group(1).strip() if m else (platform.processor() or platform.machine())


def machine_info() -> dict[str, str]:
    """What the numbers were measured on (and how busy the machine was when the script started)."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        usable = os.cpu_count() or 0
    try:
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        load = "n/a"
    try:
        import numpy

        np_version = numpy.__version__
    except ImportError:  # pragma: no cover - numpy is a dependency
        np_version = "n/a"
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": _cpu_model(),
        "cores": f"{os.cpu_count()} logical, {usable} usable by this process",
        "load average (1/5/15 min)": load,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np_version,
        "torch threads": f"{torch.get_num_threads()} intra-op, {torch.get_num_interop_threads()} inter-op",
    }


def add_common_args(parser: argparse.ArgumentParser, *, rounds: int, warmup: int = 1) -> argparse.ArgumentParser:
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads (fixed for the whole run; default 1)")
    parser.add_argument("--rounds", type=int, default=rounds,
                        help=f"measured rounds, each running every variant once in rotated order (default {rounds})")
    parser.add_argument("--warmup", type=int, default=warmup,
                        help=f"warm-up rounds run first and discarded (default {warmup})")
    return parser


def setup(args: argparse.Namespace, title: str) -> dict[str, str]:
    """Pin the thread count, print the title, the command and the machine; return the machine info."""
    if args.threads < 1:
        raise SystemExit(f"--threads must be >= 1, got {args.threads}")
    torch.set_num_threads(args.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # already set (another benchmark imported first in this process)
        pass
    info = machine_info()
    print(f"# {title}")
    print(f"command: {command_line()}")
    for k, v in info.items():
        print(f"{k}: {v}")
    print(flush=True)
    return info


def command_line() -> str:
    script = Path(sys.argv[0])
    try:
        script = script.resolve().relative_to(Path.cwd())
    except ValueError:
        pass
    return " ".join([".venv/bin/python", str(script), *sys.argv[1:]])


# --------------------------------------------------------------------------- memory
_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


class PeakRSS:
    """Peak resident set size of *one run* inside a long process.

    Linux keeps the process high-water mark in ``VmHWM``; writing ``5`` to ``/proc/self/clear_refs``
    resets it to the current RSS (Linux >= 4.0), so each run's peak is measured on its own.  Where
    that is unavailable, ``getrusage``'s ``ru_maxrss`` (never reset: the peak of the process so far)
    is reported and :attr:`resettable` is False.
    """

    def __init__(self) -> None:
        self.resettable = self._try_reset()

    @staticmethod
    def _try_reset() -> bool:
        try:
            _CLEAR_REFS.write_text("5")
            return _STATUS.exists()
        except OSError:
            return False

    def reset(self) -> None:
        gc.collect()
        if self.resettable:
            _CLEAR_REFS.write_text("5")

    def peak_mb(self) -> float:
        if self.resettable:
            m = re.search(r"VmHWM:\s+(\d+)\s+kB", _STATUS.read_text())
            if m:
                return int(m.group(1)) / 1024.0
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# --------------------------------------------------------------------------- timing
def alternate(
    variants: dict[str, Callable[[], Any]],
    rounds: int,
    warmup: int,
    *,
    progress: bool = True,
) -> dict[str, list[Any]]:
    """Run every variant once per round, rotating the order each round; return each variant's results.

    Round ``r`` starts at variant ``r mod k``, so no variant is always first (cold caches) or last.
    ``warmup`` rounds run first and are discarded.  A variant returns a dict; when it has no
    ``"seconds"`` key, the wall time of the whole call is stored there.
    """
    names = list(variants)
    results: dict[str, list[Any]] = {n: [] for n in names}
    for r in range(-warmup, rounds):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            gc.collect()
            t0 = time.perf_counter()
            value = variants[name]()
            dt = time.perf_counter() - t0
            if not isinstance(value, dict):
                value = {"value": value}
            value.setdefault("seconds", dt)
            if r >= 0:
                results[name].append(value)
        if progress:
            label = "warm-up" if r < 0 else f"round {r + 1}/{rounds}"
            done = "  ".join(f"{n}={results[n][-1]['seconds']:.3f}s" for n in names if r >= 0)
            print(f"  {label} {done}", file=sys.stderr, flush=True)
    return results


def median(xs: Iterable[float]) -> float:
    xs = list(xs)
    return statistics.median(xs) if xs else float("nan")


def ratios(num: Sequence[float], den: Sequence[float]) -> list[float]:
    """Per-round ratios ``num[i] / den[i]`` (the paired comparison)."""
    return [a / b for a, b in zip(num, den)]


def spread(xs: Sequence[float]) -> str:
    """``min-max`` of a list, for the tables (how much the rounds disagreed)."""
    if not xs:
        return "n/a"
    return f"{min(xs):.3f}-{max(xs):.3f}"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-markdown table with columns padded to equal width (readable in a terminal too)."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(r: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"

    out = [line(cells[0]), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in cells[1:]]
    return "\n".join(out)
