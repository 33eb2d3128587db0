"""Tuning on round 22's false alarms (benchmarks/lint_corpus/heldout_round22.md): each kind a planted right shape that
stays silent (or drops to ``--all`` with its reason) beside the wrong shape still reported."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.audit.helpers import found
from trickbag.audit.lint import lint_file, lint_source


def _project(root: Path, files: dict[str, str]) -> None:
    (root / ".git").mkdir(parents=True)
    for name, text in files.items():
        (root / name).write_text(textwrap.dedent(text))


def _lines(path: Path, code: str, **kw) -> list[int]:
    return [f.line for f in lint_file(path, **kw) if f.rule == code]


AGENT = """
    import torch
    import torch.nn as nn

    class DQN:
        def __init__(self, envs, {param}):
            self.network = {build}.to("cuda")
            self.optimizer = torch.optim.Adam(self.network.parameters())

        def learn(self, steps):
            for t in range(steps):
                state = self.env.reset()
                action = self.predict(state)
                loss = self.network(state).sum()
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()

        @torch.no_grad()
        def predict(self, states):
            qs = self.network(states)
            return qs.argmax(1)
"""


def test_tb201_a_model_built_from_a_class_the_caller_passes_in_is_uncertain():
    injected = AGENT.format(param="network", build="network()")
    assert found(injected, "TB201") == []
    [hit] = [f for f in lint_source(textwrap.dedent(injected), show_all=True) if f.rule == "TB201"]
    assert hit.line == 21 and hit.confidence == "low" and "passed in as 'network'" in hit.message
    # the class is visible and has dropout: the mode matters, the finding stays
    visible = AGENT.format(param="n", build="nn.Sequential(nn.Linear(n, n), nn.Dropout(0.5))")
    assert found(visible, "TB201") == [21]


def test_tb201_a_helper_given_the_injected_model_by_its_only_caller():
    src = """
        import torch

        class Learner:
            def __init__(self, net_cls):
                self.net = {build}
                self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)

            def fit(self, train_loader, val_loader):
                for x, y in train_loader:
                    self.net(x).sum().backward()
                    self.opt.step()
                self.evaluate(val_loader, self.net)

            @torch.no_grad()
            def evaluate(self, val_loader, model):
                for x, y in val_loader:
                    print((model(x).argmax(1) == y).float().mean())
    """
    assert found(src.format(build="net_cls()"), "TB201") == []
    assert found(src.format(build="torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.Dropout(0.5))"), "TB201") \
        == [18]


def test_tb201_a_private_method_nothing_calls_is_uncertain():
    src = """
        import torch

        class Agent:
            def __init__(self, model):
                self.model = model

            def learn(self, batch):
                self.model(batch).sum().backward()
                self.opt.step()

            @torch.no_grad()
            def {name}(self, state, network):
                q = network(state).max()
                return q < 0
        {call}
    """
    silent = src.format(name="__only_bad_actions", call="")
    assert found(silent, "TB201") == []
    assert [f.line for f in lint_source(textwrap.dedent(silent), show_all=True) if f.rule == "TB201"] == [14]
    # called (through its mangled name, from outside the class): it runs, the finding stays
    called = src.format(name="__only_bad_actions", call="agent._Agent__only_bad_actions(s, agent.model)")
    assert found(called, "TB201") == [14]


def test_tb201_a_method_named_after_the_model_on_a_collector_is_no_forward():
    src = """
        import torch

        class Trainer:
            @torch.no_grad()
            def evaluate(self, eval_data):
                for batch in eval_data:
                    scores = self.{call}(batch)
                    self.eval_collector.eval_batch_collect(scores)
                self.eval_collector.model_collect(self.model)
                return self.evaluator.evaluate(self.eval_collector.get_data_struct())

            def fit(self, train_data):
                for batch in train_data:
                    self.model(batch).sum().backward()
                    self.optimizer.step()
    """
    assert found(src.format(call="full_sort_predict"), "TB201", show_all=True) == []
    assert found(src.format(call="model"), "TB201") == [8]


TRAIN_SCRIPT = """
    import torch
    from engine import trainer

    engine = trainer(8)
    for epoch in range(10):
        for x, y in train_loader:
            engine.train(x, y)
        for x, y in val_loader:
            engine.eval(x, y)
    for x, y in test_loader:
        with torch.no_grad():
            preds = engine.model(x)
"""
ENGINE = """
    import torch.nn as nn

    class trainer:
        def __init__(self, n):
            self.model = nn.Sequential(nn.Linear(n, n), nn.Dropout(0.3))

        def train(self, x, y):
            self.model.train()
            self.model(x).sum().backward()

        def eval(self, x, y):
            {switch}
            return self.model(x)
"""


def test_tb201_a_project_engine_whose_eval_method_switches_its_model(tmp_path):
    right, wrong = tmp_path / "right", tmp_path / "wrong"
    _project(right, {"train.py": TRAIN_SCRIPT, "engine.py": ENGINE.format(switch="self.model.eval()")})
    _project(wrong, {"train.py": TRAIN_SCRIPT, "engine.py": ENGINE.format(switch="pass")})
    assert _lines(right / "train.py", "TB201", show_all=True) == []
    assert _lines(wrong / "train.py", "TB201") == [13]


def test_tb203_an_average_copied_into_the_model_is_no_forward():
    src = """
        import torch

        def evaluate(score, loader, ckpt):
            ema_helper = EMAHelper(0.999)
            ema_helper.register(score)
            ema_helper.load_state_dict(torch.load(ckpt, weights_only=True))
            ema_helper.{call}
            score.eval()
            for x in loader:
                with torch.no_grad():
                    print(score(x).mean())
    """
    assert found(src.format(call="ema(score)"), "TB203", show_all=True) == []
    # the average run on data, outside no_grad: an evaluation forward with gradients
    src = src.replace("            ema_helper.{call}\n", "            for x in loader:\n"
                      "                print(ema_helper.ema(x).mean())\n")
    assert found(src, "TB203", show_all=True) == [9]


def test_tb203_a_validation_the_training_loop_runs_under_no_grad(tmp_path):
    validation = """
        def validate(generator, valloader):
            generator.eval()
            for mel, audio in valloader:
                fake = generator(mel)
                print((fake - audio).abs().mean())
            generator.train()
    """
    train = """
        import torch
        from validation import validate

        def train(generator, optimizer, trainloader, valloader):
            for epoch in range(10):
                {call}
                for mel, audio in trainloader:
                    loss = (generator(mel) - audio).abs().mean()
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
    """
    right, wrong = tmp_path / "right", tmp_path / "wrong"
    _project(right, {"validation.py": validation, "train.py": train.format(
        call="with torch.no_grad():\n                    validate(generator, valloader)")})
    _project(wrong, {"validation.py": validation, "train.py": train.format(call="validate(generator, valloader)")})
    assert _lines(right / "validation.py", "TB203", show_all=True) == []
    assert _lines(wrong / "validation.py", "TB203") == [5]
