"""Evaluation and logging tricks from a recipe: flip TTA, torch.profiler traces, Weights & Biases (offline)."""

from __future__ import annotations

import json
import struct

import pytest
import torch
import torch.nn.functional as F

from trickbag.config import load_recipe
from trickbag.train.build import build
from trickbag.train.tricks.eval_tricks import flip_tta

BASE = [
    "data.name=fake", "data.num_samples=96", "data.batch_size=16", "train.epochs=1", "train.device=cpu",
    "log.tensorboard=false", "run.progress=false", "run.plots=false", "schedule.warmup_epochs=0",
    "model.kwargs={width: 8}", "optim.lr=0.1",
]


# --------------------------------------------------------------------------- TTA
def _naive_tta(model, x, flips, average):
    views = [x] + [torch.flip(x, dims=(d,)) for d in flips]
    outs = [model(v).double() for v in views]
    if average == "logits":
        return sum(outs) / len(outs)
    return torch.log(sum(torch.softmax(o, 1) for o in outs) / len(outs))


@pytest.mark.parametrize("average", ["probs", "logits"])
def test_flip_tta_matches_a_naive_average(average):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 4 * 5, 6))
    x = torch.randn(7, 3, 4, 5)
    got = flip_tta(model, x, hflip=True, vflip=True, average=average)
    torch.testing.assert_close(got.double(), _naive_tta(model, x, (-1, -2), average), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=r"vflip needs image batches \[N, C, H, W\]"):
        flip_tta(model, torch.randn(2, 3, 5), vflip=True)


def test_tta_evaluation_averages_flipped_predictions():
    recipe = load_recipe("digits", [*BASE, "tricks.tta.enabled=true"])
    trainer, ctx = build(recipe)
    state = trainer.fit()
    assert state.predict is None  # TTA is removed after each evaluation
    val = ctx.data.val
    x = torch.stack([val[i][0] for i in range(len(val))])
    y = torch.stack([torch.as_tensor(val[i][1]) for i in range(len(val))])
    model = trainer.model.eval()
    with torch.no_grad():
        tta = _naive_tta(model, x, (-1,), "probs")
        plain = model(x).double()
    m = state.history[-1]
    assert m["val/loss"] == pytest.approx(float(F.cross_entropy(tta, y)), rel=1e-5)
    assert m["val/acc"] == pytest.approx(float((tta.argmax(1) == y).double().mean()))
    assert m["val/loss"] != pytest.approx(float(F.cross_entropy(plain, y)), rel=1e-4)  # it did act
    # a later evaluation (the run's test) uses it too
    again = trainer.evaluate(ctx.val_loader)
    assert again["loss"] == pytest.approx(m["val/loss"], rel=1e-6)


# --------------------------------------------------------------------------- profiler
def test_profile_writes_a_chrome_trace_of_the_requested_steps(tmp_path):
    from trickbag.train.run import train_recipe

    recipe = load_recipe("digits", [*BASE, "tricks.profile.enabled=true", "tricks.profile.wait=1",
                                    "tricks.profile.warmup=1", "tricks.profile.steps=2",
                                    f"run.dir={tmp_path}", "run.name=prof"])
    result = train_recipe(recipe, quiet=True)
    trace = json.loads((result.run_dir / "profile" / "trace.json").read_text())
    steps = {e["name"] for e in trace["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")}
    assert steps == {"ProfilerStep#2", "ProfilerStep#3"}  # after 1 waiting and 1 warm-up update
    assert any(str(e.get("name", "")).startswith("aten::") for e in trace["traceEvents"])
    assert "Self CPU" in (result.run_dir / "profile" / "ops.txt").read_text()


# --------------------------------------------------------------------------- Weights & Biases
def _wandb_records(path):
    """Records of an offline ``run-*.wandb`` file: LevelDB log blocks of protobuf ``Record`` messages."""
    from wandb.proto import wandb_internal_pb2 as pb

    buf = path.read_bytes()
    assert buf[:4] == b":W&B"
    off, block, pending = 7, 32768, b""
    while off + 7 <= len(buf):
        left = block - off % block
        if left < 7:
            off += left
            continue
        _crc, n, kind = struct.unpack("<IHB", buf[off:off + 7])
        off += 7
        if kind == 0:
            off += left - 7
            continue
        pending += buf[off:off + n]
        off += n
        if kind in (1, 4):  # FULL or LAST chunk
            record = pb.Record()
            record.ParseFromString(pending)
            pending = b""
            yield record


