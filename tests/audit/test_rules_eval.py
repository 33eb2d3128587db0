"""Evaluation rules (TB2xx): eval() set and undone, evaluation without gradients, losses kept with
their graph; each with a firing and a non-firing snippet."""

import textwrap

import pytest

from .helpers import fires, found


def test_tb201_method_named_validate_without_eval():
    wrong = """
    class Runner:
        @torch.no_grad()
        def validate(self):
            hits = 0
            for x, y in self.val_loader:
                hits += (self.model(x).argmax(1) == y).sum().item()
            return hits
    """
    right = wrong.replace("            hits = 0", "            self.model.eval()\n            hits = 0")
    fires("TB201", wrong, [7], right, show_all=True)
    assert found(wrong, "TB201") == []  # run from another module only: its caller may call eval()
    called = wrong + "    def fit(self):\n            self.model.train()\n            self.validate()\n"
    assert found(called, "TB201") == [7]  # the caller leaves the model training


def test_tb201_caller_switches_to_eval_before_calling():
    src = """
    def evaluate(net, loader):
        with torch.inference_mode():
            return [net(x) for x, _ in loader]

    def main(net, loader):
        net.eval()
        evaluate(net, loader)
    """
    assert found(src, "TB201") == []


def test_tb201_lightning_validation_step_is_skipped():
    src = """
    class Lit(pl.LightningModule):
        def training_step(self, batch, i):
            return self.model(batch[0]).mean()

        def validation_step(self, batch, i):
            self.log("v", self.model(batch[0]).mean())
    """
    assert found(src, "TB201") == [] and found(src, "TB203") == []


def test_tb202_eval_before_the_training_loop():
    wrong = """
    def finetune(model, loader, opt):
        model.eval()
        for x, y in loader:
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
    """
    right = wrong.replace("model.eval()", "model.train()")
    fires("TB202", wrong, [3], right)


def test_tb202_frozen_teacher_and_phase_loop_are_fine():
    src = """
    teacher.eval()
    for epoch in range(3):
        for phase in ["train", "val"]:
            model.train() if phase == "train" else model.eval()
            for x, y in loaders[phase]:
                opt.zero_grad()
                with torch.no_grad():
                    t = teacher(x)
                loss = crit(model(x), y) + kd(model(x), t)
                if phase == "train":
                    loss.backward()
                    opt.step()
    """
    assert found(src, "TB202") == []


def test_tb203_eval_loop_after_eval_without_no_grad():
    wrong = """
    model.eval()
    preds = []
    for batch in test_loader:
        preds.append(model(batch).argmax(-1))
    """
    right = """
    model.eval()
    preds = []
    with torch.inference_mode():
        for batch in test_loader:
            preds.append(model(batch).argmax(-1))
    """
    fires("TB203", wrong, [5], right)


def test_tb203_caller_disables_grad_and_gradient_based_eval_is_skipped():
    src = """
    def evaluate(model, loader):
        model.eval()
        return sum(model(x).sum().item() for x in loader)

    def saliency(model, x):
        model.eval()
        x.requires_grad_(True)
        model(x).max().backward()
        return x.grad

    with torch.no_grad():
        evaluate(model, val_loader)
    """
    assert found(src, "TB203") == []


def test_tb204_append_and_sum_with_graph_in_training_loop():
    wrong = """
    history = []
    running = 0.0
    for x, y in loader:
        opt.zero_grad()
        loss = crit(model(x), y)
        loss.backward()
        opt.step()
        history.append(loss)
        running += crit(model(x), y)
    """
    right = wrong.replace("history.append(loss)", "history.append(loss.item())").replace(
        "running += crit(model(x), y)", "running += loss.detach() * x.size(0)")
    fires("TB204", wrong, [9, 10], right)


def test_tb204_losses_summed_for_one_backward_or_reset_each_iteration():
    src = """
    for batch in loader:
        total = 0
        for head in heads:
            total = total + crit(model(batch)[head], batch[head])
        total.backward()
        opt.step()
        opt.zero_grad()
    for x, y in loader:
        with torch.no_grad():
            val_sum += crit(model(x), y)
        crit(model(x), y).backward()
        opt.step()
        opt.zero_grad()
    """
    assert found(src, "TB204") == []


