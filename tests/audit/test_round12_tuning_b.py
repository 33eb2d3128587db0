"""Tuning on round 12's false alarms and misses (benchmarks/lint_corpus/heldout_round12.md), second pass: one kind
each, the false-alarm shape silent and the true shape still reported."""

from __future__ import annotations

import textwrap

from tests.audit.helpers import found
from trickbag.audit.lint import lint_file

ALGORITHM = """
    import copy

    import torch
    import torch.nn.functional as F

    class Algorithm(torch.nn.Module):
        pass

    class SMA(Algorithm):
        def __init__(self, featurizer, classifier):
            super().__init__()
            self.network = torch.nn.Sequential(featurizer, classifier)
            self.network_sma = copy.deepcopy(self.network)
            self.optimizer = torch.optim.Adam(self.network.parameters())

        def update(self, x, y):
            loss = F.cross_entropy(self.network(x), y)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            return loss.item()

        def predict(self, x):
            self.network_sma.eval()
            return self.network_sma(x)
"""

ACCURACY = """
    import torch

    def accuracy(algorithm, loader):
        correct = 0
        {guard}
            for x, y in loader:
                correct += (algorithm.predict(x).argmax(1) == y).sum().item()
        return correct
"""


def _project_findings(tmp_path, guard: str) -> list[int]:
    (tmp_path / ".git").mkdir()
    (tmp_path / "pkg" / "lib").mkdir(parents=True)
    (tmp_path / "pkg" / "algorithms.py").write_text(textwrap.dedent(ALGORITHM))
    (tmp_path / "pkg" / "lib" / "misc.py").write_text(textwrap.dedent(ACCURACY.format(guard=guard)))
    return [f.line for f in lint_file(tmp_path / "pkg" / "algorithms.py") if f.rule == "TB203"]


def test_tb203_predict_shared_by_training_and_an_evaluation_under_no_grad_elsewhere(tmp_path):
    """DomainBed: ``predict()`` (of the averaged network here; of the trained one where ``update()`` computes its loss
    through it) is the evaluation forward of ``lib/misc.accuracy()``, another module, which holds
    ``torch.no_grad()``: silent."""
    assert _project_findings(tmp_path, "with torch.no_grad():") == []


def test_tb203_predict_evaluated_elsewhere_with_gradients_is_still_reported(tmp_path):
    assert _project_findings(tmp_path, "if True:") == [26]


DARTS_UTILS = """
    from torch.autograd import Variable

    def get_batch(source, i, seq_len, evaluation=False):
        data = Variable(source[i:i + seq_len], volatile=evaluation)
        target = Variable(source[i + 1:i + 1 + seq_len])
        return data, target
"""

DARTS_TRAIN = """
    import torch.nn as nn
    from utils import get_batch

    def evaluate(model, data_source, seq_len):
        model.eval()
        total = 0
        for i in range(0, data_source.size(0) - 1, seq_len):
            data, targets = get_batch(data_source, i, seq_len{flag})
            log_prob = model(data)
            total += nn.functional.nll_loss(log_prob, targets).data
        return total
"""


def _darts(tmp_path, flag: str) -> list[int]:
    (tmp_path / ".git").mkdir(exist_ok=True)
    (tmp_path / "utils.py").write_text(textwrap.dedent(DARTS_UTILS))
    (tmp_path / "train.py").write_text(textwrap.dedent(DARTS_TRAIN.format(flag=flag)))
    return [f.line for f in lint_file(tmp_path / "train.py") if f.rule == "TB203"]


def test_tb203_volatile_batches_from_a_project_helper(tmp_path):
    """darts: ``get_batch(..., evaluation=True)`` wraps the data in ``Variable(volatile=evaluation)``, the no_grad of
    torch <= 0.3: silent; without the flag the forward records a graph."""
    assert _darts(tmp_path, ", evaluation=True") == []
    assert _darts(tmp_path, "") == [10]


NEUMANN = """
    import torch
    import torch.nn.functional as F
    from torch import autograd

    def neumann(model, batch, v):
        def hvp(y, w, v):
            first = autograd.grad(y, w, retain_graph=True, create_graph=True)[0]
            return autograd.grad((first * v).sum(), w)[0]

        model.eval()
        estimate = v
        for _ in range(10):
            loss = F.cross_entropy(model(batch[0]), batch[1])
            {use}
            estimate = estimate + v
        model.train()
        return estimate
"""


def test_tb203_a_loop_that_differentiates_its_loss_is_no_evaluation():
    """DomainBed's Neumann series: the loss of the forward goes to a Hessian-vector product (``autograd.grad``)."""
    assert found(NEUMANN.format(use="v = v - hvp(loss, model.weight, v).detach()"), "TB203") == []
    assert found(NEUMANN.format(use="v = v * loss.item()"), "TB203") == [14]


DATAPARALLEL = """
    import torch
    import torch.nn as nn
    from model import RNNModel

    model = RNNModel(dropout=0.5)
    if torch.cuda.device_count() > 1:
        parallel_model = nn.DataParallel(model, dim=1).cuda()
    else:
        parallel_model = model.cuda()

    @torch.no_grad()
    def evaluate(loader):
        {switch}
        total = 0
        for x, y in loader:
            total += nn.functional.nll_loss(parallel_model(x), y).item()
        return total

    def train(loader, optimizer):
        model.train()
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.nll_loss(parallel_model(x), y).backward()
            optimizer.step()
"""


