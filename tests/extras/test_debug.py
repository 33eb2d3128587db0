"""trace_shapes / profile_steps against hand-derived expectations and torch's own ops."""

from __future__ import annotations

import io
import json

import pytest
import torch
from torch import nn

from trickbag.extras.debug import ShapeRecord, format_trace, profile_steps, trace_shapes


class LogOfNegative(nn.Module):
    """Produces NaN on purpose: log of a negative number."""

    def forward(self, x):
        return torch.log(x - 10.0)


class TwoHeads(nn.Module):
    """Returns a tuple and a dict, to check nested outputs are traced per tensor."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        h = self.fc(x)
        return (h, h.argmax(dim=1)), {"logits": h.double(), "none": None}


def test_records_match_forward_in_execution_order():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 7), nn.ReLU(), nn.Sequential(nn.Linear(7, 2), nn.Tanh()))
    x = torch.randn(3, 5)
    recs = trace_shapes(model, x, quiet=True)
    # post-order: a container finishes after its children
    assert [r.name for r in recs] == ["0", "1", "2.0", "2.1", "2", "(root)"]
    assert [r.cls for r in recs] == ["Linear", "ReLU", "Linear", "Tanh", "Sequential", "Sequential"]
    # shapes, computed independently by running the layers by hand
    h0 = model[0](x)
    h1 = model[1](h0)
    h2 = model[2][0](h1)
    expected = [h0.shape, h1.shape, h2.shape, h2.shape, h2.shape, h2.shape]
    assert [r.shape for r in recs] == [tuple(s) for s in expected]
    assert all(r.dtype == torch.float32 and r.device == torch.device("cpu") for r in recs)
    assert all(r.requires_grad for r in recs)
    assert all(r.finite and not r.first_nonfinite for r in recs)
    assert [r.call for r in recs] == list(range(6))


def test_requires_grad_false_under_no_grad_and_frozen_input():
    model = nn.Sequential(nn.ReLU())
    recs = trace_shapes(model, torch.randn(2, 2), quiet=True)
    assert [r.requires_grad for r in recs] == [False, False]  # no parameters, input without grad
    lin = nn.Linear(2, 2)
    with torch.no_grad():
        recs = trace_shapes(lin, torch.randn(2, 2), quiet=True)
    assert recs[0].requires_grad is False


def test_first_nan_module_is_flagged_not_its_successors():
    model = nn.Sequential(nn.Linear(4, 4), LogOfNegative(), nn.Linear(4, 2), nn.Softmax(dim=1))
    with torch.no_grad():
        model[0].weight.zero_()
        model[0].bias.fill_(1.0)  # output 1 everywhere, log(1 - 10) = NaN
    out = io.StringIO()
    recs = trace_shapes(model, torch.randn(2, 4), file=out)
    by_name = {r.name: r for r in recs}
    assert by_name["0"].finite
    assert by_name["1"].has_nan and by_name["1"].first_nonfinite
    # NaN propagates to later modules; they contain NaN but are not "first"
    assert by_name["2"].has_nan and not by_name["2"].first_nonfinite
    assert by_name["(root)"].has_nan and not by_name["(root)"].first_nonfinite
    assert sum(r.first_nonfinite for r in recs) == 1
    text = out.getvalue()
    flagged = [line for line in text.splitlines() if "<-- first NaN/Inf" in line]
    assert len(flagged) == 1 and "LogOfNegative" in flagged[0]
    assert "first NaN/Inf in the output of module '1' (LogOfNegative)" in text


def test_default_output_is_the_current_stdout(capsys):
    """sys.stdout is looked up at call time, not bound when the module was imported."""
    trace_shapes(nn.Sequential(nn.Linear(2, 2)), torch.zeros(1, 2))
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:3] == ["#", "module", "class"] and "Linear" in out
    trace_shapes(nn.Sequential(nn.Linear(2, 2)), torch.zeros(1, 2), quiet=True)
    assert capsys.readouterr().out == ""


def test_inf_detected_separately_from_nan():
    class Blowup(nn.Module):
        def forward(self, x):
            return x / torch.zeros_like(x)  # +-inf for x != 0

    model = nn.Sequential(nn.Identity(), Blowup())
    recs = trace_shapes(model, torch.ones(1, 3), quiet=True)
    rec = recs[1]
    assert rec.has_inf and not rec.has_nan and rec.first_nonfinite
    assert torch.isinf(torch.ones(1, 3) / 0).all()  # the reference the flag is built on


def test_tuple_and_dict_outputs_give_one_record_per_tensor():
    model = TwoHeads()
    x = torch.randn(2, 4)
    recs = [r for r in trace_shapes(model, x, quiet=True) if r.name == "(root)"]
    assert [r.output for r in recs] == ["[0][0]", "[0][1]", "[1]['logits']"]
    assert [r.shape for r in recs] == [(2, 3), (2,), (2, 3)]
    assert [r.dtype for r in recs] == [torch.float32, torch.int64, torch.float64]
    assert [r.requires_grad for r in recs] == [True, False, True]


def test_hooks_removed_after_success_and_after_exception():
    model = nn.Sequential(nn.Linear(4, 3), nn.Linear(5, 2))  # second layer mismatches
    out = io.StringIO()
    with pytest.raises(RuntimeError):
        trace_shapes(model, torch.randn(2, 4), file=out)
    assert all(len(m._forward_hooks) == 0 for m in model.modules())
    # the partial table shows the module that did run
    assert "Linear" in out.getvalue() and "[2, 3]" in out.getvalue()
    ok = nn.Linear(2, 2)
    trace_shapes(ok, torch.randn(1, 2), quiet=True)
    assert len(ok._forward_hooks) == 0


def test_input_forms_tuple_and_dict():
    class Add(nn.Module):
        def forward(self, a, b=0):
            return a + b

    a, b = torch.ones(2, 3), torch.ones(2, 3)
    assert trace_shapes(Add(), (a, b), quiet=True)[0].shape == (2, 3)
    assert trace_shapes(Add(), {"a": a, "b": b}, quiet=True)[0].shape == (2, 3)


def test_shared_module_called_twice_gets_two_calls():
    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3)

        def forward(self, x):
            return self.fc(self.fc(x))

    recs = trace_shapes(Twice(), torch.randn(1, 3), quiet=True)
    assert [(r.call, r.name) for r in recs] == [(0, "fc"), (1, "fc"), (2, "(root)")]


def test_format_trace_table_columns():
    rec = ShapeRecord(
        3, "enc.1", "Conv2d", "[0]", (1, 8, 4, 4), torch.float16, torch.device("cpu"), False, True, False, True
    )
    lines = format_trace([rec]).splitlines()
    assert lines[0].split() == ["#", "module", "class", "output", "shape", "dtype", "device", "grad", "nan", "inf"]
    assert lines[1].split() == [
        "3",
        "enc.1",
        "Conv2d",
        "[0]",
        "[1,",
        "8,",
        "4,",
        "4]",
        "float16",
        "cpu",
        "no",
        "NaN",
        "-",
        "<--",
        "first",
        "NaN/Inf",
    ]


def test_invalid_arguments():
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        trace_shapes(lambda x: x, torch.zeros(1), quiet=True)
    with pytest.raises(TypeError, match="file must be"):
        trace_shapes(nn.Identity(), torch.zeros(1), file="out.txt")


def test_profile_steps_runs_warmup_plus_steps_and_writes_trace(tmp_path):
    calls = []
    w = torch.randn(16, 16, requires_grad=True)

    def step():
        calls.append(1)
        (w @ w).sum().backward()

    res = profile_steps(step, steps=3, warmup=2, trace_path=tmp_path / "sub" / "trace.json", row_limit=5)
    assert len(calls) == 5 and res.steps == 3
    assert "aten::mm" in res.table
    trace = json.loads(res.trace_path.read_text())
    names = [e.get("name") for e in trace["traceEvents"]]
    # 3 profiled steps: 3 forward matmuls (backward adds more aten::mm)
    assert names.count("aten::matmul") == 3


def test_profile_steps_validation():
    with pytest.raises(ValueError, match="steps must be an int >= 1"):
        profile_steps(lambda: None, steps=0)
    with pytest.raises(TypeError, match="step must be a callable"):
        profile_steps(3)
    with pytest.raises(ValueError, match="sort_by='bogus'"):
        profile_steps(lambda: torch.ones(2) + 1, steps=1, warmup=0, sort_by="bogus")
