"""One cell of an ablation = one (variant, seed) run on the run path, in its own process.

The parent (:class:`CellRunner`) starts ``python -m trickbag.experiments.ablate.cells`` with the
ablation's recipe file, the variant's overrides and the seed; the child (:func:`main`) calls
:func:`~trickbag.runs.run.run_recipe` into ``OUT/runs/<cell>`` and writes one JSON record: the
metric, the test metrics, training wall time and the process's peak resident memory. A process
per cell gives each run a clean memory peak and lets ``--jobs`` cells train side by side.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trickbag._files import atomic_write_text
from trickbag.experiments.ablate.variants import Variant, cell_name

__all__ = ["CellRunner", "main", "metric_value", "peak_rss_mb"]


# --------------------------------------------------------------------------- the child process
def peak_rss_mb() -> float:
    """Peak resident memory of this process in MiB (``getrusage`` maxrss; psutil where it is missing)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        from trickbag._optional import require

        info = require("psutil", extra="bench").Process().memory_info()
        return float(getattr(info, "peak_wset", info.rss)) / 2**20
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / 2**20 if sys.platform == "darwin" else rss / 1024.0  # bytes on macOS, KiB on Linux


def metric_value(result: Any, metric: str) -> float:
    """``test/*`` from the test of best.pt; any other key: its value at the last epoch that has it."""
    from trickbag.errors import TrickbagError

    if metric.startswith("test/"):
        if metric in result.test:
            return float(result.test[metric])
        available = sorted(result.test)
    else:
        for row in reversed(result.history):
            if metric in row:
                return float(row[metric])
        available = sorted({k for row in result.history for k in row})
    raise TrickbagError(
        f"--metric {metric!r} was not produced by the run; available: {', '.join(available) or '(none)'}"
    )


def _watch_parent() -> None:
    """End this cell when the ablation that started it dies (a killed ablation leaves no workers behind)."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, daemon=True, name="trickbag-parent-watch").start()


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="trickbag-ablate-cell")
    ap.add_argument("--recipe", required=True)
    ap.add_argument("--run-dir", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--result", required=True)
    ap.add_argument("--metric", required=True)
    ap.add_argument("--threads", type=int, default=None)  # default: the recipe's train.threads (auto)
    ap.add_argument("overrides", nargs="*")
    return ap.parse_args(argv)


def main(argv: Sequence[str]) -> int:
    """Train one cell and write its record; exit 0 (done), 2 (refused / metric missing), 130 (interrupted)."""
    args = _parse(argv)
    _watch_parent()
    import torch

    from trickbag.errors import TrickbagError
    from trickbag.recipe import load_recipe
    from trickbag.runs.run import run_recipe

    if args.threads is not None:  # parallel cells share the cores: train.threads=auto follows OMP_NUM_THREADS
        os.environ["OMP_NUM_THREADS"] = str(max(1, args.threads))
        torch.set_num_threads(max(1, args.threads))
    try:
        recipe = load_recipe(args.recipe, [*args.overrides, f"run.dir={args.run_dir}", f"run.name={args.name}"])
        result = run_recipe(recipe, quiet=True)
        if result.interrupted:
            print("trickbag: cell interrupted", file=sys.stderr)
            return 130
        value = metric_value(result, args.metric)
    except TrickbagError as exc:
        print(f"trickbag: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    record = {
        "metric": value,
        "test": {k: float(v) for k, v in result.test.items() if isinstance(v, (int, float))},
        "best": result.best,
        "epochs": len(result.history),
        "wall_time_s": result.wall_time_s,
        "peak_rss_mb": peak_rss_mb(),
        "pid": os.getpid(),
        "finished_at": datetime.datetime.now().isoformat(timespec="seconds"),
    }
    atomic_write_text(Path(args.result), json.dumps(record, indent=1))
    return 0


# --------------------------------------------------------------------------- the parent
def _last_line(path: Path) -> str:
    try:
        lines = [ln.strip() for ln in path.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "(no log)"
    return lines[-1].removeprefix("trickbag: error: ") if lines else "(empty log)"


@dataclasses.dataclass
class CellRunner:
    """Runs the cells of one ablation folder into ``runs/<cell>`` (run directory), ``cells/<cell>.json``
    (the child's record) and ``logs/<cell>.log`` (its output)."""

    out_dir: Path
    recipe_file: Path  #: the ablation's resolved recipe (with its overrides)
    metric: str
    overrides: tuple[str, ...] = ()
    threads: int | None = None  #: intra-op threads per cell (None: the recipe's train.threads)

    def __post_init__(self) -> None:
        for d in (self.runs_dir, self.out_dir / "cells", self.out_dir / "logs"):
            d.mkdir(parents=True, exist_ok=True)

    @property
    def runs_dir(self) -> Path:
        return self.out_dir / "runs"

    def command(self, variant: Variant, seed: int, result_file: Path) -> list[str]:
        return [
            sys.executable, "-m", "trickbag.experiments.ablate.cells",
            "--recipe", str(self.recipe_file), "--run-dir", str(self.runs_dir), "--name", cell_name(variant, seed),
            "--result", str(result_file), "--metric", self.metric,
            *(["--threads", str(self.threads)] if self.threads is not None else []),
            "--", *self.overrides, *variant.overrides, f"train.seed={seed}",
        ]

    def run(self, variant: Variant, seed: int) -> dict[str, Any]:
        """Train the cell (clearing what an unfinished earlier attempt left) and return its record."""
        name = cell_name(variant, seed)
        shutil.rmtree(self.runs_dir / name, ignore_errors=True)  # an unfinished run of an earlier attempt
        result_file = self.out_dir / "cells" / f"{name}.json"
        result_file.unlink(missing_ok=True)
        log = self.out_dir / "logs" / f"{name}.log"
        t0 = time.perf_counter()
        with open(log, "w", encoding="utf-8") as f:
            rc = subprocess.run(self.command(variant, seed, result_file), stdout=f, stderr=subprocess.STDOUT,
                                check=False).returncode
        record: dict[str, Any] = {"variant": variant.name, "seed": seed, "run_dir": str(Path("runs") / name),
                                  "cell_time_s": time.perf_counter() - t0}
        if rc == 0 and result_file.is_file():
            record.update(json.loads(result_file.read_text(encoding="utf-8")), status="done")
        else:
            record.update(status="failed", returncode=rc, log=str(log), message=_last_line(log))
        return record


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
