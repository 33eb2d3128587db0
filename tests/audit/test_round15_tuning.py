"""Tuning on the rest of round 14's lessons (benchmarks/lint_corpus/heldout_round14.md, "Next"): TB112 on a lazy
regularisation pass, TB108 on a running mean of scalars named like an EMA; the true shapes still reported."""

from __future__ import annotations

import textwrap

from tests.audit.helpers import found
from trickbag.audit.lint import lint_source

LAZY_REG = """
    import torch

    def train_d(D, loader, d_opt, scaler, reg_every):
        for step, real in enumerate(loader):
            d_opt.zero_grad()
            with torch.autocast("cuda"):
                loss = D(real).mean()
            scaler.scale(loss).backward()
            scaler.step(d_opt)
            scaler.update()
            if step % reg_every == 0:
                {zero}
                real.requires_grad_(True)
                r1 = torch.autograd.grad(D(real).sum(), real, create_graph=True)[0].pow(2).mean()
                r1.backward()
                d_opt.step()
"""


def test_tb112_lazy_regularisation_pass_is_a_new_update():
    """StyleGAN2's lazy R1 pass: zero_grad, an unscaled penalty's backward, a plain step: new gradients, not the
    scaler's step taken twice: silent."""
    assert found(LAZY_REG.format(zero="d_opt.zero_grad()"), "TB112") == []


def test_tb112_plain_step_after_scaler_step_on_the_same_gradients_still_reported():
    """Without the zero_grad the plain step adds the penalty's gradients to the ones the scaler already applied
    and steps again on them: reported on the plain step."""
    assert found(LAZY_REG.format(zero="pass"), "TB112") == [17]


def test_tb112_zeroing_another_optimizer_does_not_make_the_gradients_fresh():
    assert found(LAZY_REG.format(zero="g_opt.zero_grad()"), "TB112") == [17]


EMA_LOOP = """
    def train(model, loader, opt, ema, loss_fn, accum):
        for i, (x, y) in enumerate(loader):
            out = model(x)
            loss = loss_fn(out, y) / accum
            loss.backward()
            {update}
            if (i + 1) % accum == 0:
                opt.step()
                opt.zero_grad()
"""


def test_tb108_running_mean_of_scalars_is_no_weight_average():
    """LeCam regularisation's anchors (``lecam_ema.update(out.mean().item(), "D_real", step)``): numbers, not
    weights, updated per micro-batch on purpose: silent."""
    assert found(EMA_LOOP.format(update='ema.update(out.mean().item(), "D_real", i)'), "TB108") == []
    assert found(EMA_LOOP.format(update="ema.update(float(loss))"), "TB108") == []


def test_tb108_weight_average_per_micro_batch_still_reported():
    assert found(EMA_LOOP.format(update="ema.update(model)"), "TB108") == [7]


COND_NO_GRAD = """
    import contextlib
    import torch

    def train(model, loader, val_loader, opt, loss_fn, needs_grad):
        for x, y in loader:
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
        model.eval()
        {ctx}
            for x, y in val_loader:
                print(loss_fn(model(x), y).item())
"""


def test_tb203_conditional_no_grad_context_counts_as_no_grad():
    """``with torch.no_grad() if not needs_grad else contextlib.nullcontext():`` turns gradients off unless the
    author asks for them: silent."""
    ctx = "with torch.no_grad() if not needs_grad else contextlib.nullcontext():"
    assert found(COND_NO_GRAD.format(ctx=ctx), "TB203") == []


def test_tb203_evaluation_with_gradients_still_reported():
    assert found(COND_NO_GRAD.format(ctx="with contextlib.nullcontext():"), "TB203") != []


ADD_MODULE = """
    import torch

    def build(d, k):
        model = torch.nn.Sequential()
        model.add_module("linear", torch.nn.Linear(d, k))
        model.add_module("last", {last})
        return model

    def step(model, loss, opt, x, y):
        opt.zero_grad()
        out = loss.forward(model.forward(x), y)
        out.backward()
        opt.step()

    def main(x, y):
        model = build(4, 3)
        loss = torch.nn.CrossEntropyLoss()
        step(model, loss, torch.optim.SGD(model.parameters(), lr=0.1), x, y)
"""


