"""DDP on the CPU: 2 processes (gloo) against single-process references with the same global batch.

Data order: EpochSampler gives the single process the permutation ``perm`` and rank r the shard
``perm[r::2]``; with a per-rank batch B, update j of the 2-process run sees ``perm[2jB:2(j+1)B]``,
the same samples as update j of a 1-process run with batch 2B. DDP averages the ranks' mean-loss
gradients, which equals the gradient of the mean loss over the global batch (equal shards), so
the weights must match to float32 rounding. The models have no batch statistics, except in the
SyncBatchNorm test, where synchronised statistics make the 2-process run equal to plain
BatchNorm over the global batch.

All scenarios run in one 2-process job (see ddp_workers.py); a hang fails after a deadline.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as torch_dist

from . import ddp_workers as W

pytestmark = pytest.mark.skipif(not torch_dist.is_available() or not torch_dist.is_gloo_available(),
                                reason="torch built without distributed/gloo support")

ATOL = 1e-5


@pytest.fixture(scope="session")
def ddp(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Results of every scenario, computed once per test session (shared between xdist workers)."""
    names = list(W.SCENARIOS)
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return W.run_ranks(names, tmp_path_factory.mktemp("ddp"))
    shared = tmp_path_factory.getbasetemp().parent / "trickbag-ddp"
    shared.mkdir(exist_ok=True)
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the first worker runs the job; the other waits and reads
        done = shared / "results.pt"
        if not done.exists():
            results = W.run_ranks(names, shared / "job")
            torch.save(results, done)
        return torch.load(done, weights_only=False)  # noqa: TB403 (our own worker results)


def ranks(ddp: dict[str, Any], name: str) -> list[dict[str, Any]]:
    res = ddp[name]
    if isinstance(res, str):
        pytest.fail(f"DDP scenario {name!r}: {res}")
    return res


def assert_same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], atol: float = ATOL) -> None:
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k].double(), b[k].double(), atol=atol, rtol=0, msg=lambda m, k=k: f"{k}: {m}")


# --------------------------------------------------------------------------- equality with one process
def test_two_ranks_match_one_process_with_global_batch(ddp: dict[str, Any]) -> None:
    r0, r1 = ranks(ddp, "plain")
    ref = W.reference_run([])
    assert r0["model_type"] == "DistributedDataParallel"
    assert r0["steps"] == r1["steps"] == ref["steps"] == 2 * 8  # 64 samples / batch 8, 2 epochs
    assert_same_weights(r0["weights"], ref["weights"])
    assert_same_weights(r1["weights"], r0["weights"], atol=0.0)  # DDP keeps the replicas identical
    # train/loss and train/acc are over all ranks' samples, so they equal the 1-process values
    for h, href in zip(r0["history"], ref["history"]):
        for key in ("train/loss", "train/acc", "val/loss", "val/acc", "val/n"):
            assert h[key] == pytest.approx(href[key], abs=1e-5), key
    for h0, h1 in zip(r0["history"], r1["history"]):  # every rank reports the same metrics
        assert {k: v for k, v in h0.items() if "time" not in k and "per_s" not in k} == {
            k: v for k, v in h1.items() if "time" not in k and "per_s" not in k
        }


def test_accumulation_matches_one_process_and_all_reduces_once_per_update(ddp: dict[str, Any]) -> None:
    r0, r1 = ranks(ddp, "accumulate")
    ref = W.reference_run(["train.accumulate=3"])
    assert r0["steps"] == ref["steps"] == 2 * 3  # 8 micro-batches per epoch: groups of 3, 3, 2
    assert_same_weights(r0["weights"], ref["weights"])
    for calls in (r0["extra"], r1["extra"]):
        assert calls["micro_batches"] == 16
        # one all-reduce pass per optimizer update (no_sync on the other micro-batches), not one per micro-batch
        assert calls["passes"] == r0["steps"]
        assert calls["buckets"] >= calls["passes"]


def test_clipping_uses_the_full_all_reduced_gradient(ddp: dict[str, Any]) -> None:
    for name, overrides in (
        ("clip", ["train.clip=0.05"]),
        ("clip_trick", ["tricks.clip.enabled=true", "tricks.clip.max_norm=0.05", "tricks.grad_norm.enabled=true"]),
    ):
        r0, r1 = ranks(ddp, name)
        ref = W.reference_run(overrides)
        # the norm before clipping is the norm of the global-batch gradient, the same on every rank
        assert len(r0["grad_norms"]) == len(ref["grad_norms"]) == ref["steps"]
        torch.testing.assert_close(
            torch.tensor(r0["grad_norms"]), torch.tensor(ref["grad_norms"]), atol=1e-5, rtol=1e-5
        )
        assert r0["grad_norms"] == r1["grad_norms"]
        assert min(ref["grad_norms"]) > 0.05, f"{name}: clipping never engaged, the test would prove nothing"
        assert_same_weights(r0["weights"], ref["weights"])


