"""A real CUDA out-of-memory error under ``micro_batch_size="auto"``: the update is redone at a smaller size, the
run finishes with the weights of explicit micro-batches of that size, and the failed attempt's memory is freed.

The process is held to a small share of the GPU (``set_per_process_memory_fraction``) so that a wide MLP's
activations for the whole batch do not fit and a quarter of them do, whatever the GPU's size."""

from __future__ import annotations

import gc

import pytest
import torch
from torch import nn

from trickbag.train.trainer import Trainer

from .helpers import CUDA_ONLY

pytestmark = CUDA_ONLY

WIDTH, BATCH, BUDGET = 4096, 16384, 2 << 30  # one activation of the whole batch: 256 MiB (fp32); ~10 per forward


def _model() -> nn.Module:
    torch.manual_seed(0)
    layers: list[nn.Module] = [nn.Linear(64, WIDTH)]
    for _ in range(6):
        layers += [nn.BatchNorm1d(WIDTH), nn.ReLU(), nn.Dropout(0.1), nn.Linear(WIDTH, WIDTH)]
    return nn.Sequential(*layers, nn.Linear(WIDTH, 4))


def _run(micro) -> tuple[Trainer, nn.Module]:
    g = torch.Generator().manual_seed(1)
    data = [(torch.randn(BATCH, 64, generator=g), torch.randint(0, 4, (BATCH,), generator=g)) for _ in range(2)]
    model = _model()
    torch.manual_seed(2)
    t = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.01), data, max_epochs=1, device="cuda",
                progress=False, micro_batch_size=micro)
    t.fit()
    return t, model


@pytest.fixture
def small_share():
    torch.cuda.empty_cache()
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, BUDGET / total))
    yield
    torch.cuda.set_per_process_memory_fraction(1.0)
    torch.cuda.empty_cache()


def test_a_real_cuda_out_of_memory_is_recovered_and_its_memory_freed(small_share) -> None:
    with pytest.raises(torch.OutOfMemoryError):  # the premise: the whole batch does not fit
        _run(None)
    gc.collect()  # the failed run's trainer and frames
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated()
    t, model = _run("auto")
    size = t.micro.size
    assert size is not None and size < BATCH and t.micro.halvings >= 1
    t.state.batch = t.state.output = t.state.loss = None
    kept = sum(p.numel() * p.element_size() for p in model.parameters()) * 2  # weights + gradients at most
    assert torch.cuda.memory_allocated() - base <= kept + (64 << 20), "the failed attempt's memory is still held"
    del t
    _, explicit = _run(size)
    for (k, a), b in zip(model.state_dict().items(), explicit.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5, msg=k)
