"""TricksCallback beside Lightning's own EMA, in bf16 autocast, with the runtime audit, and resumed from Lightning's
own checkpoint."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.integrations.conftest import clone, data, flat, lightning_fit, loader, net

pytest.importorskip("lightning")

from trickbag.integrations.lightning import TricksCallback  # noqa: E402


def sgd(params: Any) -> torch.optim.Optimizer:
    return torch.optim.SGD(params, lr=0.2, momentum=0.9)


def test_import_trickbag_imports_no_framework() -> None:
    code = ("import sys, trickbag, trickbag.integrations, trickbag.integrations.core; "
            "bad = [m for m in ('lightning', 'pytorch_lightning', 'transformers') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_ema_against_lightnings_own_ema(lit: Any) -> None:
    """Lightning's EMAWeightAveraging starts its average at the weights after the first update (w1), trickbag's at
    the weights before training (w0); otherwise both are ema = d * ema + (1 - d) * w after every update. So after T
    updates trickbag's average minus Lightning's is exactly d^T (w0 - w1)."""
    try:
        from lightning.pytorch.callbacks import EMAWeightAveraging
    except ImportError:
        pytest.skip("this Lightning has no EMAWeightAveraging (it came with 2.6)")

    d, model = 0.7, net()
    ours = lit(clone(model), sgd)
    lightning_fit(ours, loader(data()), callbacks=[TricksCallback(tricks={"ema": {"decay": d, "warmup": False}})])
    theirs = lit(clone(model), sgd)
    lightning_fit(theirs, loader(data()), callbacks=[EMAWeightAveraging(decay=d, use_buffers=False)])
    first = lit(clone(model), sgd)
    lightning_fit(first, loader(data()), callbacks=[], max_steps=1)
    steps = 10  # 2 epochs of 5 batches
    expected = flat(theirs.model) + d**steps * (flat(model) - flat(first.model))
    torch.testing.assert_close(flat(ours.model), expected, rtol=0, atol=1e-6)


def test_bf16_autocast_on_cpu_runs_the_tricks(lit: Any) -> None:
    """bf16-mixed on the CPU: the tricks run under Lightning's autocast; the weights move and stay finite and the
    loss tricks see bf16 outputs."""
    model = net()
    module = lit(clone(model), sgd, use_loss=True)
    cb = TricksCallback(tricks={"ema": {"decay": 0.8}, "clip": {"max_norm": 0.5}, "label_smoothing": {"eps": 0.1}},
                        nonfinite="skip")
    lightning_fit(module, loader(data()), loader(data(), 20), callbacks=[cb], precision="bf16-mixed")
    assert cb.session.state.step == 10 and cb.session.guard.skipped == 0
    assert torch.isfinite(flat(module.model)).all() and not torch.equal(flat(module.model), flat(model))


def test_bf16_mixed_through_the_callback_stays_close_to_fp32(lit: Any) -> None:
    """The same run (EMA, mix, label smoothing, clip) in bf16-mixed and in fp32: autocast really ran (the weights
    differ) and it is the same training (they differ by less than bf16's rounding over 10 updates), as in the HF
    adapter's bf16 test."""
    tricks = {"ema": {"decay": 0.8}, "clip": {"max_norm": 0.5}, "label_smoothing": {"eps": 0.1},
              "mix": {"mixup_alpha": 0.4, "cutmix_alpha": 0.0}}
    model, runs = net(), {}
    for precision in ("bf16-mixed", "32-true"):
        module = lit(clone(model), sgd, use_loss=True)
        lightning_fit(module, loader(data()), callbacks=[TricksCallback(tricks=tricks, seed=3)], precision=precision)
        runs[precision] = flat(module.model)
    diff = float((runs["bf16-mixed"] - runs["32-true"]).abs().max())
    assert 0 < diff < 0.05, diff


def test_audit_reports_a_planted_mistake(lit: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """The planted mistake: training_step puts the module in eval mode (training in eval mode)."""
    module = lit(net(), sgd)
    step = module.training_step

    def eval_mode_step(batch: Any, batch_idx: int) -> torch.Tensor:
        module.eval()
        return step(batch, batch_idx)

    module.training_step = eval_mode_step
    cb = TricksCallback(tricks={"ema": {"decay": 0.8}}, audit=True)
    lightning_fit(module, loader(data()), callbacks=[cb], epochs=1)
    rules = {f.rule for f in cb.audit_report.findings}
    assert any("eval" in r for r in rules), rules


def test_clean_run_has_no_audit_findings(lit: Any) -> None:
    cb = TricksCallback(tricks={"ema": {"decay": 0.8}}, audit=True)
    lightning_fit(lit(net(), sgd), loader(data()), callbacks=[cb], epochs=1)
    assert [f.rule for f in cb.audit_report.findings] == []


def test_resume_at_an_epoch_end_equals_the_straight_run(lit: Any, tmp_path: Path) -> None:
    """EMA's shadow, mix's generator and the counters travel in Lightning's own checkpoint: a run of 1 epoch, then
    fit(ckpt_path=...) to 3, ends at the straight 3-epoch run's weights (bit for bit)."""
    from lightning.pytorch.callbacks import ModelCheckpoint

    tricks = {"ema": {"decay": 0.8}, "mix": {"mixup_alpha": 0.4, "cutmix_alpha": 0.0}}
    model = net()
    straight = lit(clone(model), sgd, use_loss=True)
    lightning_fit(straight, loader(data()), callbacks=[TricksCallback(tricks=tricks, seed=3)], epochs=3)

    first = lit(clone(model), sgd, use_loss=True)
    ckpt = ModelCheckpoint(dirpath=tmp_path, save_last=True)
    lightning_fit(first, loader(data()), callbacks=[TricksCallback(tricks=tricks, seed=3), ckpt], epochs=1,
                  enable_checkpointing=True)
    resumed = lit(clone(model), sgd, use_loss=True)
    import lightning.pytorch as pl

    trainer = pl.Trainer(max_epochs=3, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                         callbacks=[TricksCallback(tricks=tricks, seed=3)])
    trainer.fit(resumed, loader(data()), ckpt_path=str(tmp_path / "last.ckpt"))
    assert torch.equal(flat(resumed.model), flat(straight.model))


def test_a_checkpoint_from_before_the_loader_position_still_resumes(lit: Any, tmp_path: Path) -> None:
    """The callback's state written before it kept the loader's position (``loader``: a list of generator states, no
    ``seen``) resumes an in-order run at an epoch end to the straight run's weights."""
    from lightning.pytorch.callbacks import ModelCheckpoint

    tricks = {"ema": {"decay": 0.8}}
    model = net()
    straight = lit(clone(model), sgd)
    lightning_fit(straight, loader(data()), callbacks=[TricksCallback(tricks=tricks, seed=3)], epochs=2)
    first = lit(clone(model), sgd)
    lightning_fit(first, loader(data()), callbacks=[TricksCallback(tricks=tricks, seed=3),
                                                    ModelCheckpoint(dirpath=tmp_path, save_last=True)],
                  epochs=1, enable_checkpointing=True)
    ckpt = torch.load(tmp_path / "last.ckpt", weights_only=False)
    state = ckpt["callbacks"]["trickbag.TricksCallback"]
    state["loader"] = [None, None]  # the old layout
    del state["metrics"]
    torch.save(ckpt, tmp_path / "old.ckpt")
    resumed = lit(clone(model), sgd)
    import lightning.pytorch as pl

    trainer = pl.Trainer(max_epochs=2, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                         callbacks=[TricksCallback(tricks=tricks, seed=3)])
    trainer.fit(resumed, loader(data()), ckpt_path=str(tmp_path / "old.ckpt"))
    assert torch.equal(flat(resumed.model), flat(straight.model))


def test_sam_under_bf16_mixed_on_cpu(lit: Any) -> None:
    """SAM through Lightning's closure under bf16-mixed: both passes run (two forwards per update), the weights move
    and stay finite."""
    model = net()
    module = lit(clone(model), sgd)
    forwards = []
    module.model.register_forward_hook(lambda *a: forwards.append(1))
    cb = TricksCallback(tricks={"sam": {"rho": 0.05}, "clip": {"max_norm": 0.5}}, num_classes=3)
    lightning_fit(module, loader(data()), callbacks=[cb], precision="bf16-mixed", epochs=1)
    assert cb.session.state.step == 5 and len(forwards) == 10
    assert torch.isfinite(flat(module.model)).all() and not torch.equal(flat(module.model), flat(model))


def test_a_checkpoint_before_the_epochs_end_ends_that_epoch_on_resume(lit: Any, tmp_path: Path) -> None:
    """A checkpoint written at validation's end (``save_on_train_epoch_end=False``) comes after the epoch's last
    batch but before its end, and a resumed fit does not end that epoch again: the callback ends it for the tricks
    with the metrics saved at the checkpoint. Observable with ``schedule=`` plateau (patience 0, stepped at each
    epoch's end with ``val/loss``, here a constant, so every epoch after the first halves the LR): without that end
    the resumed plateau misses epoch 0, halves the LR one epoch later, and the weights differ from the straight
    run's."""
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import ModelCheckpoint

    def module(model: torch.nn.Module) -> Any:
        m = lit(clone(model), sgd)
        m.validation_step = lambda batch, batch_idx: m.log("val/loss", 1.0)
        return m

    def callback() -> TricksCallback:
        return TricksCallback(tricks={"ema": {"decay": 0.8}}, schedule={"name": "plateau", "patience": 0,
                                                                      "gamma": 0.5}, seed=3)

    model = net()
    straight, cb = module(model), callback()
    lightning_fit(straight, loader(data()), loader(data(), 20), callbacks=[cb], epochs=3)
    assert cb.session.state.scheduler.last_epoch == 3 and cb.session.state.lrs() == [0.05]  # 0.2 halved twice
    first = module(model)
    at_validations_end = ModelCheckpoint(dirpath=tmp_path, save_last=True, save_on_train_epoch_end=False)
    lightning_fit(first, loader(data()), loader(data(), 20), epochs=1, enable_checkpointing=True,
                  callbacks=[callback(), at_validations_end])
    saved = torch.load(tmp_path / "last.ckpt", weights_only=False)["callbacks"]["trickbag.TricksCallback"]
    assert saved["loader"]["seen"] == 5 and saved["counters"]["epoch"] == 0  # the last batch, before the end
    assert saved["scheduler"]["last_epoch"] == 0
    resumed, again = module(model), callback()
    trainer = pl.Trainer(max_epochs=3, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                         callbacks=[again])
    trainer.fit(resumed, loader(data()), loader(data(), 20), ckpt_path=str(tmp_path / "last.ckpt"))
    assert torch.equal(flat(resumed.model), flat(straight.model))
    assert again.session.state.scheduler.last_epoch == 3 and again.session.state.lrs() == [0.05]
