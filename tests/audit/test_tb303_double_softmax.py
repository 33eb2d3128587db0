"""TB303's double-softmax case: a softmax taken of probabilities (round 26's mistakes 237 and 241 are this kind).
torch is the reference for why it matters: the second softmax flattens the scores towards uniform."""

from __future__ import annotations

import torch

from tests.audit.helpers import found

EVAL = """
    import torch
    import torch.nn.functional as F

    @torch.no_grad()
    def evaluate(model, loader):
        probs = []
        for x, y in loader:
            probs.append(model(x))
        all_prob = torch.cat(probs)
        all_prob = {first}
        conf, pred = torch.max({second}, 1)
        return conf.mean(), pred
"""


def test_a_second_softmax_flattens_the_probabilities():
    logits = torch.tensor([[4.0, 0.0, -2.0]])
    once = logits.softmax(1)
    twice = once.softmax(1)
    assert once.max() > 0.97 and twice.max() < 0.6  # the confidence read from it collapses
    assert torch.allclose(twice.sum(1), torch.ones(1))  # still sums to one: nothing looks wrong


def test_softmax_of_probabilities_is_reported():
    for second in ["all_prob.softmax(dim=1)", "F.softmax(all_prob, dim=1)", "torch.softmax(all_prob, 1)",
                   "torch.nn.Softmax(dim=1)(all_prob)"]:
        assert found(EVAL.format(first="all_prob.softmax(dim=1)", second=second), "TB303") == [12], second
    assert found(EVAL.format(first="F.softmax(all_prob, -1).float()", second="all_prob.softmax(1)"),
                 "TB303") == [12]


def test_softmax_of_logits_is_silent():
    assert found(EVAL.format(first="all_prob.float()", second="all_prob.softmax(dim=1)"), "TB303",
                 show_all=True) == []
    assert found(EVAL.format(first="all_prob.softmax(dim=1)", second="all_prob"), "TB303", show_all=True) == []
    # a temperature on probabilities' logs is a different computation: not a softmax of the probabilities
    assert found(EVAL.format(first="all_prob.softmax(dim=1)", second="(all_prob.log() / 2).softmax(1)"), "TB303",
                 show_all=True) == []


def test_the_two_softmaxes_in_the_two_branches_of_an_if_are_silent():
    branches = """
        import torch.nn.functional as F

        def attend(scores, fp16):
            weights = scores * 2
            if fp16:
                weights = F.softmax(weights, dim=-1, dtype=torch.float32).half()
            else:
                weights = F.softmax(weights, dim=-1)
            return weights
    """
    assert found(branches, "TB303", show_all=True) == []