def test_sam_under_ddp_matches_one_process(ddp: dict[str, Any]) -> None:
    r0, r1 = ranks(ddp, "sam")
    ref = W.reference_run(["tricks.sam.enabled=true", "tricks.sam.rho=0.1", "train.accumulate=2"])
    assert r0["steps"] == ref["steps"] == 2 * 4
    assert_same_weights(r0["weights"], ref["weights"])
    assert_same_weights(r1["weights"], r0["weights"], atol=0.0)


def test_ema_under_ddp_averages_the_same_weights_as_one_process(ddp: dict[str, Any]) -> None:
    r0, r1 = ranks(ddp, "ema")
    ref = W.reference_run(W.EMA)
    assert_same_weights(r0["weights"], ref["weights"])  # the EMA weights (copied in at the end of fit)
    assert_same_weights(r1["weights"], r0["weights"], atol=0.0)
    raw = ranks(ddp, "plain")[0]["weights"]  # the same run without EMA: the raw weights
    assert max((raw[k] - r0["weights"][k]).abs().max().item() for k in raw) > 1e-3, "EMA changed nothing"
    for h, href in zip(r0["history"], ref["history"]):  # validated with the EMA weights and with the raw ones
        for key in ("val/acc", "val/loss", "val/acc_raw", "val/loss_raw"):
            assert h[key] == pytest.approx(href[key], abs=1e-5), key


def test_mixup_cutmix_under_ddp_draws_per_rank_and_keeps_replicas_equal(ddp: dict[str, Any]) -> None:
    r0, r1 = ranks(ddp, "mix")
    from trickbag.runtime import trick_generator

    recipe = W.recipe(["tricks.mix.enabled=true"])
    for rank, r in enumerate((r0, r1)):  # each rank mixes with its own generator: different pairs and lambdas
        assert r["extra"]["generator_seed"] == trick_generator(recipe.train.seed, "mix", rank).initial_seed()
    assert r0["extra"]["generator_seed"] != r1["extra"]["generator_seed"]
    assert_same_weights(r0["weights"], r1["weights"], atol=0.0)  # one all-reduced update on every replica
    assert r0["steps"] == 16 and "train/acc" not in r0["history"][-1]  # soft targets: no train accuracy


