"""fp16 (autocast + GradScaler) through the HF adapter, on the CPU.

HF's ``fp16=True`` on the CPU trains in fp32 (accelerate makes a GradScaler and fp16 autocast only on an accelerator).
The tests give the Accelerator what it makes on a GPU, with a CPU GradScaler (``native_amp`` on, ``scaler`` a
``torch.amp.GradScaler("cpu")``): the same accelerate code paths (autocast around the model's forward, the scaled
backward, ``unscale_`` in HF's gradient norm, ``GradScaler.step``/``update`` in the optimizer step) as on CUDA. Through
them clip, AGC, the guard and SAM (alone and with clip + guard, with EMA) equal trickbag's own Trainer with
``precision="16"`` (same network, initial weights, data order and seed), and an overflow is skipped: in the first pass
by the GradScaler, in SAM's second pass by the adapter (the weights put back, the scale backed off, the schedule not
stepped), the run going on to trickbag's result. ``tests/gpu/test_gpu_integrations.py`` runs the same on CUDA."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("accelerate")
sys.path.insert(0, str(Path(__file__).parent))

from hf_models import HFNet, data, hf_args, hf_dataset, max_diff, run_reference  # noqa: E402

from tests.integrations.conftest import flat  # noqa: E402
from tests.integrations.test_fp16_cpu import ScaleLoss  # noqa: E402

#: the tricks under fp16, as a recipe's tricks: section, with the guard's setting
TRICKS: dict[str, tuple[dict[str, Any], str | None]] = {
    "sam": ({"sam": {"rho": 0.05}}, None),
    "sam+clip+guard": ({"sam": {"rho": 0.05}, "clip": {"max_norm": 0.5}}, "skip"),
    "sam+ema+label_smoothing": ({"sam": {"rho": 0.05}, "ema": {"decay": 0.8, "warmup": False},
                                 "label_smoothing": {"eps": 0.1}}, None),
    "clip": ({"clip": {"max_norm": 0.05}}, None),
    "agc": ({"clip": {"mode": "agc", "clip_factor": 0.01}}, None),
    "guard": ({}, "skip"),
}
TOL = 1e-5
N = 44  # samples: batches of 8, the last of 4
OVERFLOW_AT = 2  # the batch (first epoch) whose loss is multiplied by 1e5: finite, but its fp16 backward is inf


class PlantedNet(HFNet):
    """:class:`HFNet` multiplying the loss of its ``at``-th training forward by 1e5; the training outputs' dtypes."""

    def __init__(self, at: int | None = None) -> None:
        super().__init__()
        self.at, self.calls, self.dtypes = at, 0, set()

    def forward(self, pixel_values: torch.Tensor, labels: torch.Tensor | None = None,  # type: ignore[override]
                **kwargs: Any) -> dict[str, torch.Tensor]:
        out = super().forward(pixel_values, labels, **kwargs)
        if self.training:
            self.dtypes.add(out["logits"].dtype)
        if self.training and labels is not None:
            if self.calls == self.at:
                out = {**out, "loss": out["loss"] * 1e5}
            self.calls += 1
        return out


def run_hf_fp16(tricks: dict[str, Any], out: str, nonfinite: str | None, *, at: int | None = None, epochs: int = 2,
                device: str = "cpu", **kw: Any) -> tuple[PlantedNet, Any, Any]:
    """One TricksTrainer run with fp16=True: on CUDA HF's own; on the CPU with the Accelerator's GPU-side fp16 set-up
    on a CPU GradScaler."""
    from trickbag.integrations.hf import TricksCallback, TricksTrainer

    torch.manual_seed(0)
    model = PlantedNet(at)
    x, y = data(N)
    cb = TricksCallback(tricks, nonfinite=nonfinite)
    t = TricksTrainer(model=model, args=hf_args(out, fp16=True, num_train_epochs=epochs, use_cpu=device == "cpu", **kw),
                      train_dataset=hf_dataset(x, y), callbacks=[cb])
    if device == "cpu":
        assert t.accelerator.scaler is None  # what HF makes on the CPU; given the GPU's:
        t.accelerator.native_amp, t.accelerator.scaler = True, torch.amp.GradScaler("cpu")
    t.train()
    return model, cb, t


def reference(tricks: dict[str, Any], nonfinite: str | None, *, precision: str = "16", at: int | None = None,
              in_pass: int = 1, epochs: int = 2, device: str = "cpu") -> Any:
    plugins = [ScaleLoss(at, in_pass)] if at is not None else []
    return run_reference(tricks, n=N, epochs=epochs, precision=precision, nonfinite=nonfinite, plugins=plugins,
                         device=device)


