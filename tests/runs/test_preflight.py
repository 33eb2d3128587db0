"""Pre-flight on the user's own model (``model.name=package.module:function``): an output the loss cannot
take is named as such (shape, tuple, dict), an input the model cannot take names the sample shape; one line,
exit 2, no run folder, and the weights are not touched."""

from __future__ import annotations

import sys
import textwrap

import pytest

from trickbag.cli import main

MODELS = textwrap.dedent('''
    import torch.nn as nn

    class Pair(nn.Module):
        def __init__(self, n, as_dict=False):
            super().__init__()
            self.l, self.as_dict = nn.Linear(64, n), as_dict
        def forward(self, x):
            y = self.l(x.flatten(1))
            return {"logits": y, "aux": y} if self.as_dict else (y, y)

    def five_outputs(num_classes, **kw):
        return nn.Sequential(nn.Flatten(), nn.Linear(64, 5))
    def pair(num_classes, **kw):
        return Pair(num_classes)
    def as_dict(num_classes, **kw):
        return Pair(num_classes, as_dict=True)
    def wrong_input(num_classes, **kw):
        return nn.Sequential(nn.Flatten(), nn.Linear(100, num_classes))
    def ten_from_ten(num_classes, **kw):
        return nn.Linear(10, 10)
    def flat_outputs(num_classes, **kw):
        return nn.Sequential(nn.Flatten(0), nn.Linear(8 * 64, num_classes))
''')

CASES = [
    ("five_outputs", "returns outputs of shape [8, 5], but task.type=classification needs one tensor of shape [N, 10]"),
    ("pair", "returns a tuple of 2 items; task.type=classification needs one tensor of shape [N, 10] (10 classes): "
             "return the logits only"),
    ("as_dict", "returns a dict (keys ['aux', 'logits']); task.type=classification needs one tensor"),
    ("wrong_input", "fails on the first training batch: RuntimeError: mat1 and mat2 shapes cannot be multiplied "
                    "(8x64 and 100x10); check that usermodels:wrong_input takes samples of shape [1, 8, 8]"),
    ("flat_outputs", "returns outputs of shape [10], but task.type=classification needs one tensor of shape [N, 10]"),
]


@pytest.fixture()
def user_models(tmp_path, monkeypatch):
    (tmp_path / "usermodels.py").write_text(MODELS, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    sys.modules.pop("usermodels", None)


@pytest.mark.parametrize("fn, message", CASES, ids=[c[0] for c in CASES])
def test_a_user_model_that_does_not_fit_is_one_line_naming_the_problem(tmp_path, capsys, user_models, fn, message):
    runs = tmp_path / "runs"
    code = main(["train", "digits", f"model.name=usermodels:{fn}", f"run.dir={runs}", "run.progress=false"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"trickbag: error: model 'usermodels:{fn}' on image samples of shape [1, 8, 8] ")
    assert message in err[0]
    assert not runs.exists()


def test_a_regression_model_with_the_wrong_number_of_outputs_is_named(tmp_path, capsys, user_models):
    from sklearn import datasets

    csv = tmp_path / "d.csv"
    datasets.load_diabetes(as_frame=True).frame.to_csv(csv, index=False)
    runs = tmp_path / "runs"
    code = main(["train", "tabular", f"data.root={csv}", "data.label_column=target", "task.type=regression",
                 "model.name=usermodels:ten_from_ten", f"run.dir={runs}"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err, err
    assert "returns outputs of shape [" in err and "task.type=regression needs one tensor of shape [N, 1]" in err
    assert not runs.exists()


def test_num_classes_on_a_regression_task_is_refused_not_ignored(tmp_path, capsys):
    from sklearn import datasets

    csv = tmp_path / "d.csv"
    datasets.load_diabetes(as_frame=True).frame.to_csv(csv, index=False)
    code = main(["train", "tabular", f"data.root={csv}", "data.label_column=target", "task.type=regression",
                 "model.num_classes=3", f"run.dir={tmp_path / 'runs'}"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err, err
    assert "model.num_classes=3 does not apply to task.type=regression" in err