@pytest.mark.parametrize("acc", ['meters["loss"] = meters["loss"] + losses', "stats[k] = stats[k] + losses",
                                 "self.total = self.total + losses", 'log["loss"] = log["loss"] + losses.sum()'])
def test_tb204_running_sum_spelled_out_on_a_subscript_or_attribute(acc):
    wrong = f"""
    class Loop:
        def fit(self, model, opt, loader, k="loss"):
            meters, stats, log = {{"loss": 0.0}}, {{"loss": 0.0}}, {{"loss": 0.0}}
            self.total = 0.0
            for x, y in loader:
                losses = sum(model(x, y).values())
                opt.zero_grad()
                losses.backward()
                opt.step()
                {acc}
    """
    fires("TB204", wrong, [11], wrong.replace("+ losses", "+ losses.item()"))


def test_tb204_a_loss_built_up_from_its_own_terms_is_not_a_running_sum():
    src = """
    for x, y in loader:
        out = model(x)
        out["loss"] = crit(out["logits"], y)
        out["loss"] = out["loss"] + 0.1 * out["aux"]
        opt.zero_grad()
        out["loss"].backward()
        opt.step()
    """
    assert found(src, "TB204") == []


@pytest.mark.parametrize("loss", [
    "F.binary_cross_entropy", "F.binary_cross_entropy_with_logits", "F.poisson_nll_loss", "F.gaussian_nll_loss",
    "F.margin_ranking_loss", "F.hinge_embedding_loss", "F.multilabel_margin_loss", "F.soft_margin_loss",
    "F.multilabel_soft_margin_loss", "F.multi_margin_loss", "F.triplet_margin_with_distance_loss",
    "nn.BCELoss()", "nn.PoissonNLLLoss()", "nn.GaussianNLLLoss()", "nn.HingeEmbeddingLoss()",
    "nn.MultiLabelMarginLoss()", "nn.SoftMarginLoss()", "nn.MultiLabelSoftMarginLoss()", "nn.MultiMarginLoss()",
    "nn.TripletMarginWithDistanceLoss()"])
def test_tb204_every_torch_loss_function_is_a_loss(loss):
    wrong = f"""
    import torch.nn as nn
    import torch.nn.functional as F
    recon_losses = []
    for x, _ in loader:
        opt.zero_grad()
        recon = {loss}(vae(x), x) / x.size(0)
        (recon + kld).backward()
        opt.step()
        recon_losses.append(recon)
    """
    fires("TB204", wrong, [10], wrong.replace("append(recon)", "append(recon.item())"))


@pytest.mark.parametrize("restore", ["net.train(prev_mode)", "net.train(mode=prev_mode)", "net.train(True)"])
def test_tb202_train_with_a_saved_mode_restores_it(restore):
    src = f"""
    def validate(net, loader):
        prev_mode = net.training
        net.eval()
        with torch.no_grad():
            score = sum(net(x).sum().item() for x in loader)
        {restore}
        return score

    def fit(net, loader, val_loader, opt):
        net.train()
        for epoch in range(3):
            for x in loader:
                opt.zero_grad()
                net(x).sum().backward()
                opt.step()
            validate(net, val_loader)
    """
    assert found(src, "TB202") == []
    assert found(src.replace(restore, "net.train(False)"), "TB202") == [17]


def test_tb204_loss_handed_to_a_metrics_helper_that_keeps_it():
    wrong = """
    class Meter:
        def __init__(self):
            self.totals = {}

        def add(self, key, v):
            self.totals[key] = self.totals.get(key, 0.0) + v

    def fit(net, loader, opt):
        meter = Meter()
        for x, y in loader:
            loss = F.mse_loss(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            meter.add("mse", loss)
    """
    right = wrong.replace('meter.add("mse", loss)', 'meter.add("mse", loss.item())')
    fires("TB204", wrong, [16], right)


