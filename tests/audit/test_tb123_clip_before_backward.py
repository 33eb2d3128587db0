"""TB123 clip-before-backward: a clip that runs before the backward whose gradients the step applies (round 27's
mistake 252).  Reference: torch itself — the gradients the step sees after clip-then-backward are the unclipped ones."""

from __future__ import annotations

import torch

from tests.audit.helpers import found

STEP = """
    import torch

    def train(model, loader, optimizer, max_norm):
        for x, y in loader:
            loss = model(x, y)
            {body}
"""


def test_clip_then_backward_leaves_the_gradient_unclipped():
    w = torch.nn.Parameter(torch.tensor([3.0, 4.0]))
    w.grad = None
    torch.nn.utils.clip_grad_norm_([w], 1.0)  # nothing to clip yet
    (w * 10).sum().backward()
    assert torch.linalg.vector_norm(w.grad) > 1.0  # the step would apply a norm-14 gradient


def test_reported_at_a_clip_before_the_backward():
    body = ("optimizer.zero_grad()\n            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n"
            "            loss.backward()\n            optimizer.step()")
    assert found(STEP.format(body=body), "TB123") == [8]
    # in a helper that runs the backward and leaves the step to its caller
    helper = """
        import torch

        class Weighting:
            def backward(self, loss, shared, max_norm):
                torch.nn.utils.clip_grad_norm_(shared, max_norm)
                loss.backward()
                return loss
    """
    assert found(helper, "TB123") == [6]


def test_clip_after_backward_or_for_a_deferred_step_is_silent():
    right = ("optimizer.zero_grad()\n            loss.backward()\n"
             "            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n            optimizer.step()")
    assert found(STEP.format(body=right), "TB123", show_all=True) == []
    deferred = ("torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n            optimizer.step()\n"
                "            optimizer.zero_grad()\n            loss.backward()")
    assert found(STEP.format(body=deferred), "TB123", show_all=True) == []
    twice = ("torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n            loss.backward()\n"
             "            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n            optimizer.step()")
    assert found(STEP.format(body=twice), "TB123", show_all=True) == []
