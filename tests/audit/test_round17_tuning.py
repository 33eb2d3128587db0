"""Tuning on round 16's lessons (benchmarks/lint_corpus/heldout_round16.md, the false alarms by kind): loops whose
backward is for an input's gradient, graphs used by autograd.grad or back-propagated later, mode switches the rules
misread, a helper shared with training, own restart files, own attributes, the entropy of log-probabilities; each
true shape still reported."""

from __future__ import annotations

import textwrap

from tests.audit.helpers import found
from trickbag.audit.lint import lint_file

PGD = """
    import torch

    def train(model, loader, opt, criterion, eps, alpha, iters):
        for x, y in loader:
            delta = torch.zeros_like(x)
            delta.requires_grad = True
            for _ in range(iters):
                loss = criterion(model(x + delta), y)
                {zero}
                loss.backward()
                grad = delta.grad.detach()
                delta.data = (delta + alpha * grad.sign()).clamp(-eps, eps)
                delta.grad.zero_()
            opt.zero_grad()
            criterion(model(x + delta.detach()), y).backward()
            opt.step()
"""


def test_pgd_attack_steps_are_not_gradient_accumulation():
    """The inner loop's backward is for delta.grad: fresh input gradients each step, not micro-batches."""
    for zero in ("pass", "opt.zero_grad()"):
        src = PGD.format(zero=zero)
        assert found(src, "TB103") == [] and found(src, "TB105") == []


def test_split_batch_accumulation_without_an_input_gradient_still_reported():
    src = """
        def step(model, x, y, opt, criterion, accum):
            for cx, cy in zip(x.chunk(accum), y.chunk(accum)):
                opt.zero_grad()
                criterion(model(cx), cy).backward()
            opt.step()
    """
    assert found(src, "TB103") == [4]
    assert found(src, "TB105") == [5]


def test_zero_grad_on_the_first_call_only_is_not_per_micro_batch():
    src = """
        class Model:
            def optimize_accumulate(self, iteration):
                if iteration {test}:
                    self.optimizer.zero_grad()
                self.loss = self.criterion(self.net(self.input), self.target)
                self.loss.backward()
                if iteration % 2 == 0:
                    self.optimizer.step()
                    self.optimizer.zero_grad()
    """
    assert found(src.replace("{test}", "== 0"), "TB103") == []
    assert found(src.replace("{test}", ">= 0"), "TB103") == [5]


CHOSEN_MODE = """
    def run_loop(loop_type, model, loader, opt, criterion):
        is_train = loop_type == "train"
        model = {switch}
        for x, y in loader:
            loss = criterion(model(x), y)
            if is_train:
                opt.zero_grad()
                loss.backward()
                opt.step()
"""


def test_tb202_a_mode_chosen_by_the_loop_type_switches_to_train_where_it_trains():
    assert found(CHOSEN_MODE.format(switch="model.train() if is_train else model.eval()"), "TB202") == []


def test_tb202_an_unconditional_eval_before_training_still_reported():
    assert found(CHOSEN_MODE.format(switch="model.eval()"), "TB202") == [4]


def test_tb202_an_imported_helper_that_switches_a_deepcopy_leaves_the_model_training(tmp_path):
    helper = """
        from copy import deepcopy

        def attack(model, x):
            {copy}
            model.eval()
            return x + 0.01 * model(x).sign()
    """
    main = """
        from attack import attack

        def train(model, loader, opt, criterion, epochs):
            for epoch in range(epochs):
                model.train()
                for x, y in loader:
                    x_adv = attack(model, x)
                    opt.zero_grad()
                    criterion(model(x_adv), y).backward()
                    opt.step()
    """
    lines = []
    for i, copy in enumerate(("model = deepcopy(model)", "pass")):
        (tmp_path / str(i)).mkdir()
        (tmp_path / str(i) / "attack.py").write_text(textwrap.dedent(helper.format(copy=copy)))
        (tmp_path / str(i) / "train.py").write_text(textwrap.dedent(main))
        lines.append([f.line for f in lint_file(tmp_path / str(i) / "train.py") if f.rule == "TB202"])
    assert lines == [[], [8]]


JACOBIAN = """
    import torch

    class Fromp:
        def cac_grad(self, loss, params):
            return torch.autograd.grad(loss, params, retain_graph=True)

        def cac_jacobian(self, preds, params):
            return [self.cac_grad(preds[:, k].sum(), params) for k in range(preds.shape[1])]

        def update_fisher(self, loader, params):
            self.model.eval()
            for data, _ in loader:
                preds = torch.softmax(self.model(data), -1)
                {use}
"""


def test_tb203_outputs_differentiated_through_methods_need_the_graph():
    assert found(JACOBIAN.format(use="self.fisher = self.cac_jacobian(preds, params)"), "TB203") == []


def test_tb203_outputs_only_stored_still_reported():
    assert found(JACOBIAN.format(use="self.fisher = preds.detach()"), "TB203") == [14]


