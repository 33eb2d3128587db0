"""The framework adapters on CUDA: Lightning ``precision="16-mixed"`` with clip, AGC and the non-finite guard against
trickbag's own fp16 Trainer and its fp32 run, a planted fp16 overflow skipped by the GradScaler while the run goes
on, SAM under 16-mixed with an overflow in either pass; HF's own ``fp16=True`` with SAM, clip, AGC and the guard
against trickbag's fp16 Trainer, and SAM's overflows (``tests/integrations/test_hf_fp16_cpu.py`` on CUDA); EMA under
Lightning ``strategy="fsdp"`` on one GPU equal to the unsharded run and to an EMA computed here.

The checks are those of ``tests/integrations/test_fp16_cpu.py``, which runs them on the CPU through Lightning's fp16
plugin with a CPU GradScaler; here Lightning makes its own 16-mixed plugin on CUDA."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.integrations.conftest import clone, data, flat, loader, net

from .helpers import CUDA_ONLY

pytestmark = CUDA_ONLY

pl = pytest.importorskip("lightning.pytorch")

from tests.integrations.test_fp16_cpu import (  # noqa: E402
    FP16_TRICKS,
    Module,
    Weights,
    check_fp16_trick,
    check_overflow_skipped,
    check_overflow_without_guard,
    check_sam_overflow,
    check_stop_guard_leaves_overflows_to_the_scaler,
)
from trickbag.integrations.lightning import TricksCallback  # noqa: E402

FP16 = "16-mixed"  # Lightning's own fp16 plugin on CUDA (autocast + torch.amp.GradScaler("cuda"))


# ---------------------------------------------------------------- Lightning 16-mixed
@pytest.mark.parametrize("name", sorted(FP16_TRICKS))
def test_lightning_16_mixed_tricks_equal_trickbag_trainer_fp16(no_tf32: None, name: str) -> None:
    check_fp16_trick(name, "cuda", atol=1e-4, precision=FP16)


def test_lightning_16_mixed_overflow_is_skipped_and_the_run_goes_on() -> None:
    check_overflow_skipped("cuda", precision=FP16)


def test_lightning_16_mixed_overflow_without_the_guard_advances_neither_step_nor_ema() -> None:
    check_overflow_without_guard("cuda")


def test_lightning_16_mixed_stop_guard_leaves_an_overflow_to_the_grad_scaler() -> None:
    check_stop_guard_leaves_overflows_to_the_scaler("cuda")


@pytest.mark.parametrize("overflow_pass", [1, 2], ids=["first-pass", "second-pass"])
def test_lightning_16_mixed_sam_skips_an_overflow_in_either_pass(overflow_pass: int) -> None:
    check_sam_overflow("cuda", overflow_pass, precision=FP16)


# ---------------------------------------------------------------- HF fp16=True
def _hf_fp16() -> Any:
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integrations"))
    from tests.integrations import test_hf_fp16_cpu

    return test_hf_fp16_cpu


@pytest.mark.parametrize("name", ["sam", "sam+clip+guard", "sam+ema+label_smoothing", "clip", "agc", "guard"])
def test_hf_fp16_tricks_equal_trickbag_trainer_fp16_on_cuda(no_tf32: None, name: str, tmp_path: Path) -> None:
    """HF's own fp16=True on CUDA (accelerate's GradScaler) with the tricks, against trickbag's fp16 Trainer."""
    _hf_fp16().check_fp16_trick(name, tmp_path, device="cuda", tol=1e-4)


@pytest.mark.parametrize("in_pass", [1, 2], ids=["first-pass", "second-pass"])
def test_hf_fp16_sam_skips_an_overflow_in_either_pass_on_cuda(no_tf32: None, in_pass: int, tmp_path: Path) -> None:
    _hf_fp16().check_sam_overflow(in_pass, tmp_path, device="cuda", tol=1e-4)


# ---------------------------------------------------------------- EMA under Lightning FSDP
DECAY = 0.8


def _fit_ema(strategy: str, accelerator: str = "cuda") -> tuple[dict[str, torch.Tensor], list[torch.Tensor], Any]:
    """EMA (no warm-up) through the callback, on one GPU: (the module's full state at the end, where fit leaves the
    EMA weights; the weights after every update; the trainer)."""
    torch.manual_seed(0)
    module = Module(net())
    cb, log = TricksCallback(tricks={"ema": {"decay": DECAY, "warmup": False}}, seed=0), Weights()
    trainer = pl.Trainer(max_epochs=2, accelerator=accelerator, devices=1, strategy=strategy, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                         num_sanity_val_steps=0, callbacks=[cb, log])
    trainer.fit(module, loader(data()))
    full = trainer.strategy.lightning_module_state_dict()  # FSDP: the full (gathered) state
    state = {k.replace("_fsdp_wrapped_module.", ""): v.detach().float().cpu() for k, v in full.items()}
    return state, log.rows, trainer


def test_ema_under_lightning_fsdp_on_one_gpu_equals_the_unsharded_run(no_tf32: None) -> None:
    start = flat(clone(net())).float()  # net() seeds itself: the initial weights of both runs
    plain, rows, _ = _fit_ema("auto")
    assert len(rows) == 10
    ema = start.clone()
    for w in rows:  # the EMA of the per-update weights, written out
        ema = DECAY * ema + (1 - DECAY) * w
    got_plain = torch.cat([plain[k].flatten() for k in sorted(plain) if k.startswith("model.")])
    want = torch.cat([v.flatten() for v in _by_name(ema, net())])
    torch.testing.assert_close(got_plain, want, rtol=0, atol=1e-5)
    assert float((ema - rows[-1]).norm()) > 1e-3  # the average is not the last weights
    try:
        sharded, _, trainer = _fit_ema("fsdp")
        assert "FSDP" in type(trainer.strategy).__name__
    finally:
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()  # the later tests of the session run without a group
    assert sharded.keys() == plain.keys()
    for k in plain:
        torch.testing.assert_close(sharded[k], plain[k], rtol=0, atol=1e-5, msg=lambda m, k=k: f"{k}: {m}")


def _by_name(vector: torch.Tensor, model: torch.nn.Module) -> list[torch.Tensor]:
    """A flat parameter vector cut into ``model``'s parameters, ordered like ``sorted("model." + name)``."""
    pieces, i = {}, 0
    for name, p in model.named_parameters():
        pieces["model." + name] = vector[i:i + p.numel()].view_as(p)
        i += p.numel()
    return [pieces[k] for k in sorted(pieces)]
