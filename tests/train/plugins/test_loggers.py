"""Loggers of a run: Weights & Biases offline (the recipe as config, the metrics)."""

from __future__ import annotations

import json
import struct

import pytest

from trickbag.recipe import load_recipe

BASE = [
    "data.name=fake", "data.num_samples=96", "data.batch_size=16", "train.epochs=1", "train.device=cpu",
    "log.tensorboard=false", "run.progress=false", "run.plots=false", "schedule.warmup_epochs=0",
    "model.kwargs={width: 8}", "optim.lr=0.1",
]


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
    from trickbag.runs.run import run_recipe

    monkeypatch.delenv("WANDB_MODE", raising=False)  # offline is the default
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wb"))
    (tmp_path / "wb").mkdir()
    recipe = load_recipe("digits", [*BASE, "log.wandb=true", "train.epochs=2", "log.every_steps=2",
                                    f"run.dir={tmp_path}", "run.name=wb"])
    result = run_recipe(recipe, quiet=True)
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