def test_tb204_function_helper_and_dict_get_running_sum():
    wrong = """
    def record(stats, value):
        stats.append(value)

    def fit(net, loader, opt):
        history, sums = [], {}
        for x, y in loader:
            loss = F.mse_loss(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            record(history, loss)
            sums["mse"] = sums.get("mse", 0.0) + loss
    """
    right = wrong.replace("record(history, loss)", "record(history, loss.item())").replace(
        '0.0) + loss', '0.0) + loss.item()')
    fires("TB204", wrong, [12, 13], right)


def test_tb204_helper_summing_losses_it_backpropagates_is_not_reported():
    src = """
    class Accumulator:
        def __init__(self):
            self.pending = 0.0

        def push(self, loss):
            self.pending = self.pending + loss

        def flush(self, opt):
            self.pending.backward()
            opt.step()
            self.pending = 0.0

    def fit(net, loader, opt):
        acc = Accumulator()
        for i, (x, y) in enumerate(loader):
            loss = F.mse_loss(net(x), y)
            loss.backward()
            acc.push(loss)
    """
    assert found(src, "TB204") == []


def test_tb204_loop_less_helper_keeps_the_loss_in_a_module_list_or_attribute():
    wrong = """
    history = []

    def train_batch(model, opt, x, y):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        history.append(loss)

    class Runner:
        def step(self, x, y):
            loss = self.crit(self.net(x), y)
            self.total = self.total + loss
            return loss

        def run(self, loader):
            for x, y in loader:
                self.opt.zero_grad()
                self.step(x, y).backward()
                self.opt.step()

    for x, y in loader:
        train_batch(model, opt, x, y)
    """
    right = wrong.replace("history.append(loss)", "history.append(loss.item())") \
        .replace("self.total + loss", "self.total + loss.detach()")
    fires("TB204", wrong, [9, 14], right)


def test_tb204_loop_less_helper_not_called_from_a_training_loop_is_silent():
    src = """
    class Meter:
        def score(self, x, y):
            loss = self.crit(self.net(x), y)
            self.seen.append(loss)

        @torch.no_grad()
        def evaluate(self, loader):
            for x, y in loader:
                self.score(x, y)
    """
    assert found(src, "TB204") == []


def test_tb204_loss_appended_to_a_module_global_in_a_function_loop():
    src = """
    curve = []

    def fit(net, batches, opt):
        for a, b in batches:
            err = F.l1_loss(net(a), b)
            opt.zero_grad()
            err.backward()
            opt.step()
            curve.append(err)
    """
    assert found(src, "TB204") == [10]
    assert found(src.replace("curve.append(err)", "curve.append(err.item())"), "TB204") == []


def test_tb201_full_batch_validation_forward_in_the_epoch_loop():
    src = """
    for ep in range(30):
        net.train()
        opt.zero_grad()
        crit(net(feats_tr), lab_tr).backward()
        opt.step()
        with torch.no_grad():
            acc = (net(feats_val).argmax(-1) == lab_val).float().mean().item()
    """
    assert found(src, "TB201") == [8]
    fixed = src.replace("        with torch.no_grad():", "        net.eval()\n        with torch.no_grad():")
    assert found(fixed, "TB201") == []
    assert found(src.replace("feats_val", "feats_tr").replace("lab_val", "lab_tr"), "TB201") == []


def test_tb204_step_method_growing_an_attribute_without_a_loop_in_the_file():
    wrong = """
    import torch
    class Learner:
        def __init__(self, net):
            self.net = net
            self.opt = torch.optim.SGD(net.parameters(), lr=0.1)
            self.history = []
            self.total = 0.0
        def update(self, x, y):
            out = self.net(x)
            loss = torch.nn.functional.mse_loss(out, y)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            self.total = self.total + loss
            self.history.append(loss)
    """
    right = wrong.replace("self.total + loss", "self.total + loss.item()").replace(
        "append(loss)", "append(loss.detach())"
    )
    fires("TB204", wrong, [15, 16], right)


def test_tb201_self_model_in_no_grad_method_of_hand_written_trainer():
    wrong = """
    import torch
    class Loop:
        def training_step(self, x, y):
            self.optim.zero_grad()
            self.crit(self.net(x), y).backward()
            self.optim.step()

        @torch.inference_mode()
        def score(self, x, y):
            return (self.net(x).argmax(1) == y).float().mean()

        def fit(self, train, val):
            self.net.train()
            for x, y in train:
                self.training_step(x, y)
            print([self.score(x, y) for x, y in val])
    """
    right = wrong.replace("def score(self, x, y):\n", "def score(self, x, y):\n            self.net.eval()\n")
    fires("TB201", wrong, [11], right)


