"""fp16 mixed precision (autocast + GradScaler) through the Lightning adapter, on the CPU.

Lightning turns ``precision="16-mixed"`` on the CPU into bf16-mixed, but takes its fp16 precision plugin with a CPU
GradScaler (``plugins=[MixedPrecision("16-mixed", "cpu", GradScaler("cpu"))]``): the same plugin, autocast and
GradScaler steps as on a GPU. Through it clip (norm), AGC and the non-finite guard equal trickbag's own Trainer with
``precision="16"`` (same model, data order, seed), and so does SAM, whose passes the callback scales and checks
itself (Lightning's plugin steps through the GradScaler without a closure); a planted fp16 overflow, in the first
pass or in SAM's second, is skipped by the GradScaler and the run goes on. The helpers here are reused on CUDA by
``tests/gpu/test_gpu_integrations.py``. HF refuses ``fp16=True`` on the CPU itself (and the adapter refuses it
everywhere: see the GPU file)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tests.integrations.conftest import Holder, clone, data, flat, loader, net

pl = pytest.importorskip("lightning.pytorch")

from lightning.pytorch.plugins.precision import MixedPrecision  # noqa: E402

from trickbag.errors import RecipeError  # noqa: E402
from trickbag.integrations.lightning import TricksCallback  # noqa: E402
from trickbag.plugin.interface import Plugin  # noqa: E402
from trickbag.train.trainer import Trainer  # noqa: E402

#: the tricks run under fp16, as a recipe's tricks: section
FP16_TRICKS: dict[str, tuple[dict[str, Any], str | None]] = {
    "sam": ({"sam": {"rho": 0.05}}, None),
    "sam+clip+guard": ({"sam": {"rho": 0.05}, "clip": {"max_norm": 0.5}}, "skip"),
    "sam+agc+ema": ({"sam": {"rho": 0.05}, "clip": {"mode": "agc", "clip_factor": 0.01},
                     "ema": {"decay": 0.8, "warmup": False}}, None),
    "clip": ({"clip": {"max_norm": 0.05}}, None),
    "agc": ({"clip": {"mode": "agc", "clip_factor": 0.01}}, None),
    "guard": ({}, "skip"),
    "clip+guard": ({"clip": {"max_norm": 0.5}}, "skip"),
}
OVERFLOW_AT = 2  # the micro-batch (each epoch) whose loss is multiplied by 1e5: finite, but its fp16 backward is inf


def sgd(params: Any) -> torch.optim.Optimizer:
    return torch.optim.SGD(params, lr=0.2, momentum=0.9, weight_decay=1e-3)


def fp16_plugin(device: str) -> MixedPrecision:
    """Lightning's fp16 precision plugin with a GradScaler on ``device`` (on CUDA what ``precision="16-mixed"``
    makes; on the CPU the only way to get fp16 rather than bf16)."""
    return MixedPrecision("16-mixed", device, torch.amp.GradScaler(device))


class Module(pl.LightningModule):
    """The net; the loss of micro-batch ``overflow_at`` times 1e5 (in its pass ``overflow_pass``: 2 is SAM's second);
    the output dtypes autocast gave."""

    def __init__(self, model: torch.nn.Module, overflow_at: int | None = None, overflow_pass: int = 1) -> None:
        super().__init__()
        self.model, self.overflow_at, self.overflow_pass = model, overflow_at, overflow_pass
        self.dtypes: set[torch.dtype] = set()
        self.passes: dict[tuple[int, int], int] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        out = self(x)
        self.dtypes.add(out.dtype)
        loss = torch.nn.functional.cross_entropy(out, y)
        key = (self.current_epoch, batch_idx)
        self.passes[key] = self.passes.get(key, 0) + 1
        return loss * 1e5 if batch_idx == self.overflow_at and self.passes[key] == self.overflow_pass else loss

    def configure_optimizers(self) -> Any:
        return sgd(self.parameters())


class Weights(pl.Callback):
    """The weights after every training batch (flat, on the CPU)."""

    def __init__(self) -> None:
        self.rows: list[torch.Tensor] = []

    def on_train_batch_end(self, trainer: Any, pl_module: Any, *args: Any) -> None:
        self.rows.append(flat(pl_module.model).float().cpu().clone())


class ScaleLoss(Plugin):
    """The reference's plant: the loss of micro-batch ``batch_idx`` times 1e5 in pass ``in_pass`` (as :class:`Module`
    does)."""

    def __init__(self, batch_idx: int, in_pass: int = 1) -> None:
        self.batch_idx, self.in_pass = batch_idx, in_pass

    def on_loss(self, state: Any) -> None:
        if state.batch_idx == self.batch_idx and state.closure_pass == (self.in_pass == 2):
            state.loss = state.loss * 1e5


def lightning_fp16(model: torch.nn.Module, tricks: dict[str, Any], nonfinite: str | None, *, device: str = "cpu",
                   epochs: int = 2, overflow_at: int | None = None, precision: Any = None, overflow_pass: int = 1,
                   **kw: Any) -> tuple[Module, TricksCallback, Weights, Any]:
    """One Lightning fit of ``model`` with the tricks, fp16-mixed on ``device`` unless ``precision=`` says."""
    module = Module(model, overflow_at, overflow_pass)
    cb, log = TricksCallback(tricks=tricks, nonfinite=nonfinite, seed=0), Weights()
    prec = {"plugins": [fp16_plugin(device)]} if precision is None else {"precision": precision}
    trainer = pl.Trainer(max_epochs=epochs, accelerator=device, devices=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                         callbacks=[cb, log], **prec, **kw)
    trainer.fit(module, loader(data()))
    return module, cb, log, trainer


def trickbag_fp16(model: torch.nn.Module, tricks: dict[str, Any], nonfinite: str | None, *, device: str = "cpu",
                  epochs: int = 2, overflow_at: int | None = None, precision: str = "16", overflow_pass: int = 1
                  ) -> Trainer:
    """The same run through trickbag's own Trainer (the reference)."""
    held = Holder(model)
    plugins = [ScaleLoss(overflow_at, overflow_pass)] if overflow_at is not None else []
    t = Trainer(held, sgd(held.parameters()), loader(data()), tricks=tricks, max_epochs=epochs, device=device,
                seed=0, progress=False, precision=precision, nonfinite=nonfinite, plugins=plugins)
    t.fit()
    return t


