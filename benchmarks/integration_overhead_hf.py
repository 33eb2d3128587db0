"""Per-step overhead of trickbag's HF adapter: the HF ``Trainer`` alone against ``TricksTrainer`` + ``TricksCallback``,
side by side, loggers and progress bars off in all.

Variants, on a tiny BERT classifier (hidden 64, 2 layers, sequences of 32, batch 16; built from a config, nothing
downloaded), each ``train()`` for ``--steps`` updates from the same weights on the same batches:

* ``hf plain``: ``transformers.Trainer`` (HF has no EMA callback of its own to compare with);
* ``adapter, no tricks``: ``TricksTrainer`` with ``TricksCallback({})`` (the hooks alone);
* ``adapter, ema``: ``TricksTrainer`` with ``TricksCallback({"ema": {"decay": 0.999}})``.

The time per step is taken between consecutive ``on_step_end`` calls (the first ``--warmup`` steps dropped), the
variants alternate inside one process (order rotated every round); the table gives the median time per step and
the median over rounds of the per-round ratio to ``hf plain``. Target (issue 30): adapter with EMA <= 1.02 of the
framework's run without it, where the EMA update itself is the work that remains.

Run: ``.venv/bin/python benchmarks/integration_overhead_hf.py [--steps 30] [--rounds 5] [--threads 1]``
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any


def _model() -> Any:
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    cfg = BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
                     vocab_size=200, max_position_embeddings=64)
    cfg.num_labels = 3
    return BertForSequenceClassification(cfg)


def _data(n: int) -> list[dict[str, Any]]:
    import torch

    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1, 200, (n, 32), generator=g)
    y = torch.randint(0, 3, (n,), generator=g)
    return [{"input_ids": ids[i], "attention_mask": torch.ones(32, dtype=torch.long), "labels": y[i]}
            for i in range(n)]


def _run(variant: str, steps: int, warmup: int, state: dict[str, Any]) -> float:
    from transformers import Trainer, TrainerCallback, TrainingArguments

    from trickbag.integrations.hf import TricksCallback, TricksTrainer

    times: list[float] = []

    class Clock(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            times.append(time.perf_counter())

    model = _model()
    model.load_state_dict(state)
    args = TrainingArguments(tempfile.mkdtemp(), per_device_train_batch_size=16, max_steps=steps, report_to=[],
                             disable_tqdm=True, use_cpu=True, save_strategy="no", logging_strategy="no",
                             lr_scheduler_type="constant", train_sampling_strategy="sequential")
    data = _data(16 * steps)
    if variant == "hf plain":
        trainer: Any = Trainer(model=model, args=args, train_dataset=data, callbacks=[Clock()])
    else:
        tricks = {} if variant == "adapter, no tricks" else {"ema": {"decay": 0.999}}
        trainer = TricksTrainer(model=model, args=args, train_dataset=data, callbacks=[TricksCallback(tricks), Clock()])
    trainer.train()
    gaps = [b - a for a, b in zip(times[warmup:], times[warmup + 1:], strict=False)]
    return statistics.median(gaps)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    import torch

    torch.set_num_threads(a.threads)
    state = _model().state_dict()
    variants = ["hf plain", "adapter, no tricks", "adapter, ema"]
    per: dict[str, list[float]] = {v: [] for v in variants}
    ratios: dict[str, list[float]] = {v: [] for v in variants}
    for r in range(a.rounds):
        order = variants[r % 3:] + variants[:r % 3]
        got = {v: _run(v, a.steps, a.warmup, state) for v in order}
        for v in variants:
            per[v].append(got[v])
            ratios[v].append(got[v] / got["hf plain"])
    print(f"| variant | ms/step (median) | ratio to hf plain (median over {a.rounds} rounds) | range |")
    print("|---|---|---|---|")
    for v in variants:
        print(f"| {v} | {1e3 * statistics.median(per[v]):.2f} | {statistics.median(ratios[v]):.3f} | "
              f"{min(ratios[v]):.3f}-{max(ratios[v]):.3f} |")


if __name__ == "__main__":
    main()
