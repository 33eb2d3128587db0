"""Activation checkpointing: memory kept for backward, peak memory of a training step and step time, with vs without.

For each model, ``checkpoint_blocks`` off (``none``), on one block in two (``every_k=2``) and on every block
(``blocks``), side by side in one process:

* **saved for backward**: the bytes autograd holds between forward and backward (every tensor packed by
  ``torch.autograd.graph.saved_tensors_hooks`` during the forward, counted once per storage, the parameters left
  out).  Exact, and the number activation checkpointing is meant to shrink.
* **peak (step)** and **peak activations**: the highest total of live tensors (parameters, gradients,
  activations, temporaries) during forward + backward, and the activation part of it, from torch's
  ``MemTracker`` (``torch.distributed._tools.mem_tracker``: a dispatch mode that follows every tensor's storage;
  it works on the CPU, unlike ``torch.cuda.max_memory_allocated``).  Recomputed activations count here.
* **step time**: one SGD training step (forward, backward, update), the variants alternated in rotated order
  every round; the median per-round ratio against ``none`` (robust to a background load shared by all).

Run: ``.venv/bin/python benchmarks/activation_checkpointing.py`` (``--rounds``, ``--threads``).
"""

from __future__ import annotations

import argparse
import copy
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402
import torch  # noqa: E402
import torchvision  # noqa: E402
from torch import nn  # noqa: E402

from trickbag.models import SmallCNN  # noqa: E402
from trickbag.nn import checkpoint_blocks, find_blocks  # noqa: E402

VARIANTS = {"none": None, "every_k=2": 2, "blocks": 1}


def _models() -> list[tuple[str, Callable[[], nn.Module], tuple[int, ...], int]]:
    """(label, factory, input shape with the batch, training steps per timed call)."""
    return [
        ("digits_cnn (SmallCNN w32), 32 x 1x8x8", lambda: SmallCNN(1, 10), (32, 1, 8, 8), 8),
        ("digits_cnn (SmallCNN w32), 32 x 1x32x32", lambda: SmallCNN(1, 10), (32, 1, 32, 32), 1),
        ("resnet18, 8 x 3x128x128", lambda: torchvision.models.resnet18(num_classes=10), (8, 3, 128, 128), 1),
    ]


def saved_bytes(model: nn.Module, x: torch.Tensor) -> int:
    """Bytes of the distinct storages autograd keeps for backward during one forward, parameters excluded."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        s = t.untyped_storage()
        if s.data_ptr() not in params:
            seen[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(x)
    del out
    return sum(seen.values())


def peak_memory(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[int, int]:
    """(peak total, peak activations) of live tensors over one forward + backward, from torch's MemTracker."""
    from torch.distributed._tools.mem_tracker import MemTracker

    model.zero_grad(set_to_none=True)
    tracker = MemTracker()
    tracker.track_external(model)
    with tracker:
        nn.functional.cross_entropy(model(x), y).backward()
    peak = tracker.get_tracker_snapshot("peak")[torch.device("cpu")]
    act = next(v for k, v in peak.items() if str(k).endswith("ACT"))
    model.zero_grad(set_to_none=True)
    return int(peak["Total"]), int(act)


def _steps(model: nn.Module, x: torch.Tensor, y: torch.Tensor, reps: int) -> Callable[[], None]:
    """``reps`` SGD training steps (forward, backward, update) on one batch."""
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def run() -> None:
        for _ in range(reps):
            opt.zero_grad(set_to_none=True)
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()

    return run


def _mb(n: int) -> str:
    return f"{n / 2**20:.2f} MB"


def measure(label: str, factory: Callable[[], nn.Module], shape: tuple[int, ...], reps: int,
            args: argparse.Namespace) -> list[list[str]]:
    torch.manual_seed(0)
    base = factory().train()
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(shape, generator=g), torch.randint(0, 10, (shape[0],), generator=g)
    models, steps, rows = {}, {}, []
    for name, every in VARIANTS.items():
        m = copy.deepcopy(base)
        wrapped = [] if every is None else checkpoint_blocks(m, every=every)
        models[name] = (m, len(wrapped))
        steps[name] = _steps(m, x, y, reps)
    print(f"  {label}: blocks {', '.join(find_blocks(base))}", file=sys.stderr, flush=True)
    times = C.alternate(steps, args.rounds, args.warmup)
    ref = [r["seconds"] for r in times["none"]]
    for name, (m, n) in models.items():
        secs = [r["seconds"] / reps for r in times[name]]
        total, act = peak_memory(m, x, y)
        ratio = C.ratios(secs, [t / reps for t in ref])
        rows.append([label, name, f"{n}/{len(find_blocks(base))}", _mb(saved_bytes(m, x)), _mb(total), _mb(act),
                     f"{C.median(secs) * 1e3:.1f} ms", f"{C.median(ratio):.2f}x ({C.spread(ratio)})"])
    return rows


def main() -> None:
    parser = C.add_common_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]), rounds=7)
    args = parser.parse_args()
    C.setup(args, "activation checkpointing (trickbag.nn.checkpoint_blocks): memory and step time, with vs without")
    rows = []
    for label, factory, shape, reps in _models():
        rows += measure(label, factory, shape, reps, args)
    print(C.markdown_table(["model, batch", "checkpointing", "blocks", "saved for backward", "peak (step)",
                            "peak activations", "step time (median)", "time vs none (min-max)"], rows))


if __name__ == "__main__":
    main()
