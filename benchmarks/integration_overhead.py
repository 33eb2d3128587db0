"""Per-step overhead of trickbag's adapters, side by side in one process: Lightning with EMA through
``trickbag.integrations.lightning.TricksCallback`` against Lightning's own ``EMAWeightAveraging`` and against a run
without either (loggers, progress bars, checkpoints and the model summary off in all of them).

Each round runs every variant once (``fit`` of ``--steps`` updates on the same DataLoader, MLP on random vectors),
rotating the order; a timing callback measures from the first batch's start to the last batch's end (set-up and
teardown outside). The table gives the median ms/step and the median per-round ratio to Lightning's own EMA and to
the run without EMA. The Hugging Face rows come with the Hugging Face adapter.

Findings (2026-11-28, 2-core AMD EPYC VM shared with other jobs, load average 2.3, 1 thread, torch 2.14.1 CPU,
lightning 2.6.6; MLP 256-512-512-10, batch 64, 40 steps per fit, 5 rounds):

| variant       | ms/step (median) | spread      | / lightning_ema | / none |
|---------------|------------------|-------------|-----------------|--------|
| none          | 4.125            | 3.725-4.993 | 0.720           | 1.000  |
| lightning_ema | 6.346            | 5.274-7.581 | 1.000           | 1.389  |
| trickbag_ema  | 4.331            | 4.035-4.646 | 0.651           | 1.050  |

trickbag's EMA through the callback is cheaper per step than Lightning's EMAWeightAveraging here, and 5 % over no
EMA at all (the issue's goal is <= 2 % over the framework's own EMA, which it meets; the gap to no EMA is the EMA
update itself on a model this small).

Re-run after the callback started keeping the loader's position (2026-11-28 11:56 UTC, same machine, load average
2.6/3.2/4.5, ``--rounds 9``, twice): trickbag_ema / lightning_ema 0.768 and 0.743 (medians of per-round ratios),
trickbag_ema / none 1.005 and 1.070; per-round times moved by up to 2x with the machine's load, so the gap to no EMA
is within the noise and the one to Lightning's own EMA is not.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import add_common_args, alternate, markdown_table, median, ratios, setup, spread  # noqa: E402


def _module(features: int, hidden: int) -> Any:
    import lightning.pytorch as pl

    class Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            nn = torch.nn
            self.net = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                     nn.Linear(hidden, 10))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.net(x)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            return torch.nn.functional.cross_entropy(self(batch[0]), batch[1])

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.01, momentum=0.9)

    return Module()


def _timer() -> Any:
    import lightning.pytorch as pl

    class Timer(pl.Callback):
        def __init__(self) -> None:
            self.start = self.end = 0.0
            self.steps = 0

        def on_train_batch_start(self, *args: Any) -> None:
            if self.steps == 0:
                self.start = time.perf_counter()

        def on_train_batch_end(self, *args: Any) -> None:
            self.steps += 1
            self.end = time.perf_counter()

    return Timer()


def _variant(kind: str, args: argparse.Namespace, loader: Any) -> Any:
    def run() -> dict[str, float]:
        import lightning.pytorch as pl
        from lightning.pytorch.callbacks import EMAWeightAveraging

        from trickbag.integrations.lightning import TricksCallback

        timer = _timer()
        extra = {"none": [], "lightning_ema": [EMAWeightAveraging(decay=0.999)],
                 "trickbag_ema": [TricksCallback(tricks={"ema": {"decay": 0.999}}, num_classes=10)]}[kind]
        trainer = pl.Trainer(max_steps=args.steps, accelerator="cpu", devices=1, logger=False,
                             enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                             num_sanity_val_steps=0, callbacks=[*extra, timer])
        trainer.fit(_module(args.features, args.hidden), loader)
        return {"seconds": (timer.end - timer.start) / max(timer.steps - 1, 1) * 1e3}  # ms/step after the first
    return run


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser, rounds=7, warmup=1)
    parser.add_argument("--steps", type=int, default=60, help="optimizer updates per fit (default 60)")
    parser.add_argument("--features", type=int, default=256)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args(argv)
    setup(args, "Lightning: EMA through trickbag's TricksCallback vs Lightning's own EMAWeightAveraging")
    warnings.filterwarnings("ignore")
    import logging

    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    from torch.utils.data import DataLoader, TensorDataset

    n = args.steps * args.batch_size
    ds = TensorDataset(torch.randn(n, args.features), torch.randint(0, 10, (n,)))
    loader = DataLoader(ds, batch_size=args.batch_size)
    names = ["none", "lightning_ema", "trickbag_ema"]
    res = alternate({k: _variant(k, args, loader) for k in names}, args.rounds, args.warmup)
    ms = {k: [r["seconds"] for r in res[k]] for k in names}
    rows = [[k, f"{median(ms[k]):.3f}", spread(ms[k]),
             f"{median(ratios(ms[k], ms['lightning_ema'])):.3f}", f"{median(ratios(ms[k], ms['none'])):.3f}"]
            for k in names]
    print(markdown_table(["variant", "ms/step (median)", "spread", "/ lightning_ema", "/ none"], rows))


if __name__ == "__main__":
    main()
