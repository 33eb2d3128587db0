"""TB205 mean-loss-over-samples: batch-mean losses summed and divided by the number of samples (real mistake 205).
The reported epoch loss is then about batch_size times too small; reference: the per-sample mean computed by hand in
the test."""

from __future__ import annotations

import textwrap

import torch

from tests.audit.helpers import found
from trickbag.audit import _project
from trickbag.audit.lint import lint_file

WRONG = """
    import torch.nn as nn
    import torch.nn.functional as F

    def train(model, loader, optimizer):
        criterion = nn.CrossEntropyLoss({kw})
        total, seen = 0.0, 0
        for x, y in loader:
            loss = {loss}
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += {acc}
            seen += y.size(0)
        return total / {div}
"""


def _src(kw="", loss="criterion(model(x), y)", acc="loss.item()", div="len(loader.dataset)"):
    return WRONG.format(kw=kw, loss=loss, acc=acc, div=div)


def test_the_sum_of_means_divided_by_samples_is_what_the_rule_says():
    torch.manual_seed(0)
    logits, y = torch.randn(10, 3), torch.randint(0, 3, (10,))
    batches = [(logits[i:i + 4], y[i:i + 4]) for i in range(0, 10, 4)]
    wrong = sum(torch.nn.functional.cross_entropy(a, b).item() for a, b in batches) / 10
    right = sum(torch.nn.functional.cross_entropy(a, b).item() * len(b) for a, b in batches) / 10
    assert abs(right - torch.nn.functional.cross_entropy(logits, y).item()) < 1e-6
    assert wrong < right / 2  # the rule's "about batch_size times too small"


def test_reported_at_the_unweighted_sum():
    assert found(_src(), "TB205") == [13]
    assert found(_src(div="seen"), "TB205") == [13]
    assert found(_src(loss="F.mse_loss(model(x), y)", acc="float(loss)"), "TB205") == [13]
    assert found(_src(acc="loss.detach().item()", div="len(train_dataset)"), "TB205") == [13]


def test_weighted_sum_per_batch_count_or_summing_loss_is_silent():
    assert found(_src(acc="loss.item() * x.size(0)"), "TB205", show_all=True) == []
    assert found(_src(div="len(loader)"), "TB205", show_all=True) == []
    assert found(_src(kw="reduction='sum'"), "TB205", show_all=True) == []
    assert found(_src(loss="F.cross_entropy(model(x), y, reduction='sum')"), "TB205", show_all=True) == []
    counted = _src(div="seen").replace("seen += y.size(0)", "seen += 1")
    assert found(counted, "TB205", show_all=True) == []


def test_a_loss_object_from_elsewhere_depends_on_the_project(tmp_path):
    src = textwrap.dedent(_src()).replace("    criterion = nn.CrossEntropyLoss()\n", "").replace(
        "def train(model, loader, optimizer):", "def train(model, loader, optimizer, criterion):")
    (tmp_path / "setup.py").write_text("")
    (tmp_path / "train.py").write_text(src)
    (tmp_path / "main.py").write_text("import torch.nn as nn\ncriterion = nn.CrossEntropyLoss()\n")
    hits = [f for f in lint_file(tmp_path / "train.py", show_all=True) if f.rule == "TB205"]
    assert [(f.line, f.confidence) for f in hits] == [(12, "high")]
    (tmp_path / "main.py").write_text("import torch.nn as nn\ncriterion = nn.CrossEntropyLoss(reduction='sum')\n")
    _project._project_sets_reduction.cache_clear()
    hits = [f for f in lint_file(tmp_path / "train.py", show_all=True) if f.rule == "TB205"]
    assert [(f.line, f.confidence) for f in hits] == [(12, "low")]
