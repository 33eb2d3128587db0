"""Wall time of the light commands (no torch import) next to ``import torch`` and a command that needs torch.

Each command runs as ``python -m trickbag ARGS`` in a fresh process (output discarded), ``--rounds``
times in rotated order; the table gives the median and the range. ``python -c "import torch"`` is the
floor a command that imports torch cannot beat; ``trickbag env`` is such a command.
``tests/cli/test_light_commands.py`` checks that the light ones import no torch.

Run: ``.venv/bin/python benchmarks/light_commands.py [--rounds 5]``
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

COMMANDS = [
    ("trickbag --version", ["--version"]),
    ("trickbag --help", ["--help"]),
    ("trickbag recipes", ["recipes"]),
    ("trickbag recipes --show digits", ["recipes", "--show", "digits"]),
    ("trickbag recipes --keys", ["recipes", "--keys"]),
    ("trickbag tricks", ["tricks"]),
    ("trickbag lint train.py", ["lint", "SCRIPT"]),
    ("trickbag train digits train.epochs=abc (refused)", ["train", "digits", "train.epochs=abc"]),
    ("trickbag env (imports torch)", ["env"]),
]
_SCRIPT = """import torch
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in [(torch.randn(8, 4), torch.randint(0, 2, (8,)))] * 3:
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
"""


def _time(argv: list[str], cwd: str) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    info = C.machine_info()
    print(f"# light commands: wall time of a fresh process\ncommand: {C.command_line()}")
    for k in ("date", "cpu", "cores", "load average (1/5/15 min)", "python", "torch"):
        print(f"{k}: {info[k]}")
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "train.py"
        script.write_text(_SCRIPT)
        runs = [(label, [sys.executable, "-m", "trickbag", *[str(script) if a == "SCRIPT" else a for a in argv]])
                for label, argv in COMMANDS]
        runs.append(('python -c "import torch" (floor of a torch command)', [sys.executable, "-c", "import torch"]))
        times: dict[str, list[float]] = {label: [] for label, _ in runs}
        loads = []
        for r in range(args.rounds):
            k = r % len(runs)
            loads.append(os.getloadavg()[0])
            for label, argv in runs[k:] + runs[:k]:
                times[label].append(_time(argv, tmp))
    rows = [[label, f"{C.median(ts):.2f}", C.spread(ts)] for label, ts in times.items()]
    print(f"load average (1 min) at the rounds' starts: {', '.join(f'{x:.1f}' for x in loads)}\n")
    print(C.markdown_table(["command", "median s", "range s"], rows))


if __name__ == "__main__":
    main()