def test_sync_batchnorm_layer_equals_batchnorm_on_the_concatenated_batch(ddp: dict[str, Any]) -> None:
    r0, r1 = ranks(ddp, "sync_bn_layer")
    x, w = W.sync_bn_layer_inputs()
    x.requires_grad_(True)
    bn = torch.nn.BatchNorm1d(3, momentum=0.3)  # torch's own layer over all 8 samples in one process
    with torch.no_grad():
        bn.weight.copy_(torch.tensor([0.5, 1.0, 2.0]))
        bn.bias.copy_(torch.tensor([0.1, -0.2, 0.3]))
    y = bn(x)
    (y * w).sum().backward()
    torch.testing.assert_close(torch.cat([r0["y"], r1["y"]]), y.detach(), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(torch.cat([r0["x_grad"], r1["x_grad"]]), x.grad, atol=1e-5, rtol=1e-5)
    # parameter gradients: each rank holds its own samples' share; their sum is the full gradient
    torch.testing.assert_close(r0["weight_grad"] + r1["weight_grad"], bn.weight.grad, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(r0["bias_grad"] + r1["bias_grad"], bn.bias.grad, atol=1e-5, rtol=1e-5)
    for r in (r0, r1):
        torch.testing.assert_close(r["running_mean"], bn.running_mean, atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(r["running_var"], bn.running_var, atol=1e-5, rtol=1e-5)  # unbiased, n = 40


def test_sync_batchnorm_trains_like_batchnorm_over_the_global_batch(ddp: dict[str, Any]) -> None:
    r0, r1 = ranks(ddp, "sync_bn")
    assert "trickbag.train.distributed.SyncBatchNorm" in r0["modules"]
    assert not any(m.endswith(("BatchNorm1d", "BatchNorm2d")) for m in r0["modules"])
    ref = W.reference_run(["model.kwargs={kind: bn}"])  # plain BatchNorm, one process, batch 8
    assert any(m.endswith("BatchNorm2d") for m in ref["modules"])
    # weights and running statistics (global mean, unbiased global variance) match the reference
    assert_same_weights(r0["weights"], ref["weights"])
    assert_same_weights(r1["weights"], r0["weights"], atol=0.0)


# --------------------------------------------------------------------------- evaluation
def test_uneven_validation_shards_count_every_sample_once(ddp: dict[str, Any]) -> None:
    r0, r1 = ranks(ddp, "eval_uneven")
    assert r0["val_size"] == 13 and (r0["batches"], r1["batches"]) == (3, 2)  # uneven batch counts, no hang
    for r in (r0, r1):
        m = r["metrics"]
        assert m["n"] == 13
        assert m["acc"] == pytest.approx(r0["naive_acc"], abs=1e-6)  # torchmetrics: float32
        assert m["loss"] == pytest.approx(r0["naive_loss"], abs=1e-6)
    # and the same as a 1-process evaluation of the same (seeded, untrained) model
    from trickbag.train.build import build

    trainer, ctx = build(W.recipe(["data.num_samples=80", "data.val_fraction=0.2", "data.eval_batch_size=3",
                                   "model.kwargs={kind: bn}"]))
    one = trainer.evaluate(ctx.val_loader)
    assert one["n"] == 13 and one["acc"] == r0["metrics"]["acc"]
    assert one["loss"] == pytest.approx(r0["metrics"]["loss"], abs=1e-6)


# --------------------------------------------------------------------------- seeds
def test_model_init_agrees_and_rng_streams_differ_per_rank(ddp: dict[str, Any]) -> None:
    r0, r1 = ranks(ddp, "seeds")
    assert_same_weights(r0["weights"], r1["weights"], atol=0.0)
    from trickbag.train.build import build

    _, ctx = build(W.recipe(["train.seed=11"]))  # one process, same seed: the same initial model
    assert_same_weights(r0["weights"], W.weights(ctx.model), atol=0.0)
    for rank, r in enumerate((r0, r1)):  # each rank continues from seed + rank after the model is built
        torch.manual_seed(11 + rank)
        assert torch.equal(r["torch"], torch.rand(4))
        assert r["loader_seed"] == 11 + rank
    assert not torch.equal(r0["torch"], r1["torch"])
    assert r0["python"] != r1["python"] and r0["numpy"] != r1["numpy"]


# --------------------------------------------------------------------------- stopping
def test_early_stopping_stops_both_ranks_at_the_same_epoch(ddp: dict[str, Any]) -> None:
    r0, r1 = ranks(ddp, "early_stop")
    ref = W.reference_run(["train.epochs=6", "train.early_stopping_patience=1", "train.monitor=val/loss",
                           "train.mode=max"])
    assert len(ref["history"]) < 6, "the reference did not stop early; the test would prove nothing"
    assert len(r0["history"]) == len(r1["history"]) == len(ref["history"])
    assert r0["stop_reason"] == r1["stop_reason"] and r0["stop_reason"].startswith("early stopping")


def test_a_stop_decided_on_rank_0_mid_epoch_stops_every_rank(ddp: dict[str, Any]) -> None:
    r0, r1 = ranks(ddp, "rank0_stops_mid_epoch")
    assert r0["steps"] == r1["steps"] == 3
    assert r0["stop_reason"] == r1["stop_reason"] == "stopped by a plug-in: budget: 3 updates"
    assert r0["history"] == [] and r1["history"] == []  # no epoch finished
    assert_same_weights(r0["weights"], r1["weights"], atol=0.0)


def test_a_stop_decided_on_rank_0_at_epoch_end_stops_every_rank(ddp: dict[str, Any]) -> None:
    r0, r1 = ranks(ddp, "rank0_stops_at_epoch_end")
    assert len(r0["history"]) == len(r1["history"]) == 1
    assert r0["steps"] == r1["steps"] == 8
    assert r0["stop_reason"] == r1["stop_reason"] == "stopped by a plug-in: budget: 1 epochs"


# --------------------------------------------------------------------------- runs, files, resume
def test_only_rank_0_writes_and_prints(ddp: dict[str, Any]) -> None:
    r0, r1 = ranks(ddp, "runs")
    assert r0["run_dir"] == r1["run_dir"]  # default name (with a timestamp) decided once, by rank 0
    writers = {"CSVLogger", "TensorBoardLogger", "Plots", "ProgressBar", "Checkpointing"}
    assert writers <= set(r0["plugins"])
    assert not writers & set(r1["plugins"])
    assert r1["writes"] == [] and any(".last.pt." in w for w in r0["writes"])
    assert r1["printed"] == ""
    run_dir = Path(r0["run_dir"])
    for f in ("recipe.yaml", "metrics.csv", "summary.txt", "curves.png", "checkpoints/last.pt", "checkpoints/best.pt"):
        assert (run_dir / f).is_file(), f
    assert any((run_dir / "tb").iterdir())


def test_start_of_run_reports_effective_batch_and_linear_scaling(ddp: dict[str, Any]) -> None:
    printed = ranks(ddp, "runs")[0]["printed"]
    lr, base, eff = 0.1, W.PER_RANK_BATCH, W.PER_RANK_BATCH * W.WORLD
    assert f"effective batch {eff} = {base} per process x 1 accumulation step x 2 processes" in printed
    assert f"suggests optim.lr={lr * eff / base:g}" in printed


def test_resume_under_ddp_continues_exactly(ddp: dict[str, Any]) -> None:
    r0, r1 = ranks(ddp, "runs")  # rank 1 was refused every read of the run directory during the resume
    assert r0["resumed_dir"] == r0["run_dir"]
    from trickbag.train.checkpoint_files import load_checkpoint

    resumed = load_checkpoint(Path(r0["resumed_dir"]) / "checkpoints" / "last.pt")
    straight = load_checkpoint(Path(r0["straight_dir"]) / "checkpoints" / "last.pt")
    assert resumed["counters"]["epoch"] == straight["counters"]["epoch"] == 3
    assert_same_weights(resumed["model"], straight["model"])
    assert [h["train/loss"] for h in r0["history_resumed"]] == pytest.approx(
        [h["train/loss"] for h in r0["history_straight"]], abs=1e-6
    )
    assert r0["test_resumed"] == r1["test_resumed"]  # both ranks tested the same best.pt
    assert r0["test_resumed"]["test/n"] == 20


def test_uneven_micro_batches_over_uneven_shards_give_the_big_batch_update(ddp):
    """Exact accumulation across processes: each micro-batch weighted by its count, the update divided by the
    count summed over ranks, so 2 processes with [4, 2] and [3, 1] samples step as one 10-sample batch."""
    import torch.nn.functional as F
    from torch import nn

    r0, r1 = ranks(ddp, "exact_accumulation")
    ref = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    ref.load_state_dict(r0["init"])
    F.cross_entropy(ref(r0["x"]), r0["y"]).backward()
    with torch.no_grad():
        for p in ref.parameters():
            p -= 0.5 * p.grad
    assert_same_weights(ref.state_dict(), r0["weights"], atol=1e-6)
    assert_same_weights(ref.state_dict(), r1["weights"], atol=1e-6)


def test_muon_under_ddp_matches_one_process_with_the_global_batch(ddp):
    r0, r1 = ranks(ddp, "muon")
    ref = W.reference_run(["optim.name=muon", "optim.lr=0.01"])
    assert_same_weights(r0["weights"], ref["weights"])
    assert_same_weights(r1["weights"], r0["weights"], atol=0.0)



def test_micro_batch_auto_halves_on_every_rank_when_one_runs_out_of_memory(ddp: dict[str, Any]) -> None:
    """Rank 1 alone raises the out-of-memory error (8 > 3, then 4 > 3): no hang, both ranks end at 2, the same
    weights on both, equal to explicit micro-batches of 2 under DDP."""
    r0, r1 = ranks(ddp, "micro_auto_oom_on_rank1")
    assert r0["auto"]["raised"] == [] and r1["auto"]["raised"] == [8, 4]
    assert r0["auto"]["size"] == r1["auto"]["size"] == 2
    params = [k for k in r0["auto"]["weights"] if "running" not in k and "tracked" not in k]  # buffers are per rank
    assert_same_weights({k: r0["auto"]["weights"][k] for k in params}, {k: r1["auto"]["weights"][k] for k in params},
                        atol=0)
    assert r1["2"]["raised"] == []
    assert_same_weights(r0["auto"]["weights"], r0["2"]["weights"])


def test_spike_planted_on_one_rank_is_skipped_by_every_rank(ddp: dict[str, Any]) -> None:
    """train.spike=skip judges the loss averaged over the processes: a spike in rank 1's batch alone makes both
    ranks skip that update, so the weights stay the same on both."""
    r0, r1 = ranks(ddp, "spike_on_rank1")
    assert r0["spikes"] == r1["spikes"] == 2 and r0["skipped"] == r1["skipped"] == 2
    assert_same_weights(r0["weights"], r1["weights"], atol=0)
