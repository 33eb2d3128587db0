"""Planted cases for the round-7 false-alarm kinds (benchmarks/lint_corpus/heldout_round7.md), tuned on after
round 7 was measured: each shape stays silent (or low) by default, its true neighbour is still reported."""

from __future__ import annotations

import textwrap

from tests.audit.helpers import found
from trickbag.audit.lint import lint_file


def _write(tmp_path, files: dict[str, str]):
    for name, text in files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))


def _codes(path, show_all=False):
    return [(f.line, f.rule) for f in lint_file(path, show_all=show_all)]


def test_tb202_eval_on_a_separate_evaluation_copy(tmp_path):
    src = '''
def evaluate(model, loader):
    model.eval()
    with torch.no_grad():
        return sum(model(x).sum().item() for x in loader)

def train(model, optimizer, loader, epochs):
    model.train()
    for epoch in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
        {call}
'''
    copy = "eval_model = Net(); eval_model.load_state_dict(model.state_dict()); evaluate(eval_model, loader)"
    assert found(src.format(call=copy), "TB202") == []
    assert found(src.format(call="evaluate(model, loader)"), "TB202") == [14]


def test_tb201_tb203_a_project_function_named_like_a_model_is_not_a_forward(tmp_path):
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/data.py": "def add_prompt_to_generator(example, queue, is_eval):\n    queue.put(example)\n",
        "pkg/train.py": '''
            from pkg.data import add_prompt_to_generator

            def loop(model, optimizer, loader, eval_loader, queue):
                for x, y in loader:
                    optimizer.zero_grad()
                    loss_fn(model(x), y).backward()
                    optimizer.step()
                for eval_example in eval_loader:
                    add_prompt_to_generator(eval_example, queue, is_eval=True)
            ''',
    })
    assert [c for c in _codes(tmp_path / "pkg/train.py") if c[1] in ("TB201", "TB203")] == []


def test_tb201_a_module_holding_no_layers_is_mode_free():
    src = '''
import numpy as np
import torch

class Inference(torch.nn.Module):
    def __init__(self, weights):
        super().__init__()
        self.weights = weights

    def forward(self, x):
        for w, b in self.weights:
            x = np.clip(x @ w + b, 0, None)
        return x

def train(model, optimizer, loader):
    for x, y in loader:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()

@torch.no_grad()
def evaluate(model, data):
    model = Inference([(p.weight, p.bias) for p in model.convs])
    return model(data.x)
'''
    assert found(src, "TB201") == []
    held = src.replace("for w, b in self.weights:\n            x = np.clip(x @ w + b, 0, None)",
                       "for layer in self.weights:\n            x = layer(x)")
    import ast

    from trickbag.audit._flow import FileModel
    from trickbag.audit._intent import _class_mode_free
    for code, free in ((src, True), (held, False)):
        fm = FileModel(ast.parse(textwrap.dedent(code)))
        assert _class_mode_free(fm, fm.classes["Inference"]) is free


def test_tb101_scheduler_first_on_a_pinned_pre_1_1_torch(tmp_path):
    loop = '''
        def train(model, optimizer, scheduler, loader):
            for x, y in loader:
                scheduler.step()
                optimizer.zero_grad()
                loss_fn(model(x), y).backward()
                optimizer.step()
        '''
    _write(tmp_path, {"old/requirements.txt": "torch==0.4.1\n", "old/train.py": loop,
                      "new/requirements.txt": "torch>=1.8\n", "new/train.py": loop})
    assert [c for c in _codes(tmp_path / "old/train.py") if c[1] == "TB101"] == []
    assert [c for c in _codes(tmp_path / "old/train.py", show_all=True) if c[1] == "TB101"] == [(4, "TB101")]
    assert [c for c in _codes(tmp_path / "new/train.py") if c[1] == "TB101"] == [(4, "TB101")]


def test_tb201_project_without_mode_dependent_layers_is_low(tmp_path):
    agent = """
        import torch


        def train(model, optimizer, loader, val_loader):
            for x, y in loader:
                optimizer.zero_grad()
                loss_fn(model(x), y).backward()
                optimizer.step()
            with torch.no_grad():
                for x, y in val_loader:
                    print(model(x))
        """
    _write(tmp_path, {"proj/setup.py": "", "proj/agent.py": agent, "proj/nets.py": "import torch.nn as nn\n"})
    path = tmp_path / "proj/agent.py"
    assert [c for c in _codes(path) if c[1] == "TB201"] == []
    assert [c for c in _codes(path, show_all=True) if c[1] == "TB201"] == [(12, "TB201")]
    _write(tmp_path, {"proj2/setup.py": "", "proj2/agent.py": agent,
                      "proj2/nets.py": "import torch.nn as nn\nd = nn.Dropout(0.1)\n"})
    assert [c for c in _codes(tmp_path / "proj2/agent.py") if c[1] == "TB201"] == [(12, "TB201")]


def test_tb403_a_processed_file_a_helper_saves_and_returns(tmp_path):
    src = '''
def preprocess(dataset, radius):
    out = "fp_%d.pt" % radius
    torch.save(make(dataset, radius), out)
    return out

def main(args):
    f = preprocess(load_dataset(args.root), args.radius)
    data = torch.load(f)
'''
    assert found(src, "TB403", torch="old") == []
    other = src.replace("    return out\n", "    return args_path(out)\n")
    assert isinstance(found(other, "TB403", torch="old"), list)
