"""Cases a reviewer found by running both adapters on models and settings of their own (tokens, HF models with their
own loss rules, max_steps, evaluation inside a loss trick, double averaging). Each test pins what the adapter now does,
against an independent reference where one exists (torch's cross-entropy, a cosine written out, the same run without
the adapter's trick)."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from tests.integrations.conftest import data, flat, lightning_fit, loader, net

sys.path.insert(0, str(Path(__file__).parent))


def sgd(params: Any) -> torch.optim.Optimizer:
    return torch.optim.SGD(params, lr=0.1)


# ---------------------------------------------------------------- Lightning
pl = pytest.importorskip("lightning.pytorch")

from trickbag.errors import RecipeError  # noqa: E402
from trickbag.integrations.lightning import TricksCallback  # noqa: E402


class LRs(pl.Callback):
    def __init__(self) -> None:
        self.lrs: list[float] = []

    def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
        self.lrs.append(trainer.optimizers[0].param_groups[0]["lr"])


@pytest.mark.parametrize(("kw", "updates"), [({"max_epochs": 2, "limit_train_batches": 2}, 4),
                                             ({"max_epochs": -1, "max_steps": 3}, 3),
                                             ({"max_epochs": 3, "max_steps": 4}, 4)],
                         ids=["limit_train_batches", "max_steps", "both"])
def test_schedule_spans_the_updates_lightning_runs(lit: Any, kw: dict, updates: int) -> None:
    """schedule= cosine (no warm-up) over the updates Lightning runs, whatever bounds them: after update k of T the LR
    is lr * (1 + cos(pi k / T)) / 2, reaching 0 at the last one."""
    log = LRs()
    cb = TricksCallback(schedule={"name": "cosine", "warmup_epochs": 0})
    epochs = kw.pop("max_epochs")
    lightning_fit(lit(net(), sgd), loader(data()), callbacks=[cb, log], epochs=epochs, **kw)
    total = len(log.lrs)
    assert total == updates
    want = [0.1 * (1 + math.cos(math.pi * k / total)) / 2 for k in range(1, total + 1)]
    assert log.lrs == pytest.approx(want, abs=1e-9)


def test_lightning_ema_beside_lightnings_own_averaging_is_refused(lit: Any) -> None:
    from lightning.pytorch.callbacks import EMAWeightAveraging

    with pytest.raises(RecipeError, match="averag") as e:
        lightning_fit(lit(net(), sgd), loader(data()), epochs=1,
                      callbacks=[TricksCallback(tricks={"ema": {"decay": 0.9}}), EMAWeightAveraging(decay=0.9)])
    assert "\n" not in str(e.value)


class TokenModule(pl.LightningModule):
    """A token classifier: ``forward(input_ids)`` (an embedding), batches ``(ids, y)``; its validation loss through
    ``self.trickbag_loss``."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.emb, self.head = nn.Embedding(20, 8), nn.Linear(8, 3)
        self.val_losses: list[tuple[float, float]] = []

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.emb(ids).mean(1))

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        return self.trickbag_loss(self(batch[0]), batch[1])

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        out = self(batch[0])
        self.val_losses.append((float(self.trickbag_loss(out, batch[1])),
                                float(nn.functional.cross_entropy(out, batch[1]))))

    def configure_optimizers(self) -> Any:
        return sgd(self.parameters())


def tokens(n: int = 32) -> Any:
    g = torch.Generator().manual_seed(1)
    return torch.utils.data.TensorDataset(torch.randint(0, 20, (n, 5), generator=g),
                                          torch.randint(0, 3, (n,), generator=g))


def test_a_token_model_trains_with_tricks_and_validation_loss_is_the_plain_loss() -> None:
    """The class count is probed with a zero float sample, which an embedding cannot take: the tricks that do not
    need it (label smoothing, EMA) train; the validation loss through trickbag_loss is cross-entropy of the given
    targets (torch's), not the smoothed training loss."""
    module = TokenModule()
    cb = TricksCallback(tricks={"label_smoothing": {"eps": 0.2}, "ema": {"decay": 0.9}}, num_classes=None)
    lightning_fit(module, loader(tokens()), loader(tokens(16)), callbacks=[cb], epochs=1)
    assert module.val_losses and all(a == pytest.approx(b, abs=1e-6) for a, b in module.val_losses)
    assert cb.session.state.step == 4


