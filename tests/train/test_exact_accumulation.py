"""Exact accumulation: however a batch is split into micro-batches (uneven sizes, a short last one, a loss that
averages over valid tokens), the accumulated update is the one big batch's, to fp32 rounding. The reference is
one optimizer step on the whole batch, computed here with plain torch. (2 gloo processes: tests/distributed.)"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from trickbag.train.tasks import Task
from trickbag.train.trainer import Trainer


def _big_batch_step(model: torch.nn.Module, loss: torch.Tensor, lr: float) -> None:
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= lr * p.grad


def _same(a: torch.nn.Module, b: torch.nn.Module) -> None:
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        torch.testing.assert_close(p, q, atol=1e-6, rtol=0, msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.parametrize("n, batch, accumulate", [(10, 4, 3), (7, 3, 3), (9, 2, 5), (5, 4, 2)])
def test_uneven_micro_batches_give_the_big_batch_update(n, batch, accumulate):
    """n samples in micro-batches of `batch` (the last one short), all in one update of `accumulate`."""
    torch.manual_seed(0)
    x, y = torch.randn(n, 6), torch.randint(0, 3, (n,))
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    ref = copy.deepcopy(model)
    loader = DataLoader(TensorDataset(x, y), batch_size=batch)
    assert len(loader) <= accumulate  # one update
    Trainer(model, torch.optim.SGD(model.parameters(), lr=0.5), loader, accumulate=accumulate, device="cpu",
            progress=False).fit()
    _big_batch_step(ref, F.cross_entropy(ref(x), y), lr=0.5)
    _same(ref, model)


def test_a_short_last_update_is_the_mean_over_its_own_samples():
    """8 samples, micro-batches of 3, accumulate 2: updates over samples 0-5 and 6-7 (one short micro-batch)."""
    torch.manual_seed(1)
    x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
    model = torch.nn.Linear(4, 2)
    ref = copy.deepcopy(model)
    Trainer(model, torch.optim.SGD(model.parameters(), lr=0.3), DataLoader(TensorDataset(x, y), batch_size=3),
            accumulate=2, device="cpu", progress=False).fit()
    for part in (slice(0, 6), slice(6, 8)):
        ref.zero_grad()
        _big_batch_step(ref, F.cross_entropy(ref(x[part]), y[part]), lr=0.3)
    _same(ref, model)


class Tokens(Task):
    """Next-token style: outputs [N, T, V], targets [N, T] with -100 where there is no token."""

    name = "tokens"

    def loss(self, output, target):
        return F.cross_entropy(output.flatten(0, 1), target.flatten(), ignore_index=-100)

    def loss_count(self, output, target):
        return (target != -100).sum()  # a tensor: no host sync


def test_a_task_counting_valid_tokens_gives_the_big_batch_token_mean():
    torch.manual_seed(2)
    x, y = torch.randn(6, 5, 4), torch.randint(0, 7, (6, 5))
    y[0, 2:] = -100  # micro-batches hold 6, 10 and 8 valid tokens: a per-micro-batch mean would be wrong
    y[1, :1] = -100
    y[4, 3:] = -100
    model = torch.nn.Linear(4, 7)
    ref = copy.deepcopy(model)
    Trainer(model, torch.optim.SGD(model.parameters(), lr=0.5), DataLoader(TensorDataset(x, y), batch_size=2),
            task=Tokens(), accumulate=3, device="cpu", progress=False).fit()
    _big_batch_step(ref, Tokens().loss(ref(x), y), lr=0.5)
    _same(ref, model)


def test_equal_micro_batches_keep_the_plain_loss_over_accumulate():
    """Full micro-batches: nothing is rescaled (bit for bit the usual loss / accumulate loop)."""
    torch.manual_seed(3)
    x, y = torch.randn(12, 4), torch.randint(0, 2, (12,))
    model = torch.nn.Linear(4, 2)
    ref = copy.deepcopy(model)
    Trainer(model, torch.optim.SGD(model.parameters(), lr=0.3),
            DataLoader(TensorDataset(x, y), batch_size=4), accumulate=3, device="cpu", progress=False).fit()
    opt = torch.optim.SGD(ref.parameters(), lr=0.3)
    for i in range(3):
        (F.cross_entropy(ref(x[4 * i:4 * i + 4]), y[4 * i:4 * i + 4]) / 3).backward()
    opt.step()
    for p, q in zip(ref.parameters(), model.parameters()):
        assert torch.equal(p, q)