def test_tb303_sequential_filled_by_add_module_up_to_a_softmax():
    """A Sequential whose last add_module is a softmax, its ``forward`` fed to ``CrossEntropyLoss().forward``
    (real mistake 123's shape): reported; the same model ending in a Linear layer: silent."""
    assert found(ADD_MODULE.format(last="torch.nn.Softmax(dim=1)"), "TB303") == [12]
    assert found(ADD_MODULE.format(last="torch.nn.Linear(k, k)"), "TB303") == []


DEFAULT_LOSS = """
    import torch
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)
            self.out = nn.Softmax(dim=1)

        def forward(self, x):
            h = self.out(self.fc(x))
            return h

    class Trainer:
        def __init__(self, loss_func={loss}):
            self.loss_func = loss_func

        def train_batch(self, model, opt, x, y):
            opt.zero_grad()
            loss = self.loss_func(model(x), y)
            loss.backward()
            opt.step()
"""


def test_tb303_loss_from_a_parameter_default():
    """``def __init__(self, loss_func=nn.CrossEntropyLoss())`` stored as ``self.loss_func`` (real mistake 121's
    shape): reported on the model whose forward ends in a softmax layer; a default MSELoss: silent."""
    assert found(DEFAULT_LOSS.format(loss="nn.CrossEntropyLoss()"), "TB303") == [21]
    assert found(DEFAULT_LOSS.format(loss="nn.MSELoss()"), "TB303") == []


DDI = """
    import torch

    def data_dependent_init(model, loader, n_iter):
        model.train()
        {between}
        with torch.no_grad():
            for i, (x, _) in enumerate(loader):
                _ = model(x)
                if i == n_iter:
                    break
"""


def test_tb201_train_right_before_a_no_grad_pass_is_intent():
    """Glow's data-dependent initialisation: ``model.train()``, a print and a counter, then a gradient-free pass
    that sets ActNorm statistics: reported only with ``--all``, with the reason."""
    src = DDI.format(between='print("init")\n        num_iter = 0')
    assert found(src, "TB201") == []
    low = [f for f in lint_source(textwrap.dedent(src), select=["TB201"], show_all=True)]
    assert len(low) == 1 and low[0].confidence == "low" and "on purpose" in low[0].message


def test_tb201_a_model_call_between_train_and_no_grad_keeps_the_finding_certain():
    """Something done with the model between the switch and the pass: no evidence of intent; the pass is still
    what it was (reported as before this change, whatever its confidence)."""
    src = DDI.format(between="model.eval()\n        model.train()\n        model.to('cpu')")
    low = [f for f in lint_source(textwrap.dedent(src), select=["TB201"], show_all=True)]
    assert all("on purpose" not in f.message for f in low)


EXPORT_CHECK = """
    import copy
    import torch

    def export_encoder(encoder, path, loader):
        encoder.eval()
        chunk = torch.randn(1, 1, 67, 80)
        att_cache = torch.zeros(1, 4, 8, 16)
        torch.onnx.export(encoder, (chunk, att_cache), path)
        torch_chunk, torch_cache = {inputs}
        outs = []
        for i in range(10):
            out, torch_cache = encoder(torch_chunk, torch_cache)
            outs.append(out)
        return torch.cat(outs, dim=-1)
"""


def test_tb203_export_check_on_copies_of_random_inputs_is_no_evaluation():
    """wenet's export script runs the model on copies (``copy.deepcopy``, ``.clone()``) of the random example
    inputs it exported with, to compare with the ONNX model: made-up inputs, a shape/equivalence check: silent."""
    assert found(EXPORT_CHECK.format(inputs="copy.deepcopy(chunk), copy.deepcopy(att_cache)"), "TB203") == []
    assert found(EXPORT_CHECK.format(inputs="chunk.clone(), att_cache.detach().clone()"), "TB203") == []