def check_fp16_trick(name: str, device: str, atol: float, precision: Any = None) -> None:
    """Lightning fp16 with one entry of :data:`FP16_TRICKS`: fp16 outputs, every update taken, weights moved and
    finite, equal to trickbag's fp16 Trainer (``atol``) and within fp16's noise of trickbag's fp32 run."""
    tricks, nonfinite = FP16_TRICKS[name]
    model = net()
    start = flat(model).clone()
    module, cb, _, trainer = lightning_fp16(clone(model), tricks, nonfinite, device=device, precision=precision)
    got = flat(module.model).float().cpu()
    assert module.dtypes == {torch.float16}
    assert cb.session.state.step == 10 and trainer.precision_plugin.scaler.get_scale() > 0
    assert torch.isfinite(got).all() and float((got - start).norm()) > 1e-2
    ref16 = trickbag_fp16(clone(model), tricks, nonfinite, device=device)
    ref32 = trickbag_fp16(clone(model), tricks, nonfinite, device=device, precision="32")
    torch.testing.assert_close(got, flat(ref16.model.model).float().cpu(), rtol=0, atol=atol)
    moved = float((flat(ref32.model.model).cpu() - start).norm())
    assert float((got - flat(ref32.model.model).cpu()).norm()) < 2e-2 * moved  # fp16 rounding over 10 updates


@pytest.mark.parametrize("name", sorted(FP16_TRICKS))
def test_fp16_mixed_tricks_equal_trickbag_trainer_fp16(name: str) -> None:
    check_fp16_trick(name, "cpu", atol=1e-5)


def check_overflow_skipped(device: str, precision: Any = None) -> None:
    """A batch whose fp16 backward overflows: the GradScaler skips that update (weights unchanged over it, the scale
    halves), the guard vetoes it, the session does not count it, and the run goes on to trickbag's fp16 result."""
    model = net()
    module, cb, log, trainer = lightning_fp16(clone(model), {}, "skip", device=device, epochs=1,
                                              overflow_at=OVERFLOW_AT, precision=precision)
    rows = log.rows
    assert len(rows) == 5 and torch.isfinite(rows[-1]).all()
    assert torch.equal(rows[OVERFLOW_AT], rows[OVERFLOW_AT - 1])  # the overflowed update changed nothing
    assert not torch.equal(rows[OVERFLOW_AT + 1], rows[OVERFLOW_AT])  # and the next one trained
    assert trainer.precision_plugin.scaler.get_scale() == 65536.0 / 2
    assert cb.session.state.step == 4 and cb.session.state.skipped_steps == 1
    ref = trickbag_fp16(clone(model), {}, "skip", device=device, epochs=1, overflow_at=OVERFLOW_AT)
    assert ref.state.step == 4 and ref.state.scaler.get_scale() == 65536.0 / 2
    torch.testing.assert_close(rows[-1], flat(ref.model.model).float().cpu(), rtol=0, atol=1e-5)


def test_an_fp16_overflow_is_skipped_and_the_run_goes_on() -> None:
    check_overflow_skipped("cpu")


