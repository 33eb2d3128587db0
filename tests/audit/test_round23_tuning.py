"""Tuning on round 21's false alarms (benchmarks/lint_corpus/heldout_round21.md): each kind a planted right shape that
stays silent beside the wrong shape still reported."""

from __future__ import annotations

from tests.audit.helpers import fires, found

BEGINNER = """
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Sequential(nn.Linear(784, 300), nn.ReLU(){extra}, nn.Linear(300, 10))

        def forward(self, x):
            return self.fc(x)

    model = Net()
    if use_gpu:
        model = model.cuda()
    for epoch in range(10):
        for x, y in train_loader:
            optimizer.zero_grad()
            criterion(model(x), y).backward()
            optimizer.step()
        model.eval()
        for x, y in test_loader:
            print(model(x))
"""


def test_tb202_eval_left_on_a_model_without_dropout_or_batchnorm():
    assert found(BEGINNER.format(extra=""), "TB202", show_all=True) == []
    assert found(BEGINNER.format(extra=", nn.Dropout(0.5)"), "TB202") == [20]


REINFORCE = """
    def search(policy, optimizer, baseline, steps):
        for step in range(steps):
            log_prob, arch = policy.select()
            reward = evaluate(arch)
            baseline.update({arg})
            loss = (-log_prob * (reward - baseline.value())).sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
"""


def test_tb108_a_reward_baseline_is_no_weight_average():
    src = REINFORCE.replace("def search(policy, optimizer, baseline, steps):",
                            "def search(policy, optimizer, steps):\n        baseline = ExponentialMovingAverage(0.9)")
    assert found(src.format(arg="reward"), "TB108", show_all=True) == []
    assert found(src.format(arg="policy"), "TB108") == [7]


def test_tb204_a_nested_helper_that_returns_a_number():
    src = """
        def train(net, loss, features, labels, loader, optimizer):
            def eval_loss():
                return loss(net(features), labels).mean(){tail}

            ls = [eval_loss()]
            for x, y in loader:
                l = loss(net(x), y).mean()
                optimizer.zero_grad()
                l.backward()
                optimizer.step()
                ls.append(eval_loss())
            return ls
    """
    fires("TB204", src.format(tail=""), [12], src.format(tail=".item()"))


def test_tb402_device_count_on_the_branch_that_shows_every_device():
    src = """
        import os
        import torch

        def main(args):
            if args.gpu == "all":
                device_list = range(torch.cuda.device_count())
                args.gpu = ",".join(str(d) for d in device_list)
            {other}
            os.environ["CUDA_VISIBLE_DEVICES"] = args.gpu
    """
    assert found(src.format(other="pass"), "TB402", show_all=True) == []
    assert found(src.format(other="torch.cuda.synchronize()"), "TB402") == [10]


GEMOSA = """
    def fit(model, optimizer, criterion, x, y, epochs):
        lr_scheduler = torch.optim.lr_scheduler.MultiStepLR(
            optimizer, milestones=[int(epochs * 0.25), int(epochs * 0.5)], gamma=0.1)
        for {target} in range(epochs):
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            lr_scheduler.step()
"""


def test_tb115_a_full_batch_loop_over_epochs_steps_once_per_epoch():
    assert found(GEMOSA.format(target="_iepoch"), "TB115", show_all=True) == []
    src = GEMOSA.format(target="batch").replace("for batch in range(epochs):", "for epoch in range(epochs):\n"
                                                 "            for x, y in loader:").replace(
        "\n            optimizer.zero_grad()", "\n                optimizer.zero_grad()").replace(
        "\n            loss = ", "\n                loss = ").replace(
        "\n            loss.backward()", "\n                loss.backward()").replace(
        "\n            optimizer.step()", "\n                optimizer.step()").replace(
        "\n            lr_scheduler.step()", "\n                lr_scheduler.step()")
    assert found(src, "TB115") == [11]


def test_tb302_a_private_flag_is_not_a_misspelling():
    src = """
        class Classifier(nn.Module):
            def __init__(self, name):
                super().__init__()
                self.model = HubertModel.from_pretrained(name)
                self.model.feature_extractor.{attr} = False
    """
    assert found(src.format(attr="_requires_grad"), "TB302", show_all=True) == []
    assert found(src.format(attr="require_grad"), "TB302") == [6]


def test_tb203_a_demo_forward_on_an_input_written_in_the_code():
    src = """
        encoder = EncoderRNN(N_CHARS, HIDDEN_SIZE)
        encoder.load_state_dict(torch.load("enc.pt", weights_only=True))

        def test(loader):
            encoder.eval()
            for batch in loader:
                hidden = encoder.init_hidden()
                word = {word}
                out, hidden = encoder(word, hidden)
                print(out)
    """
    assert found(src.format(word="str2tensor('hello')"), "TB203", show_all=True) == []
    assert found(src.format(word="batch"), "TB203") == [10]


def test_tb201_tb203_a_predict_whose_outputs_a_later_backward_reaches_through_a_list():
    src = """
        class MAML:
            def __init__(self, network):
                self.network = network

            def predict(self, x):
                return self.network(x)

        def meta_train(maml, tasks, optimizer):
            losses = []
            for x, y in tasks:
                y_hat = maml.predict(x)
                losses.append(criterion(y_hat, y))
            meta_loss = torch.stack(losses).mean()
            meta_loss.backward()
            optimizer.step()
    """
    assert found(src, "TB201", show_all=True) == [] and found(src, "TB203", show_all=True) == []