def test_tb204_loss_term_of_a_model_output_dict():
    wrong = """
    def epoch(net, data, opt):
        sums = {"seg": 0.0}
        for x in data:
            res = net(x)
            seg = res["seg_loss"]
            opt.zero_grad()
            (seg + res["aux_loss"]).backward()
            opt.step()
            sums["seg"] += seg
    """
    fires("TB204", wrong, [10], wrong.replace('sums["seg"] += seg', 'sums["seg"] += seg.item()'))


def test_tb203_eval_block_inside_the_training_loop_of_a_model_named_anyhow():
    wrong = """
    def loop(policy, opt, buffer, probes):
        for it in range(1000):
            opt.zero_grad()
            policy(buffer.sample()).mean().backward()
            opt.step()
            if it % 100 == 0:
                policy.eval()
                for p in probes:
                    print(policy(p).max().item())
                policy.train()
    """
    right = """
    def loop(policy, opt, buffer, probes):
        for it in range(1000):
            opt.zero_grad()
            policy(buffer.sample()).mean().backward()
            opt.step()
            if it % 100 == 0:
                policy.eval()
                with torch.no_grad():
                    for p in probes:
                        print(policy(p).max().item())
                policy.train()
    """
    fires("TB203", wrong, [10], right)


def test_tb203_outside_loss_helper_runs_the_model_in_a_validation_loop():
    wrong = """
    import torch
    net = Policy()
    opt = torch.optim.Adam(net.parameters())
    for it in range(500):
        opt.zero_grad()
        bellman_loss(net, batch()).backward()
        opt.step()
        if it % 50 == 0:
            net.eval()
            for b in val_set:
                print(bellman_loss(net, b).item())
            net.train()
    """
    right = wrong.replace("            for b in val_set:\n                print(", "            for b in val_set:\n"
                          "                with torch.no_grad():\n                    print(")
    assert found(right, "TB001") == [] and "no_grad" in right
    fires("TB203", wrong, [12], right)