def test_tb201_eval_on_the_model_a_data_parallel_wrapper_holds():
    """darts: ``model.eval()`` then ``parallel_model(x)``, where ``parallel_model`` is ``model`` moved or wrapped in
    ``nn.DataParallel`` everywhere it is assigned: the replicas copy the inner module's mode."""
    assert found(DATAPARALLEL.format(switch="model.eval()"), "TB201") == []
    assert found(DATAPARALLEL.format(switch="pass"), "TB201") == [17]


GLUE = """
    def train(model, optimizer, loader, args):
        for step, (x, y) in enumerate(loader):
            loss = model(x, y)
            if args.gradient_accumulation_steps > 1:
                {divide}
            if args.fp16:
                optimizer.backward(loss)
            else:
                loss.backward()
            if (step + 1) % args.gradient_accumulation_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
"""


def test_tb105_apex_optimizer_backward_of_a_divided_loss():
    """DeepSpeedExamples' GLUE: ``optimizer.backward(loss)`` (apex FP16_Optimizer) back-propagates its argument,
    divided under ``if gradient_accumulation_steps > 1:``."""
    assert found(GLUE.format(divide="loss = loss / args.gradient_accumulation_steps"), "TB105") == []
    assert found(GLUE.format(divide="pass"), "TB105") == [8, 10]


GAN_STEP = """
    import torch

    class Trainer:
        def train(self, loader, D, D_opt, D_loss_fn, accumulate):
            total_disc_loss = torch.tensor(0.)
            D_opt.zero_grad()
            for i in range(accumulate):
                x = next(loader)
                divergence = D_loss_fn(D(x))
                disc_loss = divergence / accumulate
                disc_loss.backward()
                total_disc_loss += divergence
                {step}
            self.d_loss = float(total_disc_loss.item() / accumulate)
            D_opt.step()
"""


def test_tb204_a_sum_over_the_micro_batches_of_one_update():
    """lightweight-gan: the sum starts in every ``train()`` call (one optimizer update) and runs over its
    accumulation micro-batches, whose backward freed their graphs; a loop that also steps keeps it an epoch long."""
    assert found(GAN_STEP.format(step="pass"), "TB204") == []
    assert found(GAN_STEP.format(step="D_opt.step()"), "TB204") == [13]


MEGATRON = """
    def forward_step(forward_step_func, data_iterator, model, num_microbatches, forward_data_store,
                     collect_non_loss_data=False):
        output_tensor, loss_func = forward_step_func(data_iterator, model)
        if not collect_non_loss_data:
            loss = loss_func(output_tensor)
            forward_data_store.append(loss.detach())
            output_tensor = loss / num_microbatches
        else:
            data = loss_func(output_tensor, {kw}=True)
            forward_data_store.append(data)
        return output_tensor

    def forward_backward(forward_step_func, data_iterator, model, num_microbatches, optimizer):
        store = []
        for _ in range(num_microbatches):
            out = forward_step(forward_step_func, data_iterator, model, num_microbatches, store)
            out.backward()
        optimizer.step()
        return store
"""


def test_tb204_data_a_call_is_told_is_not_a_loss():
    """Megatron: ``loss_func(output, non_loss_data=True)`` returns data to collect, not a loss."""
    assert found(MEGATRON.format(kw="non_loss_data"), "TB204") == []


EPOCH_FUNCTION = """
    import torch

    def train_epoch(net, loader, optimizer, scheduler, criterion):
        {first}
        net.train()
        for x, y in loader:
            optimizer.zero_grad()
            criterion(net(x), y).backward()
            optimizer.step()
        {last}
"""


def test_tb101_scheduler_at_the_top_of_an_epoch_function():
    """Missed mistake 95: the epoch function steps the scheduler first, before the optimizer steps of its batch
    loop; stepped after the loop it is right."""
    assert found(EPOCH_FUNCTION.format(first="scheduler.step()", last="pass"), "TB101") == [5]
    assert found(EPOCH_FUNCTION.format(first="pass", last="scheduler.step()"), "TB101") == []


def test_tb101_code_for_torch_0_3_is_uncertain():
    """darts: ``Variable(x, volatile=True)`` / ``.cuda(async=True)`` / ``loss.data[0]`` code was written when the
    scheduler was stepped first: low confidence (``--all``) with the reason."""
    old = EPOCH_FUNCTION.format(first="scheduler.step()", last="return loss.data[0]")
    assert found(old, "TB101") == []
    assert found(old, "TB101", show_all=True) == [5]


PAIR = """
    import torch

    class OptimizerScheduler:
        def __init__(self, optimizer, scheduler):
            self.optimizer, self.scheduler = optimizer, scheduler

        def step(self):
            {body}

    class Runner:
        def __init__(self, model, optimizer, scheduler):
            self.model = model
            self.optimizer_scheduler = OptimizerScheduler(optimizer, scheduler)

        def run_train_step(self, batch):
            loss = self.model(**batch).loss
            loss.backward()
            self.optimizer_scheduler.step()
"""


def test_tb101_scheduler_first_in_the_update_helper_of_the_training_step():
    """Missed mistake 96: the training step calls a helper object's ``step()`` after its backward, and that helper
    steps the scheduler before the optimizer."""
    wrong = PAIR.format(body="self.scheduler.step()\n            self.optimizer.step()")
    right = PAIR.format(body="self.optimizer.step()\n            self.scheduler.step()")
    assert found(wrong, "TB101") == [9]
    assert found(right, "TB101") == []