def test_mix_on_a_model_whose_class_count_cannot_be_probed_says_how(lit: Any) -> None:
    """A forward whose output is a dict without logits: the class count is unknown, and mix (which needs it) says
    how to give it; with num_classes= it trains."""

    class Scores(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = net()

        def forward(self, x: torch.Tensor) -> Any:
            return {"scores": self.net(x)}

    class Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.model = Scores()

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            return self.trickbag_loss(self.model(batch[0])["scores"], batch[1])

        def configure_optimizers(self) -> Any:
            return sgd(self.parameters())

    mix = {"mix": {"mixup_alpha": 0.4, "cutmix_alpha": 0.0}}
    with pytest.raises(RecipeError, match="num_classes=") as e:
        lightning_fit(Module(), loader(data()), callbacks=[TricksCallback(tricks=mix)], epochs=1)
    assert "\n" not in str(e.value)
    cb = TricksCallback(tricks=mix, num_classes=3)
    lightning_fit(Module(), loader(data()), callbacks=[cb], epochs=1)
    assert cb.session.state.step == 5


def test_trickbag_loss_in_validation_does_not_touch_training(lit: Any) -> None:
    """Mix + the guard, validation mid-epoch calling trickbag_loss on a NaN batch: training's weights equal the same
    run whose validation computes plain cross-entropy (the guard vetoes nothing, mix's targets are not read)."""
    import copy

    class Val(pl.LightningModule):
        def __init__(self, via_tricks: bool) -> None:
            super().__init__()
            self.model, self.via = net(), via_tricks

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.model(x)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            return self.trickbag_loss(self(batch[0]), batch[1])

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            out = self(batch[0])
            loss = self.trickbag_loss(out, batch[1]) if self.via else nn.functional.cross_entropy(out, batch[1])
            self.log("val_loss", loss)

        def configure_optimizers(self) -> Any:
            return sgd(self.parameters())

    val = data(16, seed=3)
    val.tensors[0][0] = float("nan")
    got = []
    for via in (True, False):
        module = Val(via)
        cb = TricksCallback(tricks={"mix": {"mixup_alpha": 0.4, "cutmix_alpha": 0.0}}, nonfinite="skip", seed=0)
        lightning_fit(module, loader(data()), loader(val), callbacks=[cb], epochs=2, val_check_interval=2,
                      accumulate_grad_batches=1)
        assert cb.session.state.skipped_steps == 0
        got.append(copy.deepcopy(flat(module.model)))
    assert torch.equal(got[0], got[1])


# ---------------------------------------------------------------- Hugging Face
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from hf_models import HFNet, hf_args, hf_dataset  # noqa: E402
from hf_models import data as hf_data  # noqa: E402

from trickbag.errors import ConflictError  # noqa: E402
from trickbag.integrations.hf import TricksCallback as HFCallback  # noqa: E402
from trickbag.integrations.hf import TricksTrainer  # noqa: E402


def tiny_vit() -> Any:
    from transformers import ViTConfig, ViTForImageClassification

    torch.manual_seed(0)
    return ViTForImageClassification(ViTConfig(image_size=4, patch_size=2, num_channels=2, hidden_size=16,
                                               num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                                               num_labels=3))


def test_hf_mix_alone_trains_with_the_tricks_soft_cross_entropy(tmp_path: Path) -> None:
    """Mix alone makes float targets, which an HF classifier's own loss takes for multi-label (BCE): the tricks'
    loss is installed, the model stays single-label, and evaluation's loss is cross-entropy (torch's, by hand)."""
    model = tiny_vit()
    x, y = hf_data(24)
    t = TricksTrainer(model=model, args=hf_args(str(tmp_path), num_train_epochs=1), train_dataset=hf_dataset(x, y),
                      callbacks=[HFCallback({"mix": {"mixup_alpha": 0.4, "cutmix_alpha": 0.0}})])
    t.train()
    assert t.compute_loss_func is not None and model.config.problem_type != "multi_label_classification"
    got = t.evaluate(hf_dataset(x, y))["eval_loss"]
    model.eval()
    with torch.no_grad():
        want = float(nn.functional.cross_entropy(model(pixel_values=x).logits, y))
    assert got == pytest.approx(want, abs=1e-5)


class LRCallback(transformers.TrainerCallback):
    def __init__(self) -> None:
        self.lrs: list[float] = []

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self.lrs.append(kw["optimizer"].param_groups[0]["lr"])


@pytest.mark.parametrize("kw", [{"max_steps": 5}, {"num_train_epochs": 1.5}, {"dataloader_drop_last": True}],
                         ids=["max_steps", "fractional-epochs", "drop_last"])
def test_hf_schedule_spans_the_updates_hf_runs(kw: dict, tmp_path: Path) -> None:
    log = LRCallback()
    x, y = hf_data(44)
    args = hf_args(str(tmp_path), **{"num_train_epochs": 2, **kw})
    TricksTrainer(model=HFNet(), args=args, train_dataset=hf_dataset(x, y),
                  callbacks=[HFCallback({}, schedule={"name": "cosine", "warmup_epochs": 0}), log]).train()
    total = len(log.lrs)
    want = [0.01 * (1 + math.cos(math.pi * k / total)) / 2 for k in range(1, total + 1)]
    assert log.lrs == pytest.approx(want, abs=1e-9)


def test_hf_evaluation_losses_do_not_feed_the_guard(tmp_path: Path) -> None:
    """A NaN in the evaluation set, evaluated every step, with a loss trick and the guard: no training update is
    vetoed, and training ends where the same run without evaluation ends."""
    x, y = hf_data(24)
    ex, ey = hf_data(8, seed=5)
    ex[0, 0, 0, 0] = float("nan")
    weights = []
    for evaluate in (True, False):
        torch.manual_seed(0)
        model = HFNet()
        cb = HFCallback({"label_smoothing": {"eps": 0.1}}, nonfinite="skip")
        extra = {"eval_strategy": "steps", "eval_steps": 1} if evaluate else {}
        TricksTrainer(model=model, args=hf_args(str(tmp_path), num_train_epochs=1, **extra),
                      train_dataset=hf_dataset(x, y), eval_dataset=hf_dataset(ex, ey), callbacks=[cb]).train()
        assert cb.run.state.skipped_steps == 0 and cb.run.state.step == 3
        weights.append(flat(model))
    assert torch.equal(weights[0], weights[1])


def test_hf_ema_with_load_best_model_at_end_is_refused(tmp_path: Path) -> None:
    x, y = hf_data(16)
    args = hf_args(str(tmp_path), eval_strategy="epoch", save_strategy="epoch", load_best_model_at_end=True)
    t = TricksTrainer(model=HFNet(), args=args, train_dataset=hf_dataset(x, y), eval_dataset=hf_dataset(x, y),
                      callbacks=[HFCallback({"ema": {"decay": 0.9}})])
    with pytest.raises(ConflictError, match="load_best_model_at_end") as e:
        t.train()
    assert "\n" not in str(e.value)


def test_hf_layer_decay_keeps_hfs_no_decay_for_biases_and_norms(tmp_path: Path, capsys: Any) -> None:
    class Normed(HFNet):
        def __init__(self) -> None:
            super().__init__()
            self.norm = nn.LayerNorm(3)

        def forward(self, pixel_values: torch.Tensor, labels: Any = None, **kw: Any) -> Any:  # type: ignore[override]
            out = super().forward(pixel_values, labels, **kw)
            return {**out, "logits": self.norm(out["logits"])}

    model = Normed()
    x, y = hf_data(16)
    t = TricksTrainer(model=model, args=hf_args(str(tmp_path), num_train_epochs=1, weight_decay=0.01),
                      train_dataset=hf_dataset(x, y), callbacks=[HFCallback({"layer_decay": {"decay": 0.5}})])
    t.train()
    decay = {id(p): g["weight_decay"] for g in t.optimizer.param_groups for p in g["params"]}
    for name, p in model.named_parameters():
        want = 0.0 if name.endswith("bias") or name.startswith("norm.") else 0.01
        assert decay[id(p)] == want, name
    assert "no_decay_bias_norm" in capsys.readouterr().err


@pytest.mark.parametrize("save_on_train_epoch_end", [False, True])
def test_resume_from_the_checkpoint_validation_wrote_after_the_last_batch_is_exact(
        tmp_path: Path, save_on_train_epoch_end: bool) -> None:
    """ModelCheckpoint at validation's end (after the epoch's last batch, before its end), a loader without its own
    generator (its iterators draw their seeds from the global RNG), dropout, EMA and a plateau schedule stepped at
    each epoch's end (a constant validation metric: it halves the LR every epoch after the first): the resumed run is
    the straight run bit for bit. (An extra iterator made on resume for the already-finished epoch drew from the
    global RNG and moved every later dropout mask; ending that epoch twice would step the plateau once more.)"""
    from lightning.pytorch.callbacks import ModelCheckpoint

    class Drop(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(7)
            self.net = nn.Sequential(nn.Flatten(), nn.Linear(6, 8), nn.Dropout(0.3), nn.Linear(8, 3))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.net(x)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            return nn.functional.cross_entropy(self(batch[0]), batch[1])

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            self.log("val/loss", 1.0)

        def configure_optimizers(self) -> Any:
            return sgd(self.parameters())

    def fit(folder: Path, ckpt: Any = None) -> torch.Tensor:
        module = Drop()
        ck = ModelCheckpoint(dirpath=folder, save_top_k=-1, filename="{epoch}-{step}",
                             save_on_train_epoch_end=save_on_train_epoch_end)
        cb = TricksCallback(tricks={"ema": {"decay": 0.8}}, schedule={"name": "plateau", "patience": 0, "gamma": 0.5},
                            seed=3)
        trainer = pl.Trainer(max_epochs=3, accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                             enable_model_summary=False, num_sanity_val_steps=0, callbacks=[cb, ck])
        trainer.fit(module, loader(data()), loader(data(8, seed=9)), ckpt_path=ckpt)
        assert cb.session.state.lrs() == [0.025]  # 0.1 halved at the ends of epochs 1 and 2
        return flat(module.net)

    straight = fit(tmp_path / "a")
    resumed = fit(tmp_path / "b", ckpt=tmp_path / "a" / "epoch=0-step=5.ckpt")
    assert torch.equal(straight, resumed)


def test_lightning_checkpoints_hold_the_averaged_weights_validation_scored(tmp_path: Path) -> None:
    """EMA with ModelCheckpoint(monitor="val_loss"): the best checkpoint's weights are the ones its score was measured
    on (validate(ckpt_path=best) gives best_model_score again; a LightningModule loaded from it holds them), and the
    raw weights training goes on from are kept beside them."""
    from lightning.pytorch.callbacks import ModelCheckpoint

    from trickbag.integrations.lightning import RAW_KEY

    class Val(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.model = net()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.model(x)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            return nn.functional.cross_entropy(self(batch[0]), batch[1])

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            self.log("val_loss", nn.functional.cross_entropy(self(batch[0]), batch[1]))

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.5)

    ck = ModelCheckpoint(dirpath=tmp_path, monitor="val_loss", save_top_k=1)
    module = Val()
    trainer = pl.Trainer(max_epochs=3, accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                         enable_model_summary=False, num_sanity_val_steps=0,
                         callbacks=[TricksCallback(tricks={"ema": {"decay": 0.5, "warmup": False}}), ck])
    trainer.fit(module, loader(data()), loader(data(16, seed=4)))
    best = torch.load(ck.best_model_path, weights_only=False)
    assert RAW_KEY in best and any(not torch.equal(best["state_dict"][k], best[RAW_KEY][k]) for k in best[RAW_KEY])
    checker = pl.Trainer(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                         enable_model_summary=False)
    (got,) = checker.validate(Val(), loader(data(16, seed=4)), ckpt_path=ck.best_model_path, verbose=False)
    assert got["val_loss"] == pytest.approx(float(ck.best_model_score), abs=1e-6)


def test_a_checkpoint_inside_an_accumulated_update_is_said_once(lit: Any, tmp_path: Path, capsys: Any) -> None:
    """Validation (and its checkpoint) every 3 batches under accumulate_grad_batches=2: the checkpoint after batch 3
    is inside an update, whose partial gradients a Lightning checkpoint does not hold: one line says so, once."""
    from lightning.pytorch.callbacks import ModelCheckpoint

    module = lit(net(), sgd)
    ck = ModelCheckpoint(dirpath=tmp_path, save_top_k=-1, filename="{step}", save_on_train_epoch_end=False)
    lightning_fit(module, loader(data()), loader(data(8, seed=2)), callbacks=[TricksCallback(), ck], epochs=1,
                  accumulate_grad_batches=2, val_check_interval=3, enable_checkpointing=True)
    err = [line for line in capsys.readouterr().err.splitlines() if "inside an accumulated update" in line]
    assert len(err) == 1 and "after micro-batch 1 of 2" in err[0]