def test_tb202_helper_freezing_batchnorm_submodules_is_not_eval_mode():
    src = """\
import torch.nn as nn

def freeze_norms(net):
    norms = [layer for _, layer in net.named_modules() if isinstance(layer, nn.BatchNorm2d)]
    for bn in norms:
        bn.eval()

def freeze_bn(net):
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.eval()

def fit(net, loader, opt):
    net.train()
    freeze_bn(net)
    freeze_norms(net)
    for x, y in loader:
        loss = (net(x) - y).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""
    assert found(src, "TB202") == []
    really = src.replace("def freeze_bn(net):\n", "def freeze_bn(net):\n    net.eval()\n")
    assert found(really, "TB202") == [16]


def test_tb201_tb203_tests_and_shape_checks_are_not_evaluations():
    shape_check = """
    import torch
    class Net(torch.nn.Module):
        def forward(self, x):
            return x
    def test():
        net = Net()
        y = net(torch.randn(2, 3, 32, 32))
        print(y.size())
    if __name__ == "__main__":
        model = Net()
        with torch.no_grad():
            for _ in range(3):
                print(model(torch.randn(1, 3)).shape)
    """
    for code in ("TB201", "TB203"):
        assert found(shape_check, code, show_all=True) == []
    unit_test = """
    import torch
    @torch.inference_mode()
    def test_forward_matches(loader):
        model = build()
        for x, y in loader:
            assert model(x).shape == y.shape
    class TestModel:
        def test_eval(self, model, loader):
            with torch.no_grad():
                for x, y in loader:
                    model(x)
    """
    assert found(unit_test, "TB201", show_all=True) == [] and found(unit_test, "TB203", show_all=True) == []
    loaded = """
    import torch
    class Net(torch.nn.Module):
        pass
    def test():
        net = Net()
        net.load_state_dict(torch.load("w.pt", weights_only=True))
        with torch.no_grad():
            for x, y in test_loader:
                print(net(x))
    """
    assert found(loaded, "TB201") == [10]  # a loaded model evaluated on data: an evaluation


def test_tb201_tb203_module_named_tests_only_with_a_test_framework(tmp_path):
    from trickbag.audit.lint import lint_file

    src = textwrap.dedent("""
    import torch
    def evaluate(model, loader):
        with torch.no_grad():
            return [model(x) for x, _ in loader]
    def main(model, loader, opt):
        model.train()
        evaluate(model, loader)
    """)
    for name, quiet in [("test_model.py", True), ("model_test.py", False), ("tests/check.py", False)]:
        path = tmp_path / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(src)
        assert ([f.rule for f in lint_file(path)] == []) == quiet, name
        path.write_text("import pytest\n" + src)
        assert [f.rule for f in lint_file(path)] == [], name


def test_tb201_constructors_are_not_forwards_and_pretrained_models_are_in_eval_mode():
    src = """
    import torch, timm
    from transformers import AutoModel, AutoTokenizer
    @torch.no_grad()
    def evaluate(args, loader, Model, accelerator):
        tokenizer = AutoTokenizer.from_pretrained(args.name)
        model = AutoModel.from_pretrained(args.name)
        other = timm.create_model(args.arch, pretrained=True)
        agent = Model(args.envs)
        for batch in loader:
            out = model(**tokenizer(batch["text"], return_tensors="pt"))
            accelerator.unwrap_model(model)
    """
    assert found(src, "TB201", show_all=True) == [] and found(src, "TB203", show_all=True) == []
    from_config = src.replace("AutoModel.from_pretrained(args.name)", "AutoModel.from_config(args.config)")
    assert found(from_config, "TB201") == [11]  # a new model, in train mode


def test_tb201_nested_helpers_and_chained_mode_switches():
    nested = """
    import torch
    def run(model, loader, opt):
        model.train()
        for x, y in loader:
            opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step()
        model.eval()
        with torch.no_grad():
            def score(batch):
                return model(batch).argmax(1)
            return [score(x) for x, _ in loader]
    """
    assert found(nested, "TB201", show_all=True) == [] and found(nested, "TB203", show_all=True) == []
    chained = """
    import torch
    def evaluate(model, loader):
        with torch.no_grad():
            for x, y in loader:
                print(model(x))
    def main(model, loader, opt, dev):
        for epoch in range(3):
            model.to(dev).train()
            for x, y in loader:
                opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step()
            model.to(dev).eval()
            evaluate(model, loader)
    """
    assert found(chained, "TB201") == [] and found(chained, "TB202") == []
    assert found(chained.replace("model.to(dev).eval()", "pass"), "TB201") == [6]


def test_tb203_projects_own_decorator_that_disables_gradients():
    src = """
    import torch
    def smart_inference_mode():
        def decorate(fn):
            return (torch.inference_mode if torch.__version__ >= "1.9" else torch.no_grad)()(fn)
        return decorate
    @smart_inference_mode()
    def run(model, dataloader):
        model.eval()
        for im, targets in dataloader:
            preds = model(im)
    """
    assert found(src, "TB203", show_all=True) == []
    imported = src.replace("@smart_inference_mode()", "@utils.smart_inference_mode()").replace(
        "def smart_inference_mode", "def unused")
    assert found(imported, "TB203", show_all=True) == []
    assert found(src.replace("    @smart_inference_mode()\n", ""), "TB203") == [10]


def test_tb201_forward_through_a_method_shared_with_the_training_step():
    wrong = """
    import torch
    class Trainer:
        def _forward_pass(self, x, y):
            out = self.model(x)
            return out, self.loss_fn(out, y)
        def train(self, loader):
            self.model.train()
            for x, y in loader:
                out, loss = self._forward_pass(x, y)
                self.optimizer.zero_grad(); loss.backward(); self.optimizer.step()
        def validate(self, val_loader):
            with torch.no_grad():
                for x, y in val_loader:
                    out, loss = self._forward_pass(x, y)
    """
    right = wrong.replace("        with torch.no_grad():\n",
                          "        self.model.eval()\n        with torch.no_grad():\n")
    fires("TB201", wrong, [15], right)
