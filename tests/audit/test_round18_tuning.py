"""Tuning on round 17's lessons (benchmarks/lint_corpus/heldout_round17.md): adversarial test loops, torch-0.3
volatile inputs made by helpers, an attack's own optimizer over an input; each true shape still reported."""

from __future__ import annotations

from tests.audit.helpers import found

ADV_TEST = """
    import torch.nn.functional as F

    def test(model, adversary, loader):
        model.eval()
        correct = correct_adv = 0
        for data, target in loader:
            output = model(data)
            correct += (output.argmax(1) == target).sum().item()
            {attack}
        return correct, correct_adv
"""


def test_tb203_adversarial_evaluation_needs_gradients():
    """The loop crafts attacks (adversary.generate, self.adv_data): it differentiates the model: silent."""
    for attack in ("x_adv = adversary.generate(data, target)", "x_adv, out_adv = self_adv_data(data, target)"):
        src = ADV_TEST.format(attack=attack + "\n            correct_adv += (model(x_adv).argmax(1) == target).sum()")
        assert found(src, "TB203") == [], attack


def test_tb203_a_plain_evaluation_still_reported():
    assert found(ADV_TEST.format(attack="pass"), "TB203") == [8]


VOLATILE = """
    from torch.autograd import Variable
    {imports}

    def evaluate(model, data_source, args):
        model.eval()
        total = 0
        for i in range(0, data_source.size(0) - 1, args.bptt):
            data, targets = {get}
            output = model(data)
            total += output.sum().item()
        return total
"""


def test_tb203_torch03_volatile_inputs_made_by_helpers():
    """``get_batch(..., evaluation=True)`` of a helper module not in the project (in a file importing Variable), or a
    helper given ``volatile=True``: the no-grad of the torch the code is written for: silent."""
    for imports, get in (("from utils import get_batch", "get_batch(data_source, i, args, evaluation=True)"),
                         ("from net_utils import np_to_variable", "np_to_variable(data_source[i], volatile=True), 0")):
        assert found(VOLATILE.format(imports=imports, get=get), "TB203") == [], get


def test_tb203_an_unseen_helper_without_the_volatile_flag_still_reported():
    src = VOLATILE.format(imports="from utils import get_batch", get="get_batch(data_source, i, args)")
    assert found(src, "TB203") == [10]


ATTACK = """
    import torch
    import torch.nn.functional as F
    from torch.autograd import Variable

    def trades_loss(model, x, y, optimizer, eps, steps):
        model.eval()
        delta = {delta}
        optimizer_delta = torch.optim.SGD([delta], lr=eps / steps * 2)
        for _ in range(steps):
            optimizer_delta.zero_grad()
            loss = -F.cross_entropy(model(x + delta), y)
            loss.backward()
            optimizer_delta.step()
        model.train()
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x + delta.detach()), y)
        return loss
"""


def test_tb202_an_attacks_optimizer_over_its_own_input_does_not_train_the_model():
    """TRADES: model.eval() for the attack, an SGD over ``delta`` (made to require gradients here): silent."""
    assert found(ATTACK.format(delta="Variable(0.001 * torch.randn_like(x), requires_grad=True)"), "TB202",
                 show_all=True) == []


def test_tb202_an_optimizer_over_a_given_tensor_keeps_its_doubt():
    """Over a tensor the function did not make (a given latent): the model may be fixed on purpose: --all only."""
    src = ATTACK.format(delta="x.new_zeros(x.shape)")
    assert found(src, "TB202") == []
    assert found(src, "TB202", show_all=True) == [7]