def check_overflow_without_guard(device: str) -> None:
    """Without the guard an fp16 overflow is the GradScaler's skip alone: trickbag's Trainer advances neither the
    update counter nor EMA then; the adapter must not either."""
    tricks = {"ema": {"decay": 0.8, "warmup": False}}
    model = net()
    module, cb, _, _ = lightning_fp16(clone(model), tricks, None, device=device, epochs=1, overflow_at=OVERFLOW_AT)
    ref = trickbag_fp16(clone(model), tricks, None, device=device, epochs=1, overflow_at=OVERFLOW_AT)
    assert ref.state.step == 4
    assert cb.session.state.step == 4, "the GradScaler's skipped update was counted as an update"
    torch.testing.assert_close(flat(module.model).float().cpu(), flat(ref.model.model).float().cpu(), rtol=0,
                               atol=1e-5)  # fit's end leaves the EMA weights in both


def test_an_fp16_overflow_without_the_guard_advances_neither_step_nor_ema() -> None:
    check_overflow_without_guard("cpu")


def check_stop_guard_leaves_overflows_to_the_scaler(device: str) -> None:
    """``nonfinite="stop"`` under fp16: an overflow is the GradScaler's (trickbag's Trainer neither counts nor stops
    on it); the adapter's guard must not count it as a non-finite update."""
    model = net()
    _, cb, _, _ = lightning_fp16(clone(model), {}, "stop", device=device, epochs=1, overflow_at=OVERFLOW_AT)
    ref = trickbag_fp16(clone(model), {}, "stop", device=device, epochs=1, overflow_at=OVERFLOW_AT)
    assert ref.guard is not None and ref.guard.skipped == 0 and not ref.state.should_stop
    assert cb.session.guard is not None and cb.session.guard.skipped == 0


def test_the_stop_guard_leaves_an_fp16_overflow_to_the_grad_scaler() -> None:
    check_stop_guard_leaves_overflows_to_the_scaler("cpu")


def test_nonfinite_stop_ends_a_lightning_run_at_the_bad_update() -> None:
    ds = data()
    ds.tensors[0][9] = float("nan")  # the second batch (fp32: a real non-finite loss)
    module = Module(net())
    cb = TricksCallback(nonfinite="stop")
    trainer = pl.Trainer(max_epochs=1, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, callbacks=[cb])
    trainer.fit(module, loader(ds))
    assert cb.session.state.should_stop and trainer.global_step <= 2


def check_sam_overflow(device: str, overflow_pass: int, precision: Any = None) -> None:
    """SAM under fp16 with an overflow in the first pass (no perturbation: the update is skipped at once) or in the
    second (SAM puts the weights back): the update changes nothing, the scale halves, the session counts one skip,
    and the run ends where trickbag's fp16 Trainer ends."""
    tricks = {"sam": {"rho": 0.05}}
    model = net()
    _, cb, log, trainer = lightning_fp16(clone(model), tricks, None, device=device, epochs=1, overflow_at=OVERFLOW_AT,
                                         overflow_pass=overflow_pass, precision=precision)
    rows = log.rows
    assert len(rows) == 5 and torch.isfinite(rows[-1]).all()
    assert torch.equal(rows[OVERFLOW_AT], rows[OVERFLOW_AT - 1])  # the weights are back where the update began
    assert not torch.equal(rows[OVERFLOW_AT + 1], rows[OVERFLOW_AT])
    assert trainer.precision_plugin.scaler.get_scale() == 65536.0 / 2
    assert cb.session.state.step == 4 and cb.session.state.skipped_steps == 1
    ref = trickbag_fp16(clone(model), tricks, None, device=device, epochs=1, overflow_at=OVERFLOW_AT,
                        overflow_pass=overflow_pass)
    assert ref.state.step == 4 and ref.state.scaler.get_scale() == 65536.0 / 2
    torch.testing.assert_close(rows[-1], flat(ref.model.model).float().cpu(), rtol=0, atol=1e-5)


@pytest.mark.parametrize("overflow_pass", [1, 2], ids=["first-pass", "second-pass"])
def test_sam_under_fp16_skips_an_overflow_in_either_pass(overflow_pass: int) -> None:
    check_sam_overflow("cpu", overflow_pass)


def test_sam_with_accumulation_under_fp16_is_refused_in_one_line() -> None:
    with pytest.raises(RecipeError) as e:
        lightning_fp16(net(), {"sam": {"rho": 0.05}}, None, epochs=1, accumulate_grad_batches=2)
    assert "\n" not in str(e.value) and "accumulate_grad_batches" in str(e.value)


def test_16_mixed_on_the_cpu_is_bf16_in_lightning() -> None:
    """Why the plugin: Lightning's own ``precision="16-mixed"`` on the CPU runs bf16 (no GradScaler)."""
    module, _, _, trainer = lightning_fp16(net(), {"clip": {"max_norm": 0.5}}, None, epochs=1, precision="16-mixed")
    assert module.dtypes == {torch.bfloat16} and getattr(trainer.precision_plugin, "scaler", None) is None
