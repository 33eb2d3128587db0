"""The compile gap on one CUDA GPU: ``benchmarks/compile_gap.py --device cuda`` with GPU-sized defaults.

Issue 29's 32.2 vs 26.8 ms per step (Trainer with ``torch.compile`` vs a bare compiled step, H100) is the
row this fills whenever a GPU is lent. Same method as the CPU script (``trickbag train --quiet``'s path with
``tricks.compile.enabled=true`` against a hand-written compiled step on the same DataLoader, interleaved
epochs, medians, CUDA synchronised at both ends of each timed span); the defaults give a step of a few
ms to tens of ms on an H100: a wider MLP, batch 1024. Without CUDA it says so in one line and exits 0.

Run: ``python benchmarks/gpu_compile_gap.py [--rounds 10] [--profile]`` (any ``compile_gap.py`` option)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compile_gap  # noqa: E402

GPU_DEFAULTS = ["--device", "cuda", "--features", "1024", "--hidden", "4096", "4096", "4096", "--batch", "1024",
                "--samples", "40960", "--rounds", "10", "--warmup", "2"]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    return compile_gap.main([*GPU_DEFAULTS, *argv])  # later options win


if __name__ == "__main__":
    sys.exit(main())
