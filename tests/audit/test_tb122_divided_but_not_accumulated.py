"""TB122 divided-but-not-accumulated: the loss divided by the accumulation count while the optimizer steps on every
micro-batch (real mistake 227).  Reference: with SGD, one such step equals a plain step at lr / k (checked with
torch), which is what the rule's message says."""

from __future__ import annotations

import torch

from tests.audit.helpers import found

LOOP = """
    def train(model, loader, optimizer, criterion, gradient_accumulation_steps):
        for epoch in range(10):
            for step, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                loss = loss / gradient_accumulation_steps
                loss.backward()
                {step}
"""
EVERY = "optimizer.step()\n                optimizer.zero_grad()"
GUARDED = ("if (step + 1) % gradient_accumulation_steps == 0:\n                    optimizer.step()\n"
           "                    optimizer.zero_grad()")


def test_every_step_with_a_divided_loss_is_a_smaller_learning_rate():
    torch.manual_seed(0)
    w0, x = torch.randn(3), torch.randn(8, 3)
    steps = []
    for lr, k in [(0.1, 4), (0.1 / 4, 1)]:
        w = torch.nn.Parameter(w0.clone())
        opt = torch.optim.SGD([w], lr=lr)
        ((x @ w).pow(2).mean() / k).backward()
        opt.step()
        steps.append(w.detach().clone())
    assert torch.allclose(steps[0], steps[1])


def test_reported_at_the_step_of_every_micro_batch():
    assert found(LOOP.format(step=EVERY), "TB122") == [8]


def test_stepping_once_per_k_or_not_dividing_is_silent():
    assert found(LOOP.format(step=GUARDED), "TB122", show_all=True) == []
    plain = LOOP.format(step=EVERY).replace("loss = loss / gradient_accumulation_steps", "pass")
    assert found(plain, "TB122", show_all=True) == []
    other = LOOP.format(step=EVERY).replace("loss / gradient_accumulation_steps", "loss / num_tokens")
    assert found(other, "TB122", show_all=True) == []


def test_an_inner_loop_of_micro_batches_is_accumulation():
    inner = """
        def train(model, batches, optimizer, accum_steps):
            for batch in batches:
                for micro in batch.chunk(accum_steps):
                    loss = model(micro) / accum_steps
                    loss.backward()
                optimizer.step()
                optimizer.zero_grad()
    """
    assert found(inner, "TB122", show_all=True) == []
