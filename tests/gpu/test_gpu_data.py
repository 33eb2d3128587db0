"""Pinned host memory and non-blocking copies on CUDA: the recipe's loaders pin by default on the GPU, the
Trainer copies with ``non_blocking``, and the result is the same bits as unpinned, synchronous copies."""

from __future__ import annotations

import torch

from trickbag.recipe import load_recipe
from trickbag.train.build import build

from .helpers import CUDA_ONLY, FAKE, Hook, assert_identical, weights

pytestmark = CUDA_ONLY


def _run(*overrides: str):
    trainer, ctx = build(load_recipe("digits", [*FAKE, "train.epochs=2", "train.deterministic=true",
                                                "model.kwargs={width: 8, dropout: 0.2}", *overrides]))
    where = []
    trainer.add_plugin(Hook(batch_start=lambda s: where.append((s.batch[0].device.type, s.batch[1].device.type))))
    trainer.fit()
    return trainer, ctx, weights(trainer.model), where


def test_auto_pin_memory_on_cuda_pins_batches_and_trains_like_unpinned_copies():
    trainer, ctx, pinned, where = _run()  # data.pin_memory=auto: on, because train.device is cuda
    assert ctx.train_loader.pin_memory and ctx.val_loader.pin_memory
    x, y = next(iter(ctx.train_loader))
    assert x.is_pinned() and y.is_pinned() and not x.is_cuda
    assert where and set(where) == {("cuda", "cuda")}  # the Trainer moved every batch before BATCH_START
    _, ctx2, unpinned, _ = _run("data.pin_memory=false")
    assert not ctx2.train_loader.pin_memory
    assert not next(iter(ctx2.train_loader))[0].is_pinned()
    assert_identical(pinned, unpinned)


def test_pinned_loader_with_worker_processes_gives_the_same_training_as_no_workers():
    _, ctx, with_workers, where = _run("data.num_workers=2")
    assert ctx.train_loader.num_workers == 2 and ctx.train_loader.pin_memory
    assert set(where) == {("cuda", "cuda")}
    _, _, no_workers, _ = _run("data.num_workers=0")
    assert_identical(with_workers, no_workers)


def test_move_to_with_non_blocking_from_pinned_memory_copies_the_values():
    from trickbag import runtime

    src = {"x": torch.arange(1 << 20, dtype=torch.float32).pin_memory(), "n": [torch.ones(3).pin_memory()]}
    moved = runtime.move_to(src, torch.device("cuda"), non_blocking=True)
    torch.cuda.current_stream().synchronize()
    assert moved["x"].is_cuda and torch.equal(moved["x"].cpu(), src["x"]) and torch.equal(moved["n"][0].cpu(),
                                                                                          src["n"][0])
