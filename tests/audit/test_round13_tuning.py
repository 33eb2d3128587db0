"""Tuning on round 13's lessons (benchmarks/lint_corpus/heldout_round13.md): where TB202 reports a model left in
eval mode, TB201's validation-loss pass in train mode on purpose, TB303's printed log(softmax); the true shape
reported, the false-alarm shape silent."""

from __future__ import annotations

import textwrap

from tests.audit.helpers import found
from trickbag.audit.lint import lint_source

EPOCHS = """
    import torch
    import torch.nn.functional as F

    def fit(model, optimizer, train_loader, valid_loader, epochs):
        {before}
        for _epoch in range(epochs):
            {top}
            for data, target in train_loader:
                optimizer.zero_grad()
                loss = F.nll_loss(model(data), target)
                loss.backward()
                optimizer.step()
            model.eval()
            with torch.no_grad():
                for data, target in valid_loader:
                    print(model(data).argmax(1).eq(target).sum().item())
"""


def test_tb202_reported_where_eval_mode_is_left_naming_the_training_forward():
    """Real mistakes 105-107 and 111 (and 18-21, 37, 52, 53, 90): the finding sits on the switch that leaves eval
    mode (what lacks its ``.train()``), and its message names the training forward that then runs in eval mode."""
    src = EPOCHS.format(before="model.train()", top="pass")
    assert found(src, "TB202") == [14]
    [finding] = [f for f in lint_source(textwrap.dedent(src)) if f.rule == "TB202"]
    assert "training forward on line 11 runs in eval mode" in finding.message
    assert found(EPOCHS.format(before="pass", top="model.train()"), "TB202") == []


HELPER = """
    import torch

    def test(model, x, y, objective):
        model.eval()
        with torch.no_grad():
            return objective(model(x), y).item()

    def train(model, get_batch, x_test, y_test, objective, optimizer, steps):
        for i in range(steps):
            data, label = get_batch()
            optimizer.zero_grad()
            out = model(data)
            objective(out, label).backward()
            optimizer.step()
            out2 = model(data)
            objective(out2, label).backward()
            optimizer.step()
            if i % 100 == 0:
                test(model, x_test, y_test, objective)
                {back}
"""


def test_tb202_one_switch_reaching_two_forwards_is_one_finding_at_the_helper_call():
    """A helper that leaves eval mode, called in the loop, reached by two training forwards: one finding, at the
    call, naming the first forward."""
    src = HELPER.format(back="pass")
    hits = [f for f in lint_source(textwrap.dedent(src)) if f.rule == "TB202"]
    assert [f.line for f in hits] == [20]
    assert "line 13" in hits[0].message
    assert found(HELPER.format(back="model.train()"), "TB202") == []


VALIDATION_LOSS = """
    import torch

    def do_train(model, data_loader, data_loader_val, optimizer, meters):
        model.train()
        for images, targets in data_loader:
            loss_dict = model(images, targets)
            losses = sum(loss for loss in loss_dict.values())
            optimizer.zero_grad()
            losses.backward()
            optimizer.step()
            if len(meters) % 100 == 0:
                run_inference(model, data_loader_val)
                {between}
                with torch.no_grad():
                    for images_val, targets_val in data_loader_val:
                        {stored} = model(images_val, targets_val)
                        meters.append({stored})
"""


def test_tb201_train_right_before_a_no_grad_validation_loss_pass_is_low_confidence():
    """maskrcnn-benchmark (round 13): ``model.train()`` right before the ``no_grad`` loop whose forward stores a loss
    dict is on purpose (a detector returns its losses only in train mode): --all, with that reason."""
    src = VALIDATION_LOSS.format(between="model.train()", stored="loss_dict_val")
    assert found(src, "TB201") == []
    [low] = [f for f in lint_source(textwrap.dedent(src), show_all=True) if f.rule == "TB201"]
    assert low.line == 17 and "returns its losses only in train mode" in low.message


def test_tb201_train_then_other_work_still_reported():
    """The same pass with work on the model's data between the switch and the loop is no evidence of intent: still
    reported by default.  (Round 13 also kept a pass storing predictions in the default output; round 14's Glow
    initialisation showed that ``train()`` right before the pass is the evidence whatever it stores, so that case
    is now ``--all`` with its reason: ``test_round15_tuning.py``.)"""
    assert found(VALIDATION_LOSS.format(between="model.train()\n                meters.clear()",
                                     stored="loss_dict_val"), "TB201") == [18]
    src = VALIDATION_LOSS.format(between="model.train()", stored="preds")
    assert found(src, "TB201") == []
    [low] = [f for f in lint_source(textwrap.dedent(src), show_all=True) if f.rule == "TB201"]
    assert low.line == 17 and "on purpose" in low.message


def test_tb303_log_of_softmax_that_is_only_printed_is_silent():
    """Speech-Transformer's learning script (round 13): ``torch.log(softmax)`` printed next to ``log_softmax`` to show
    they agree, and a "loss" made from it that is only printed, reach no loss."""
    src = """
        import torch
        import torch.nn.functional as F

        def learn_cross_entropy(x, target):
            softmax = F.softmax(x, dim=1)
            log_softmax = torch.log(softmax)
            print("log() + softmax():", log_softmax)
            loss_each = torch.stack([log_softmax[i][t] for i, t in enumerate(target)])
            print(-1 * torch.mean(loss_each))
            print(torch.log(F.softmax(x, dim=1)))
    """
    assert found(src, "TB303", show_all=True) == []


def test_tb303_log_of_softmax_that_reaches_a_loss_is_reported():
    """The same log used by a backward, or returned, is reported."""
    src = """
        import torch
        import torch.nn.functional as F

        def step(x, target, optimizer):
            softmax = F.softmax(x, dim=1)
            log_softmax = torch.log(softmax)
            print(log_softmax)
            loss = -log_softmax.gather(1, target[:, None]).mean()
            loss.backward()
            optimizer.step()

        def log_probs(x):
            lp = torch.log(F.softmax(x, dim=1))
            print(lp)
            return lp
    """
    assert found(src, "TB303") == [7, 14]