def test_wandb_offline_logs_the_recipe_as_config_and_the_metrics(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    from trickbag.train.run import train_recipe

    monkeypatch.delenv("WANDB_MODE", raising=False)  # offline is the default
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wb"))
    (tmp_path / "wb").mkdir()
    recipe = load_recipe("digits", [*BASE, "log.wandb=true", "train.epochs=2", "log.every_steps=2",
                                    f"run.dir={tmp_path}", "run.name=wb"])
    result = train_recipe(recipe, quiet=True)
    files = list((tmp_path / "wb").glob("wandb/offline-run-*/run-*.wandb"))
    assert len(files) == 1
    config, history = {}, []
    for r in _wandb_records(files[0]):
        kind = r.WhichOneof("record_type")
        if kind in ("run", "config"):
            items = r.run.config.update if kind == "run" else r.config.update
            config.update({u.key: json.loads(u.value_json) for u in items})
        elif kind == "history":
            history.append({"/".join(i.nested_key) or i.key: json.loads(i.value_json) for i in r.history.item})
    expected = recipe.model_dump(mode="json")
    for section in ("data", "optim", "schedule", "train", "tricks"):
        assert config[section] == expected[section], section
    epoch_rows = [h for h in history if "val/acc" in h]
    assert [h["val/acc"] for h in epoch_rows] == pytest.approx([m["val/acc"] for m in result.history])
    assert [h["_step"] for h in epoch_rows] == [m["step"] for m in result.history]
    assert any("train/step_loss" in h for h in history)


# --------------------------------------------------------------------------- eval / predict of a finished run
def test_eval_and_predict_apply_the_recipes_tta_and_test_size_like_the_run(tmp_path):
    """`trickbag eval`/`predict` give the run's own test numbers: flip TTA at the FixRes test size."""
    import numpy as np
    from PIL import Image

    from trickbag.data.sources import build_data
    from trickbag.models import build_model
    from trickbag.train.checkpoint import load_checkpoint
    from trickbag.train.run import evaluate_run, predict_image, train_recipe

    recipe = load_recipe("digits", [
        "train.epochs=2", "model.kwargs={width: 4}", "log.tensorboard=false", "run.progress=false", "run.plots=false",
        f"run.dir={tmp_path}", "run.name=r", "tricks.tta.enabled=true", "tricks.tta.vflip=true",
        "tricks.multiscale.enabled=true", "tricks.multiscale.train_sizes=[8]", "tricks.multiscale.test_size=12",
    ])
    result = train_recipe(recipe, quiet=True)
    applied: list[str] = []
    m = evaluate_run(result.run_dir, device="cpu", tricks=applied)
    assert m["acc"] == pytest.approx(result.test["test/acc"], abs=0) and m["n"] == result.test["test/n"] == 360
    assert m["loss"] == pytest.approx(result.test["test/loss"], rel=1e-6)
    assert applied == ["test size 12x12 (tricks.multiscale)", "flip TTA: hflip + vflip, probs averaged (tricks.tta)"]

    # reference, written out here: best.pt's model, bilinear (antialiased) resize to 12, mean of 3 views' softmax
    ckpt = load_checkpoint(result.run_dir / "checkpoints" / "best.pt")
    data = build_data(recipe.data)
    model = build_model(recipe.model.name, data.input_shape, data.num_classes, **recipe.model.kwargs)
    model.load_state_dict(ckpt["model"])
    model.eval()
    x, y = torch.stack([data.test[i][0] for i in range(len(data.test))]), torch.tensor([data.test[i][1] for i in range(len(data.test))])

    def naive(xb):
        xb = F.interpolate(xb, size=(12, 12), mode="bilinear", align_corners=False, antialias=True)
        return torch.log(_naive_tta(model, xb, (-1, -2), "probs").exp())

    with torch.no_grad():
        logp = naive(x)
        plain_logits = model(x)
    assert m["acc"] == pytest.approx(float((logp.argmax(1) == y).double().mean()), abs=0)
    assert m["loss"] == pytest.approx(float(F.nll_loss(logp, y)), rel=1e-5)
    p = evaluate_run(result.run_dir, device="cpu", plain=True)
    assert p["acc"] == pytest.approx(float((plain_logits.argmax(1) == y).double().mean()), abs=0)
    assert p["loss"] == pytest.approx(float(F.cross_entropy(plain_logits, y)), rel=1e-5)

    # predict: the same wrapping on one PNG
    from sklearn.datasets import load_digits

    png = tmp_path / "digit.png"
    Image.fromarray((load_digits().images[7] * 255 / 16).round().astype(np.uint8), mode="L").save(png)
    with Image.open(png) as im:
        xi = data.predict_transform(im.copy()).unsqueeze(0)
    with torch.no_grad():
        want_tta, want_plain = naive(xi).exp()[0], torch.softmax(model(xi), 1)[0]
    for plain, want in ((False, want_tta), (True, want_plain)):
        ranked = predict_image(result.run_dir / "checkpoints" / "best.pt", png, top=10, plain=plain)
        for c, prob in ranked:
            assert prob == pytest.approx(float(want[int(c)]), abs=1e-5)