def test_tb203_export_script_evaluating_on_data_still_reported():
    """A copy of a batch of the data is data: the check is an evaluation, reported on its forward."""
    assert found(EXPORT_CHECK.format(inputs="copy.deepcopy(next(iter(loader))), copy.deepcopy(att_cache)"),
                 "TB203") == [13]


INVERT = """
    import torch
    import torch.nn.functional as F

    def invert_trigger(model, images, target):
        mask = torch.zeros_like(images[:1], requires_grad=True)
        opt = torch.optim.Adam([mask], lr=0.1)
        for _ in range(20):
            opt.zero_grad()
            F.cross_entropy(model(images * (1 - mask) + mask), target).backward()
            opt.step()
        return mask.detach()

    def train(model, loader, {optimizer}, epochs):
        model.train()
        for epoch in range(epochs):
            for images, labels in loader:
                optimizer.zero_grad()
                F.cross_entropy(model(images), labels).backward()
                optimizer.step()
            if epoch % 5 == 0:
                model.eval()
                images, labels = next(iter(loader))
                invert_trigger(model, images, labels)
{caller}"""


def test_tb202_optimizer_from_the_caller_trains_the_model():
    """FLIP (real mistake 115): the only optimizer the file builds takes a tensor list (``Adam([mask])``), but the
    training function steps the optimizer its caller (another module) gives it: the model is trained, the tensor-
    only doubt does not apply: reported by default on the eval switch."""
    assert found(INVERT.format(optimizer="optimizer", caller=""), "TB202") == [22]


def test_tb202_tensor_only_doubt_stays_when_this_file_supplies_the_optimizer():
    """Called in this file with the tensor-list optimizer, or stepping one it builds itself: still uncertain (the
    model may be fixed on purpose): only with --all."""
    caller = """
    def main(model, loader, z):
        train(model, loader, torch.optim.Adam([z]), 10)
"""
    src = INVERT.format(optimizer="optimizer", caller=caller)
    assert found(src, "TB202") == []
    assert found(src, "TB202", show_all=True) == [22]
    own = INVERT.format(optimizer="z", caller="").replace("model.train()\n",
                                                          "model.train()\n        optimizer = torch.optim.Adam([z])\n")
    assert found(own, "TB202") == []
    assert found(own, "TB202", show_all=True) == [23]


def test_tb108_ema_of_an_output_mean_is_no_weight_average():
    """``ema.update(out.mean())`` / ``ema.update(torch.mean(out))``: the discriminator's mean output, one number
    (a 0-d tensor), not weights: silent."""
    assert found(EMA_LOOP.format(update="ema.update(out.mean())"), "TB108") == []
    assert found(EMA_LOOP.format(update="ema.update(torch.mean(out))"), "TB108") == []


def test_tb108_reduction_over_one_dimension_or_a_constant_decay_still_reported():
    """A mean over one dimension is a tensor of many values, and a constant may be the decay of an EMA that holds
    the model: still read as a weight average updated per micro-batch."""
    assert found(EMA_LOOP.format(update="ema.update(out.mean(0))"), "TB108") == [7]
    assert found(EMA_LOOP.format(update="ema.update(0.999)"), "TB108") == [7]


def test_tb203_conditional_no_grad_context_through_a_local_name():
    """``ctx = torch.no_grad() if not needs_grad else nullcontext()`` then ``with ctx:``: the same deliberate
    choice as the inline form: silent; a name bound only to ``nullcontext()`` or to a conditional autocast still
    leaves gradients on: reported."""
    chosen = "ctx = torch.no_grad() if not needs_grad else contextlib.nullcontext()\n        with ctx:"
    assert found(COND_NO_GRAD.format(ctx=chosen), "TB203") == []
    plain = "ctx = contextlib.nullcontext()\n        with ctx:"
    assert found(COND_NO_GRAD.format(ctx=plain), "TB203") == [14]
    cast = 'ctx = torch.autocast("cuda") if needs_grad else contextlib.nullcontext()\n        with ctx:'
    assert found(COND_NO_GRAD.format(ctx=cast), "TB203") == [14]
