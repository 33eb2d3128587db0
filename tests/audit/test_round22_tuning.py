"""Tuning on round 20's false alarms (benchmarks/lint_corpus/heldout_round20.md): each kind a planted right shape that
stays silent beside the wrong shape still reported."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.audit.helpers import fires, found
from trickbag.audit.lint import lint_file, lint_source


def _project(root: Path, files: dict[str, str]) -> None:
    (root / ".git").mkdir(parents=True)
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))


def _lines(path: Path, code: str, **kw) -> list[int]:
    return [f.line for f in lint_file(path, **kw) if f.rule == code]


EVALUATE = """
    import torch
    from model import Attention

    def evaluate(loader):
        model = Attention(8)
        model.load_state_dict(torch.load("best.pt", weights_only=True))
        with torch.no_grad():
            for x, y in loader:
                print((model(x).argmax(1) == y).float().mean())
"""


def test_tb201_a_model_class_of_another_module_without_dropout_or_batchnorm(tmp_path):
    model = """
        import torch.nn as nn
        import modules

        class Attention(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.glimpse = modules.Glimpse(n)
                self.core = nn.GRUCell(n, n)
                self.head = nn.ModuleDict(dict(fc=nn.Linear(n, n), out=nn.Sequential(nn.Linear(n, 2))))
                self.blocks = nn.ModuleList([nn.Linear(n, n) for _ in range(3)])

            def forward(self, x):
                return self.head["out"](self.core(self.glimpse(x)))
    """
    modules = """
        import torch.nn as nn

        class Glimpse(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.fc = nn.Linear(n, n){extra}
                self.register_buffer("scale", torch.ones(n))

            def forward(self, x):
                return self.fc(x) * self.scale
    """
    right, wrong = tmp_path / "right", tmp_path / "wrong"
    _project(right, {"model.py": model, "modules.py": modules.format(extra=""), "evaluate.py": EVALUATE})
    _project(wrong, {"model.py": model, "evaluate.py": EVALUATE,
                     "modules.py": modules.format(extra="\n        self.drop = nn.Dropout(0.5)")})
    assert _lines(right / "evaluate.py", "TB201", show_all=True) == []
    assert _lines(wrong / "evaluate.py", "TB201") == [10]


def test_tb201_a_model_chosen_among_mode_free_classes_of_the_file():
    src = """
        import torch
        import torch.nn as nn

        class Bigram(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.logits = nn.Parameter(torch.zeros(n, n))

            def forward(self, idx):
                return self.logits[idx]

        class MLP(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.mlp = nn.Sequential(nn.Linear(n, n), nn.Tanh(), nn.Linear(n, n){extra})

            def forward(self, idx):
                return self.mlp(idx)

        if args.type == "bigram":
            model = Bigram(27)
        else:
            model = MLP(27)

        @torch.no_grad()
        def generate(idx):
            return model(idx)

        for step in range(100):
            loss = model(x).sum()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            if step % 10 == 0:
                print(generate(x))
    """
    assert found(src.format(extra=""), "TB201", show_all=True) == []
    assert found(src.format(extra=", nn.Dropout(0.1)"), "TB201") == [28]


def test_tb201_a_predict_method_whose_callers_in_other_modules_switch_to_eval(tmp_path):
    algorithm = """
        import torch.nn as nn
        from base import Algorithm

        class DANN(Algorithm):
            def __init__(self, featurizer):
                super().__init__()
                self.featurizer = featurizer
                self.classifier = nn.Sequential(nn.Dropout(0.5), nn.Linear(8, 2))

            def update(self, x, y, opt):
                z = self.featurizer(x)
                loss = nn.functional.cross_entropy(self.classifier(z), y)
                opt.zero_grad()
                loss.backward()
                opt.step()

            def predict(self, x):
                return self.classifier(self.featurizer(x))
    """
    opera = """
        import torch

        def accuracy(network, loader):
            network.{switch}
            with torch.no_grad():
                for x, y in loader:
                    p = network.predict(x)
            network.train()
    """
    right, wrong = tmp_path / "right", tmp_path / "wrong"
    base = "import torch\n\nclass Algorithm(torch.nn.Module):\n    pass\n"
    _project(right, {"alg.py": algorithm, "base.py": base, "opera.py": opera.format(switch="eval()")})
    _project(wrong, {"alg.py": algorithm, "base.py": base, "opera.py": opera.format(switch="cuda()")})
    assert _lines(right / "alg.py", "TB201", show_all=True) == []
    assert _lines(wrong / "alg.py", "TB201") == [19]


ADARNN = """
    import os
    import torch

    def inference_all(model, model_path, loader):
        model.load_state_dict(torch.load(model_path))
        return [model(x) for x in loader]

    def train(model, optimizer, loader, output_path, name):
        for epoch in range(10):
            for x in loader:
                optimizer.zero_grad()
                model(x).sum().backward()
                optimizer.step()
            torch.save(model.state_dict(), os.path.join(output_path, name))
        return inference_all(model, {path}, loader)
"""


def test_tb403_a_loader_handed_the_path_its_caller_saved_to():
    own = ADARNN.format(path="os.path.join(output_path, name)")
    assert found(own, "TB403", torch="old") == []
    assert found(own, "TB403", torch="old", show_all=True) == [6]
    assert found(ADARNN.format(path="args.pretrained"), "TB403", torch="old") == [6]


TRAINER_RESUME = """
    import torch

    class Trainer:
        def load_optimizer(self, path):
            state = torch.load(path, map_location=self.device)
            self.{holder}.load_state_dict(state)
"""


def _reasons(src: str, code: str) -> list[str]:
    return [f.message for f in lint_source(textwrap.dedent(src), show_all=True, torch="old") if f.rule == code]


def test_tb403_a_file_that_is_an_optimizer_state_named_opt_something():
    """A whole file loaded into ``self.opt_enc`` is an optimizer state (only a training run writes one); a state
    dict of a checkpoint is not evidence (released checkpoints carry their optimizer too)."""
    assert any("restores an optimizer state" in m for m in _reasons(TRAINER_RESUME.format(holder="opt_enc"), "TB403"))
    assert not any("restores an optimizer state" in m
                   for m in _reasons(TRAINER_RESUME.format(holder="encoder"), "TB403"))


GDUMB = """
    def fit(model, optimizer, scheduler, loader, epochs, max_lr):
        for epoch in range(epochs):
            if epoch == 0:
                for g in optimizer.param_groups:
                    g["lr"] = max_lr * 0.1
            elif epoch == 1:
                for g in optimizer.param_groups:
                    g["lr"] = max_lr
            else:
                {step}
            for x in loader:
                optimizer.zero_grad()
                model(x).sum().backward()
                optimizer.step()
"""


def test_tb101_scheduler_stepped_only_after_the_warm_up_epochs():
    assert found(GDUMB.format(step="scheduler.step()"), "TB101", show_all=True) == []
    src = GDUMB.replace("if epoch == 0:", "if flag:").replace("elif epoch == 1:", "elif other:")
    assert found(src.format(step="scheduler.step()"), "TB101") == [11]


MAML_SCHED = """
    def train_iter(model, optimizer, scheduler, loader):
        num_batches = 0
        for batch in loader:
            {before}
            scheduler.step(epoch=num_batches)
            optimizer.zero_grad()
            model(batch).sum().backward()
            optimizer.step()
            {after}
"""


def test_tb101_a_position_set_before_the_step_counts_only_when_already_advanced():
    assert found(MAML_SCHED.format(before="pass", after="num_batches += 1"), "TB101", show_all=True) == []
    assert found(MAML_SCHED.format(before="num_batches += 1", after="pass"), "TB101") == [6]


def test_tb203_gradients_chosen_by_the_mode_and_inputs_that_need_gradients():
    src = """
        import torch

        def evaluate(model, loader, needs_input_grad):
            model.eval()
            for x, y in loader:
                {prep}
                {ctx}
                    out = model(x)
                print((out.argmax(1) == y).float().mean().item())
    """
    assert found(src.format(prep="pass", ctx="if True:"), "TB203") == [9]
    assert found(src.format(prep="pass", ctx="with torch.set_grad_enabled(model.training):"), "TB203",
                 show_all=True) == []
    assert found(src.format(prep="x.requires_grad = True", ctx="if True:"), "TB203", show_all=True) == []


def test_tb203_a_script_right_in_a_tests_folder(tmp_path):
    src = """
        import torch
        model = torch.hub.load("repo", "net").eval()
        for x, y in loader:
            print(model(x).argmax(1) == y)
    """
    (tmp_path / "tests").mkdir()
    (tmp_path / "scripts").mkdir()
    for folder in ("tests", "scripts"):
        (tmp_path / folder / "actions_test.py").write_text(textwrap.dedent(src))
    assert _lines(tmp_path / "tests" / "actions_test.py", "TB203", show_all=True) == []
    assert _lines(tmp_path / "scripts" / "actions_test.py", "TB203") == [5]


def test_tb204_a_loss_detached_in_a_method_chain_before_the_sum():
    src = """
        def run_epoch(model, optimizer, loader, loss_fn):
            loss = 0
            for x, y in loader:
                loss_batch = loss_fn(model(x), y)
                optimizer.zero_grad()
                loss_batch.backward()
                optimizer.step()
                {detach}
                loss += loss_batch
            return loss
    """
    fires("TB204", src.format(detach="pass"), [10], src.format(detach="loss_batch = loss_batch.detach().cpu()"))


def test_tb103_zero_grad_on_the_first_micro_batch_only():
    src = """
        def train(opt, model, loader, n):
            for i, x in enumerate(loader):
                {first}
                if i == 0:
                    opt.zero_grad()
                (model(x).sum() / n).backward()
                if i > 0 and i % n == 0:
                    opt.step()
                    opt.zero_grad()
    """
    fires("TB103", src.format(first="opt.zero_grad()"), [4], src.format(first="pass"))


def test_tb102_a_scheduler_stepped_when_the_epoch_changes():
    src = """
        class Model:
            def observe(self, x, y, epoch):
                if self.old_epoch != epoch:
                    self.scheduler.step()
                    self.old_epoch = epoch
                {plain}
                loss = self.loss(self.net(x), y) / self.k
                loss.backward()
                self.count += 1
                if self.count % self.k == 0:
                    self.opt.step()
                    self.opt.zero_grad()
    """
    assert found(src.format(plain="pass"), "TB102", show_all=True) == []
    assert found(src.format(plain="self.scheduler.step()"), "TB102") == [7]


def test_tb201_a_loop_whose_result_the_caller_back_propagates():
    src = """
        class MAML:
            def get_outer_loss(self, batch):
                total = 0.
                for x, y in batch:
                    with torch.set_grad_enabled(self.model.training):
                        total += self.loss(self.model(x), y)
                return total

            def train_iter(self, loader):
                self.model.train()
                for batch in loader:
                    self.optimizer.zero_grad()
                    loss = self.get_outer_loss(batch)
                    loss.backward()
                    self.optimizer.step()
    """
    assert found(src, "TB201", show_all=True) == []


# recall on the kinds of round 20's fresh real mistakes (148, 150, 156) and a false alarm on 150 (TB105)
LVSM = """
    def train(model, optimizer, scaler, loader, k, max_norm):
        for i, x in enumerate(loader):
            scaler.scale(model(x).sum() / k).backward()
            if (i + 1) % k != 0:
                continue
            scaler.unscale_(optimizer)
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            if norm < max_norm:
                scaler.step(optimizer)
                {update_in}
            {update_out}
            optimizer.zero_grad()
"""


def test_tb107_update_skipped_with_a_skipped_step_after_unscale():
    fires("TB107", LVSM.format(update_in="scaler.update()", update_out="pass"), [11],
          LVSM.format(update_in="pass", update_out="scaler.update()"))


NANOGPT = """
    def train(model, optimizer, loader, k):
        for step in range(100):
            for i in range(1, k + 1):
                x, y = next(loader)
                {fwd_out}
                if i < k:
                    with model.no_sync():
                        {fwd_in}
                        loss.backward()
                else:
                    loss = model(x, y)
                    loss.backward()
            for p in model.parameters():
                p.grad /= k
            optimizer.step()
            model.zero_grad(set_to_none=True)
"""


def test_tb111_forward_outside_no_sync_and_tb105_gradients_averaged_in_place():
    wrong = NANOGPT.format(fwd_out="loss = model(x, y)", fwd_in="pass")
    right = NANOGPT.format(fwd_out="pass", fwd_in="loss = model(x, y)")
    fires("TB111", wrong, [8], right)
    assert found(right, "TB105", show_all=True) == []


POINTNET = """
    def train(classifier, optimizer, loader, {loader_name}):
        for epoch in range(10):
            for i, (points, target) in enumerate(loader):
                optimizer.zero_grad()
                loss = F.nll_loss(classifier(points), target)
                loss.backward()
                optimizer.step()
                if i % 10 == 0:
                    j, data = next(enumerate({loader_name}, 0))
                    points, target = data
                    with torch.no_grad():
                        pred = classifier(points)
                    print(pred.argmax(1).eq(target).float().mean())
"""


def test_tb201_a_test_batch_drawn_inside_the_training_loop():
    assert found(POINTNET.format(loader_name="testdataloader"), "TB201") == [13]
    assert found(POINTNET.format(loader_name="other_loader"), "TB201", show_all=True) == []


DIFFSYNTH = """
    def train(accelerator, model, optimizer, scheduler, loader):
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        for data in loader:
            with accelerator.accumulate(model):
                {first}
                loss = model(data)
                accelerator.backward(loss)
                optimizer.step()
                scheduler.step()
                {last}
"""


def test_tb103_optimizer_zeroed_before_the_backward_inside_accumulate():
    fires("TB103", DIFFSYNTH.format(first="optimizer.zero_grad()", last="pass"), [6],
          DIFFSYNTH.format(first="pass", last="optimizer.zero_grad()"))