def check_fp16_trick(name: str, tmp_path: Path, device: str = "cpu", tol: float = TOL) -> None:
    tricks, nonfinite = TRICKS[name]
    model, cb, t = run_hf_fp16(tricks, str(tmp_path), nonfinite, device=device)
    assert model.dtypes == {torch.float16}  # autocast ran in fp16
    assert cb.run.state.step == 12 and cb.run.state.skipped_steps == 0
    assert t.accelerator.scaler.get_scale() == 65536.0
    ref16, ref32 = reference(tricks, nonfinite, device=device), reference(tricks, nonfinite, precision="32")
    assert max_diff(model, ref16) < tol
    torch.manual_seed(0)
    start, got, want = flat(HFNet()), flat(model).cpu(), flat(ref32)  # (HFNet(): the runs' initial weights)
    # fp16's rounding, not another run (with SAM under AdamW the rounding shows most: Adam's normalisation lifts the
    # tiny second-pass gradients of barely-alive units to full-size steps; under SGD the two agree to 2e-4)
    assert 0 < float((got - want).norm()) < 0.2 * float((want - start).norm())


@pytest.mark.parametrize("name", sorted(TRICKS))
def test_fp16_tricks_equal_trickbag_trainer_fp16(name: str, tmp_path: Path) -> None:
    check_fp16_trick(name, tmp_path)


def check_sam_overflow(in_pass: int, tmp_path: Path, device: str = "cpu", tol: float = TOL) -> None:
    """SAM's two forwards per batch are consecutive: batch 2's first pass is the 5th training forward, its second
    the 6th. The update changes nothing, the scale halves, the schedule does not step for it, one skip is counted."""
    tricks = {"sam": {"rho": 0.05}}
    model, cb, t = run_hf_fp16(tricks, str(tmp_path), None, at=2 * OVERFLOW_AT + in_pass - 1, epochs=1,
                               lr_scheduler_type="linear", device=device)
    s = cb.run.state
    assert s.step == 5 and s.skipped_steps == 1
    assert t.accelerator.scaler.get_scale() == 65536.0 / 2
    assert t.lr_scheduler.last_epoch == 5  # HF's schedule stepped for the 5 updates taken, not the skipped one
    ref = reference(tricks, None, at=OVERFLOW_AT, in_pass=in_pass, epochs=1, device=device)
    # (trickbag's Trainer here has no schedule: compared with the constant-LR run; HF's schedule is checked above)
    plain, _, _ = run_hf_fp16(tricks, str(tmp_path / "constant"), None, at=2 * OVERFLOW_AT + in_pass - 1, epochs=1,
                              device=device)
    assert max_diff(plain, ref) < tol


@pytest.mark.parametrize("in_pass", [1, 2], ids=["first-pass", "second-pass"])
def test_sam_under_fp16_skips_an_overflow_in_either_pass(in_pass: int, tmp_path: Path) -> None:
    check_sam_overflow(in_pass, tmp_path)


def test_fp16_overflow_without_sam_is_the_grad_scalers_skip(tmp_path: Path) -> None:
    """Without SAM an overflow is the GradScaler's skip alone: no step count, no EMA update, as in trickbag's
    Trainer."""
    tricks = {"ema": {"decay": 0.8, "warmup": False}}
    model, cb, t = run_hf_fp16(tricks, str(tmp_path), None, at=OVERFLOW_AT, epochs=1)
    assert cb.run.state.step == 5 and cb.run.state.skipped_steps == 1
    ref = reference(tricks, None, at=OVERFLOW_AT, epochs=1)
    assert max_diff(model, ref) < TOL


def test_a_vetoed_first_pass_under_sam_takes_no_second_pass(tmp_path: Path) -> None:
    """SAM + the guard (fp32), a NaN batch: the first pass's veto ends the update, as in trickbag's Trainer (no second
    forward, whose dropout draws and BatchNorm statistics would otherwise differ); one skip, the rest trains alike."""
    from trickbag.integrations.hf import TricksCallback, TricksTrainer

    tricks = {"sam": {"rho": 0.05}}
    x, y = data(N)
    x[9, 0, 0, 0] = float("nan")  # batch 1's loss is NaN
    torch.manual_seed(0)
    model = PlantedNet()
    cb = TricksCallback(tricks, nonfinite="skip")
    TricksTrainer(model=model, args=hf_args(str(tmp_path), num_train_epochs=1), train_dataset=hf_dataset(x, y),
                  callbacks=[cb]).train()
    assert model.calls == 2 * 6 - 1  # 6 batches, two passes each but the vetoed one
    assert cb.run.state.skipped_steps == 1 and cb.run.state.step == 5
    assert all(torch.isfinite(p).all() for p in model.parameters())
