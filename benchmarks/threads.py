"""``train.threads``: 1 thread vs all cores vs ``auto``, on an idle machine and beside a busy process.

Each cell is one ``python -m trickbag train RECIPE train.epochs=E train.threads=T --quiet`` in a fresh
process (``OMP_NUM_THREADS`` removed from its environment, so ``auto`` decides from the machine), with
E such that training takes a few seconds (digits and digits-tricks 3 epochs, mnist1d its 8); the three
thread settings run in rotated order within each round, and each cell reports the median over rounds of

* **train s**: the run's own wall time (``summary.txt``: the training epochs with their validation
  and checkpoints; what the thread count changes), and
* **process s**: the whole command (imports, data, pre-flight, training, test, summary).

Conditions: **idle** (nothing started by the benchmark; other users of a shared machine show in the
load column) and **busy** (a child process running a one-thread 256x256 float32 matmul loop for the
whole condition, i.e. one core taken). ``load`` is the 1-minute load average at the start of the
cell's runs (median); ``auto chose`` is what the runs' summaries say ``auto`` picked (``1>2``: it
changed at an epoch start), over the rounds. ``auto / best``
is the median over rounds of auto's time over the best fixed setting's (the one with the lower median)
in the same round: paired, so a burst of background load slows both. Target: ``auto`` within 1.2x of
the best fixed choice in every cell.

Run: ``.venv/bin/python benchmarks/threads.py [--recipes digits,digits-tricks,mnist1d] [--epochs N]
[--rounds 3] [--conditions idle,busy]``
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

TARGET = 1.2
EPOCHS = {"digits": 3, "digits-tricks": 3, "mnist1d": 8}  # a few seconds of training each
_COMPETITOR = """
import sys, torch
torch.set_num_threads(1)
a = torch.randn(256, 256)
print("ready", flush=True)
while True:
    a = (a @ a).tanh_()
"""


def _start_competitor() -> subprocess.Popen:
    """A child that keeps one core busy with a matmul loop (started and ready before the cell runs)."""
    proc = subprocess.Popen([sys.executable, "-c", _COMPETITOR], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.stdout is not None
    proc.stdout.readline()
    time.sleep(2.0)  # let the load settle a little
    return proc


def _stop(proc: subprocess.Popen | None) -> None:
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait()


def _one_run(recipe: str, epochs: int, threads: str, out: Path, name: str) -> dict[str, Any]:
    """Train once in a fresh process; process and training wall time, what ``auto`` chose, the load."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    argv = [sys.executable, "-m", "trickbag", "train", recipe, f"train.epochs={epochs}", f"train.threads={threads}",
            f"run.dir={out}", f"run.name={name}", "run.plots=false", "log.tensorboard=false", "--quiet"]
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()[-400:]}")
    summary = (out / name / "summary.txt").read_text()
    train_s = float(re.search(r"^wall time\s+([\d.]+) s", summary, re.M).group(1))  # type: ignore[union-attr]
    line = re.search(r"^threads\s+(.*)$", summary, re.M)
    first = re.search(r"auto -> (\d+)", line.group(1)) if line else None
    later = re.findall(r"(\d+) from epoch", line.group(1)) if line else []
    chose = ">".join([first.group(1), *later]) if first else threads  # e.g. 1>2>1: changed at epoch starts
    return {"process": wall, "train": train_s, "load": load, "chose": chose}


def _condition(name: str, recipes: list[str], settings: list[str], args: argparse.Namespace,
               out: Path) -> list[list[Any]]:
    comp = _start_competitor() if name == "busy" else None
    rows = []
    try:
        for recipe in recipes:
            res: dict[str, list[dict[str, Any]]] = {s: [] for s in settings}
            for r in range(args.rounds):
                k = r % len(settings)
                for s in settings[k:] + settings[:k]:
                    epochs = args.epochs or EPOCHS.get(recipe, 3)
                    res[s].append(_one_run(recipe, epochs, s, out, f"{name}-{recipe}-{s}-{r}"))
                print(f"  {name} {recipe} round {r + 1}/{args.rounds}: " + "  ".join(
                    f"{s}={res[s][-1]['train']:.1f}s" for s in settings), file=sys.stderr, flush=True)
            rows.append(_row(name, recipe, settings, res))
    finally:
        _stop(comp)
    return rows


def _row(condition: str, recipe: str, settings: list[str], res: dict[str, list[dict[str, Any]]]) -> list[Any]:
    train = {s: C.median(x["train"] for x in res[s]) for s in settings}
    proc = {s: C.median(x["process"] for x in res[s]) for s in settings}
    fixed = [s for s in settings if s != "auto"]
    best_t = min(fixed, key=lambda s: train[s])
    best_p = min(fixed, key=lambda s: proc[s])
    chose = sorted({x["chose"] for x in res["auto"]})
    load = C.median(x["load"] for s in settings for x in res[s])
    ratio_t = C.median(C.ratios([x["train"] for x in res["auto"]], [x["train"] for x in res[best_t]]))
    ratio_p = C.median(C.ratios([x["process"] for x in res["auto"]], [x["process"] for x in res[best_p]]))
    met = "yes" if ratio_t <= TARGET else "NO"
    return [recipe, condition, f"{load:.1f}", *[f"{train[s]:.2f}" for s in settings], "/".join(chose),
            f"{ratio_t:.2f}", *[f"{proc[s]:.1f}" for s in settings], f"{ratio_p:.2f}", met]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recipes", default="digits,digits-tricks,mnist1d")
    ap.add_argument("--epochs", type=int, default=None, help="for every recipe (default: digits 3, mnist1d 8)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--conditions", default="idle,busy")
    args = ap.parse_args()
    info = C.machine_info()
    print(f"# train.threads: 1 vs all cores vs auto\ncommand: {C.command_line()}")
    for k in ("date", "cpu", "cores", "load average (1/5/15 min)", "torch"):
        print(f"{k}: {info[k]}")
    from trickbag.runtime import usable_cores

    cores = usable_cores()
    settings = ["1", str(cores), "auto"] if cores > 1 else ["1", "auto"]
    rows = []
    with tempfile.TemporaryDirectory(prefix="trickbag-threads-") as tmp:
        for cond in args.conditions.split(","):
            rows += _condition(cond, args.recipes.split(","), settings, args, Path(tmp))
    heads = ["recipe", "machine", "load", *[f"train s, {s}" for s in settings], "auto chose", "auto / best",
             *[f"process s, {s}" for s in settings], "auto / best", f"auto <= {TARGET}x best"]
    print()
    print(C.markdown_table(heads, rows))
    print(f"\nload average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
