"""Every mistake the runtime audit knows (``trickbag.audit.watch.AUDIT_RULES``), planted the way a user would make
it in a Lightning run and in an HF run, is reported through the callbacks' ``audit=True``; the same runs without the
plant report nothing. The two GradScaler rules need fp16 with a loss scale, which neither framework makes on the CPU;
their runs get what it makes on a GPU with a CPU GradScaler (Lightning's fp16 plugin, accelerate's scaler: the helpers
of ``test_fp16_cpu.py`` and ``test_hf_fp16_cpu.py``) and a batch whose fp16 backward overflows. HF zeroes the
gradients itself after every update (no user hook replaces its ``model.zero_grad()``), so ``grads-never-zeroed`` cannot
be planted there (:data:`NOT_PLANTABLE`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.integrations.conftest import data, lightning_fit, loader, net
from trickbag.audit.watch import AUDIT_RULES

sys.path.insert(0, str(Path(__file__).parent))

#: rule -> (frameworks it cannot be planted in, why)
NOT_PLANTABLE = {
    "grads-never-zeroed": ({"hf"}, "HF calls model.zero_grad() itself after every update"),
}
#: the plants that need fp16 with a GradScaler (their runs: fp16, and batch OVERFLOW_AT's loss times 1e5)
FP16_PLANTS = ("clip-before-unscale", "scheduler-on-skipped-step", "none-fp16")
OVERFLOW_AT = 3
LIGHTNING_PLANTS = sorted(r for r in AUDIT_RULES if "lightning" not in NOT_PLANTABLE.get(r, ((), ""))[0])
HF_PLANTS = sorted(r for r in AUDIT_RULES if "hf" not in NOT_PLANTABLE.get(r, ((), ""))[0])


def _rules(report: Any) -> set[str]:
    return {f.rule for f in report.findings}


# ---------------------------------------------------------------- Lightning
def _lightning_module(plant: str) -> Any:
    import lightning.pytorch as pl
    from torch.optim.swa_utils import AveragedModel

    class Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.model = net()
            if plant == "frozen-param-decayed":
                self.model[1].requires_grad_(False)  # frozen, yet handed to an optimizer with weight decay below
            self.avg = [AveragedModel(self.model)]  # a user's own average (outside the module's parameters)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.model(x)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, y = batch
            if plant == "train-in-eval-mode":
                self.eval()
            if plant == "eval-with-grad":  # a look at the eval-mode output, with gradients on
                self.eval()
                self(x)
                self.train()
            sched = self.lr_schedulers()
            if plant == "scheduler-before-step" and self.global_step == 0 and batch_idx == 0:
                sched.step()
            if plant == "scheduler-per-micro-batch":  # Lightning steps it too (interval="step")
                sched.step()
            loss = torch.nn.functional.cross_entropy(self(x), y)
            return loss * 1e5 if plant in FP16_PLANTS and batch_idx == OVERFLOW_AT else loss  # fp16: inf gradients

        def on_after_backward(self) -> None:
            if plant == "clip-before-unscale":  # fp16: the gradients are still multiplied by the loss scale
                torch.nn.utils.clip_grad_norm_(self.parameters(), 1.0)
            if plant == "clip-per-micro-batch":  # every micro-batch under accumulation
                torch.nn.utils.clip_grad_norm_(self.parameters(), 1.0)
            if plant == "ema-before-step":
                self.avg[0].update_parameters(self.model)
            if plant == "zero-grad-before-step-accumulating":  # a micro-batch's gradient is erased
                self.zero_grad()

        def on_before_optimizer_step(self, optimizer: Any) -> None:
            if plant == "zero-grad-before-step":  # inside Lightning's closure, after its backward
                optimizer.zero_grad()

        def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
            if plant == "scheduler-on-skipped-step":  # after every batch, whether the GradScaler stepped or not
                self.lr_schedulers().step()
            if plant == "clip-after-step":
                torch.nn.utils.clip_grad_norm_(self.parameters(), 1.0)
            if plant == "ema-per-micro-batch":  # every micro-batch under accumulation
                self.avg[0].update_parameters(self.model)

        def optimizer_zero_grad(self, *args: Any, **kwargs: Any) -> None:
            if plant != "grads-never-zeroed":
                super().optimizer_zero_grad(*args, **kwargs)

        def configure_optimizers(self) -> Any:
            params = list(self.model.parameters())
            if plant == "param-not-in-optimizer":
                params = params[:-2]  # the head is left out
            opt = torch.optim.SGD(params, lr=0.05, weight_decay=0.1 if plant == "frozen-param-decayed" else 0.0)
            if plant == "scheduler-unit-mismatch":  # counted in updates, stepped per epoch (Lightning's default)
                return {"optimizer": opt, "lr_scheduler": torch.optim.lr_scheduler.OneCycleLR(opt, 0.1, total_steps=30)}
            interval = "step" if plant == "scheduler-per-micro-batch" else "epoch"
            sched = torch.optim.lr_scheduler.StepLR(opt, 100)
            return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": interval}}

    return Module()


def _lightning_audit(plant: str) -> Any:
    pytest.importorskip("lightning")
    from tests.integrations.test_fp16_cpu import fp16_plugin
    from trickbag.integrations.lightning import TricksCallback

    cb = TricksCallback(tricks={"ema": {"decay": 0.8}}, audit=True)
    # the update's last micro-batch runs inside optimizer.step(closure), which the audit counts as the step's (an
    # LBFGS closure may clip and zero_grad): clipping and zero_grad are seen on the micro-batches before it
    accumulate = {"clip-per-micro-batch": 3, "ema-per-micro-batch": 2,
                  "zero-grad-before-step-accumulating": 2}.get(plant, 1)
    fp16 = {"plugins": [fp16_plugin("cpu")]} if plant in FP16_PLANTS else {}
    lightning_fit(_lightning_module(plant), loader(data(), 4), callbacks=[cb], epochs=2,
                  accumulate_grad_batches=accumulate, **fp16)
    return cb.audit_report


@pytest.mark.parametrize("plant", LIGHTNING_PLANTS)
def test_each_planted_mistake_is_reported_in_a_lightning_run(plant: str) -> None:
    assert plant in _rules(_lightning_audit(plant))


def test_zero_grad_on_a_micro_batch_before_the_update_is_reported_in_a_lightning_run() -> None:
    assert "zero-grad-before-step" in _rules(_lightning_audit("zero-grad-before-step-accumulating"))


@pytest.mark.parametrize("plant", ["none", "none-fp16"])
def test_the_lightning_run_without_a_plant_reports_nothing(plant: str) -> None:
    assert _rules(_lightning_audit(plant)) == set()


# ---------------------------------------------------------------- Hugging Face
def _hf_audit(plant: str, out: Path) -> Any:
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from hf_models import HFNet, hf_args, hf_dataset
    from hf_models import data as hf_data
    from torch.optim.swa_utils import AveragedModel
    from transformers import TrainerCallback

    from trickbag.integrations.hf import TricksCallback, TricksTrainer

    torch.manual_seed(0)
    model = HFNet()
    avg = AveragedModel(model)

    class Planted(TricksTrainer):
        calls = 0

        def compute_loss(self, model: Any, inputs: Any, *a: Any, **kw: Any) -> Any:
            if plant == "train-in-eval-mode":
                model.eval()
            if plant == "eval-with-grad":  # a look at the eval-mode output, with gradients on
                model.eval()
                model(pixel_values=inputs["pixel_values"])
                model.train()
            loss = super().compute_loss(model, inputs, *a, **kw)
            self.calls += 1
            if plant in FP16_PLANTS and self.calls == OVERFLOW_AT + 1:  # fp16: inf gradients
                loss = loss * 1e5
            return loss

        def training_step(self, model: Any, inputs: Any, num_items_in_batch: Any = None) -> torch.Tensor:
            loss = super().training_step(model, inputs, num_items_in_batch)
            if plant == "clip-before-unscale":  # fp16: HF unscales only later, in its gradient norm
                torch.nn.utils.clip_grad_norm_(list(model.parameters()), 1.0)
            if plant == "clip-per-micro-batch":  # every micro-batch under accumulation
                torch.nn.utils.clip_grad_norm_(list(model.parameters()), 1.0)
            if plant == "ema-per-micro-batch":
                avg.update_parameters(model)
            return loss

        def create_optimizer(self, model: Any = None) -> Any:
            opt = super().create_optimizer()
            if plant == "param-not-in-optimizer":  # the head is left out
                head = {id(p) for p in self.model.head.parameters()}
                for g in opt.param_groups:
                    g["params"] = [p for p in g["params"] if id(p) not in head]
            return opt

    class Hooks(TrainerCallback):
        one_cycle: Any = None
        own: Any = None  # a schedule of the user's, beside HF's

        def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if plant == "scheduler-before-step":
                kw["lr_scheduler"].step()
            if plant == "frozen-param-decayed":  # frozen after HF built its optimizer with weight decay
                kw["model"].blocks[1].requires_grad_(False)
            if plant == "scheduler-unit-mismatch":
                self.one_cycle = torch.optim.lr_scheduler.OneCycleLR(kw["optimizer"].optimizer, 0.1, total_steps=30)
            if plant == "scheduler-on-skipped-step":
                self.own = torch.optim.lr_scheduler.StepLR(kw["optimizer"].optimizer, 100)

        def on_epoch_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if self.one_cycle is not None:  # counted in updates, stepped per epoch
                self.one_cycle.step()

        def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if plant == "zero-grad-before-step":
                kw["model"].zero_grad()
            if plant == "ema-before-step":
                avg.update_parameters(kw["model"])

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if plant == "scheduler-per-micro-batch":  # HF stepped it already
                kw["lr_scheduler"].step()
            if self.own is not None:  # after every update, whether the GradScaler stepped or not (HF's own skips)
                self.own.step()
            if plant == "clip-after-step":
                torch.nn.utils.clip_grad_norm_(list(kw["model"].parameters()), 1.0)

    x, y = hf_data(40)
    cb = TricksCallback({"ema": {"decay": 0.9}}, audit=True)
    accumulate = 2 if plant in ("clip-per-micro-batch", "ema-per-micro-batch") else 1
    args = hf_args(str(out), per_device_train_batch_size=4, gradient_accumulation_steps=accumulate,
                   weight_decay=0.1 if plant == "frozen-param-decayed" else 0.0, num_train_epochs=2)
    if plant in FP16_PLANTS:
        args = hf_args(str(out), per_device_train_batch_size=4, num_train_epochs=2, fp16=True)
    trainer = Planted(model=model, args=args, train_dataset=hf_dataset(x, y), callbacks=[cb, Hooks()])
    if plant in FP16_PLANTS:  # what accelerate makes for fp16 on a GPU, with a CPU GradScaler (test_hf_fp16_cpu.py)
        trainer.accelerator.native_amp, trainer.accelerator.scaler = True, torch.amp.GradScaler("cpu")
    trainer.train()
    return cb.audit_report


@pytest.mark.parametrize("plant", HF_PLANTS)
def test_each_planted_mistake_is_reported_in_an_hf_run(plant: str, tmp_path: Path) -> None:
    assert plant in _rules(_hf_audit(plant, tmp_path))


@pytest.mark.parametrize("plant", ["none", "none-fp16"])
def test_the_hf_run_without_a_plant_reports_nothing(plant: str, tmp_path: Path) -> None:
    """(``none-fp16``: fp16 with an overflowing batch the GradScaler skips, and nothing wrong)"""
    assert _rules(_hf_audit(plant, tmp_path)) == set()


def test_every_rule_is_planted_or_said_why_not() -> None:
    """A rule added to the audit has to be planted here, or listed with the reason it cannot be."""
    assert set(NOT_PLANTABLE) <= set(AUDIT_RULES)
    assert len(LIGHTNING_PLANTS) == len(AUDIT_RULES) and len(HF_PLANTS) == len(AUDIT_RULES) - 1
