"""Checkpoint sizes of a ResNet-18 run: weights-only ``best.pt`` vs the full ``last.pt`` a resume needs.

Nothing is trained: a torchvision ResNet-18 (1000 classes, 11.7 M parameters) gets one optimizer
update on a random batch (so SGD's momentum / AdamW's moment buffers exist, as in any checkpoint after
the first update), and the trainer writes both kinds of checkpoint the way a run does
(``Trainer.save_checkpoint(resume=True/False)`` with the recipe and, with EMA, the averaged weights as
``eval_model`` and the EMA's own state among the plug-ins). The previous ``best.pt`` was the full kind.

Run: ``.venv/bin/python benchmarks/checkpoint_sizes.py``
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402
import torch  # noqa: E402
import torchvision  # noqa: E402

from trickbag.nn import EMA  # noqa: E402
from trickbag.plugin.interface import Plugin  # noqa: E402
from trickbag.recipe import load_recipe  # noqa: E402
from trickbag.runs.summary import format_bytes  # noqa: E402
from trickbag.train.trainer import Trainer  # noqa: E402


class _EMA(Plugin):
    """What the ``ema`` trick keeps: the averaged copy (saved as eval_model) and its state among the plug-ins."""

    name = "ema"

    def __init__(self, model: torch.nn.Module) -> None:
        self.ema = EMA(model, 0.999)

    def on_fit_start(self, state) -> None:  # noqa: ANN001
        state.eval_weights = lambda: self.ema.module.state_dict()

    def on_step(self, state) -> None:  # noqa: ANN001
        self.ema.update(state.model)

    def state_dict(self) -> dict:
        return self.ema.state_dict()


def _trainer(optimizer: str, ema: bool) -> tuple[Trainer, dict]:
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=1000)
    opt = (torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4) if optimizer == "sgd"
           else torch.optim.AdamW(model.parameters(), lr=1e-3))
    x, y = torch.randn(2, 3, 64, 64), torch.randint(0, 1000, (2,))
    plugins = [_EMA(model)] if ema else []
    trainer = Trainer(model, opt, [(x, y)], max_epochs=1, device="cpu", plugins=plugins)
    trainer.fit()  # one update: the optimizer's buffers exist, EMA has averaged once
    extra = {"recipe": load_recipe("imagefolder-finetune", ["data.root=/data"]).model_dump(mode="json"),
             "classes": [str(i) for i in range(1000)]}
    if trainer.state.eval_weights is not None:
        extra["eval_model"] = trainer.state.eval_weights()
    return trainer, extra


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    info = C.machine_info()
    print(f"# checkpoint sizes: ResNet-18 best.pt (weights only) vs last.pt (everything for a resume)\n"
          f"command: {C.command_line()}")
    for k in ("date", "torch"):
        print(f"{k}: {info[k]}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for optimizer in ("sgd", "adamw"):
            for ema in (False, True):
                trainer, extra = _trainer(optimizer, ema)
                best = trainer.save_checkpoint(Path(tmp) / "best.pt", resume=False, **extra).stat().st_size
                last = trainer.save_checkpoint(Path(tmp) / "last.pt", **extra).stat().st_size
                weights = sum(v.numel() * v.element_size() for v in trainer.model.state_dict().values())
                rows.append([f"{'SGD momentum' if optimizer == 'sgd' else 'AdamW'}", "yes" if ema else "no",
                             format_bytes(weights), format_bytes(best), format_bytes(last), f"{best / last:.2f}"])
    print()
    print(C.markdown_table(["optimizer", "EMA", "model weights", "best.pt", "last.pt (and old best.pt)",
                            "best / last"], rows))


if __name__ == "__main__":
    main()