META_BATCH = """
    import torch

    def train_loop(model, loader, optimizer, n_task):
        loss_all, task_count = [], 0
        for x in loader:
            loss = model.set_forward_loss(x)
            loss_all.append(loss)
            task_count += 1
            if task_count == n_task:
                {backward}
                optimizer.step()
                optimizer.zero_grad()
                task_count = 0
                loss_all = []
"""


def test_tb204_task_losses_kept_to_be_back_propagated_together():
    """MAML's meta-batch: the list of graphs is stacked and back-propagated every n_task tasks."""
    src = META_BATCH.format(backward="loss_q = torch.stack(loss_all).sum(0)\n                loss_q.backward()")
    assert found(src, "TB204") == []


def test_tb204_losses_kept_only_for_logging_still_reported():
    src = """
        def train(model, loader, optimizer, criterion):
            history = []
            for x, y in loader:
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                history.append(loss)
            return history
    """
    assert found(src, "TB204") == [9]


RESTART = """
    import argparse
    import torch

    def main():
        parser = argparse.ArgumentParser()
        parser.add_argument("--restart_dir")
        parser.add_argument("--{flag}", action="store_true")
        args = parser.parse_args()
        model = build(args)
        optimizer = get_optimizer_and_scheduler(args, model)
        if args.restart_dir:
            state = torch.load(f"{{args.restart_dir}}/last_model.pt")
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
        train(args, model, optimizer)
"""


def test_tb403_restart_of_the_programs_own_run_is_low():
    """A restart in the function that builds the optimizer (the loop lives in another module): --all."""
    src = RESTART.format(flag="debug")
    assert found(src, "TB403", torch="old") == []
    assert found(src, "TB403", torch="old", show_all=True) == [13]


def test_tb403_restart_beside_an_evaluation_only_flag_still_reported():
    assert found(RESTART.format(flag="eval").replace("build(args)", "build(args, args.eval)"), "TB403",
                 torch="old") == [13]


def test_tb302_an_attribute_the_file_reads_back_is_its_own():
    src = """
        import torch

        class SparseMM(torch.autograd.Function):
            @staticmethod
            def forward(ctx, sparse, dense):
                ctx.req_grad = dense.requires_grad
                ctx.save_for_backward(sparse)
                return torch.matmul(sparse, dense)

            @staticmethod
            def backward(ctx, grad_output):
                sparse, = ctx.saved_tensors
                return None, (torch.matmul(sparse.t(), grad_output) if ctx.req_grad else None)
    """
    assert found(src, "TB302") == []
    assert found(src.replace("if ctx.req_grad else None", "if True else None"), "TB302") == [7]


def test_tb303_entropy_of_log_probabilities_is_not_a_cross_entropy():
    src = """
        import torch.nn.functional as F

        def entropy(seq_logprobs, seq):
            return -(F.softmax(seq_logprobs, dim=2) * seq_logprobs).sum(2).sum(1) / (seq > 0).sum(1)
    """
    assert found(src, "TB303") == []
    wrong = """
        import torch.nn.functional as F

        def loss_fn(logits, targets):
            loss = -(targets * F.softmax(logits, dim=1)).sum(1).mean()
            return loss
    """
    assert found(wrong, "TB303") == [5]


VAL_ALIAS = """
    import torch

    crnn = CRNN()

    def val(net, loader):
        {switch}
        for x, y in loader:
            preds = crnn(x)
            print((preds.argmax(1) == y).float().mean())

    def train(loader, val_loader, opt, criterion):
        for x, y in loader:
            crnn.train()
            opt.zero_grad()
            criterion(crnn(x), y).backward()
            opt.step()
        with torch.no_grad():
            val({arg}, val_loader)
"""


def test_tb201_a_parameter_every_call_binds_to_the_global_model_is_that_model():
    """val(net) switches net, called as val(crnn): the crnn its forward uses is in eval mode: silent."""
    assert found(VAL_ALIAS.format(switch="net.eval()", arg="crnn"), "TB201") == []


def test_tb201_a_switch_of_another_module_still_reported():
    assert found(VAL_ALIAS.format(switch="net.eval()", arg="other"), "TB201") == [9]


def test_tb201_a_predict_helper_of_the_training_step_two_calls_deep_is_training():
    """predict_poses() runs in process_batch(), whose losses the training step back-propagates."""
    src = """
        class Trainer:
            def run_epoch(self):
                for inputs in self.train_loader:
                    outputs, losses = self.process_batch(inputs)
                    self.optimizer.zero_grad()
                    losses["loss"].backward()
                    self.optimizer.step()

            def process_batch(self, inputs):
                outputs = self.predict_poses(inputs)
                return outputs, self.compute_losses(inputs, outputs)

            def predict_poses(self, inputs):
                outputs = {}
                for f_i in self.frame_ids:
                    outputs[f_i] = self.models["pose"](inputs[f_i])
                return outputs
    """
    assert found(src, "TB201", show_all=True) == [] and found(src, "TB203", show_all=True) == []
