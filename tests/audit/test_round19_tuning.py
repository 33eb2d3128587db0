"""Tuning on round 18's lessons (benchmarks/lint_corpus/heldout_round18.md): a number returned by a helper, a backward
handed a scaled gradient, made-up inputs times a constant, a resume in the else branch of 'is None', a differentiable
optimizer's step(loss); each true shape still reported."""

from __future__ import annotations

from tests.audit.helpers import found

NUMBER = """
    def train(x, y, model, opt, criterion):
        opt.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        opt.step()
        return {ret}, 0, 0

    loss = criterion(model(x0), y0)  # a check of the loss at module level, as the tutorial does
    epoch = 0
    print_loss_total = 0
    while epoch < n_epochs:
        epoch += 1
        x, y = random_batch(batch_size)
        loss, ec, dc = train(x, y, model, opt, criterion)
        print_loss_total += loss
"""


def test_tb204_a_number_returned_by_the_step_keeps_no_graph():
    """practical-pytorch: train() returns ``loss.data[0]`` (torch 0.3's scalar): silent."""
    for ret in ("loss.data[0]", "loss.item()", "float(loss)"):
        assert found(NUMBER.format(ret=ret), "TB204") == [], ret


def test_tb204_the_loss_tensor_returned_by_the_step_still_reported():
    assert found(NUMBER.format(ret="loss"), "TB204") == [16]


SCALED_GRAD = """
    def run_step(model, head, data, scaler, optimizer):
        features = model(data)
        f_grad = head.forward_backward(features)
        features.backward({grad})
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
"""


def test_tb112_a_backward_handed_the_scaled_gradient_is_scaled():
    assert found(SCALED_GRAD.format(grad="scaler.scale(f_grad)"), "TB112") == []
    assert found(SCALED_GRAD.format(grad="f_grad"), "TB112") == [5]


def test_tb203_made_up_inputs_times_a_constant_are_a_benchmark():
    src = """
        import torch

        def bench(model, size):
            model.eval()
            x = torch.ones(1, 3, size, size) {op}
            for i in range(100):
                out = model(x).view(-1).cpu().detach()
    """
    assert found(src.format(op="* 255."), "TB203") == []


RESUME_ELSE = """
    import argparse
    import torch

    def main():
        parser = argparse.ArgumentParser()
        parser.add_argument("--resume", default=None)
        parser.add_argument("--pretrain", default=None)
        args = parser.parse_args()
        model, optimizer, loader = build()
        if args.resume is None:
            if args.pretrain:
                model.load_state_dict(torch.load(args.pretrain)["model"])
        else:
            checkpoint = torch.load(args.resume)
            model.load_state_dict(checkpoint["model"])
            optimizer.load_state_dict(checkpoint["optimizer"])
        for x, y in loader:
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
"""


def test_tb403_a_resume_in_the_else_branch_of_is_none_is_the_programs_own():
    """The resume (else) goes to --all; the pretrained start in the 'is None' branch stays default."""
    assert found(RESUME_ELSE, "TB403", torch="old") == [13]
    assert found(RESUME_ELSE, "TB403", torch="old", show_all=True) == [13, 15]


def test_tb104_a_differentiable_optimizers_step_of_a_loss():
    src = """
        import torch.nn.functional as F

        def inner_loop(inner_model, inner_optimizer, support, iters):
            for _ in range(iters):
                loss_inner = 0
                for x_s, y_s in support:
                    loss_inner += F.cross_entropy(inner_model(x_s), y_s)
                inner_optimizer.step({arg})
    """
    assert found(src.format(arg="loss_inner"), "TB104") == []


def test_tb104_a_plain_step_without_zeroing_still_reported():
    src = """
        import torch.nn.functional as F

        def train(model, optimizer, loader):
            for x, y in loader:
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
    """
    assert found(src, "TB104") == [8]
