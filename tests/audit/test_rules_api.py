"""API-misuse rules (TB3xx): param-group keys, misspelled attributes, probabilities into log-losses,
a warm-up factor of zero at step 0."""

import pytest

from .helpers import fires, found


def test_tb301_group_built_before_and_add_param_group():
    wrong = """
    head = {"weights": model.head.parameters(), "lr": 0.1}
    opt = torch.optim.SGD([{"params": model.body.parameters()}], lr=0.01)
    opt.add_param_group({"parameters": model.neck.parameters()})
    groups = [{"params": p, "wd": 0.0} for p in bias_params]
    """
    right = """
    head = {"params": model.head.parameters(), "lr": 0.1, "name": "head"}
    opt = torch.optim.SGD([{"params": model.body.parameters()}], lr=0.01)
    opt.add_param_group({"params": model.neck.parameters(), "weight_decay": 0.0})
    config = {"model": "resnet18", "lr": 0.1}
    """
    fires("TB301", wrong, [2, 4, 5], right)


@pytest.mark.parametrize("attr", ["required_grad", "require_grad", "requires_gard", "requiresgrad", "requires_grads",
                                  "requires_grad_"])
def test_tb302_requires_grad_typos(attr):
    assert found(f"for p in net.parameters():\n    p.{attr} = False\n", "TB302") == [2]


def test_tb302_correct_spellings_and_module_requires_grad():
    right = """
    for p in net.parameters():
        p.requires_grad = False
    model.requires_grad_(False)
    torch.backends.cudnn.benchmark = True
    self.required = True
    """
    assert found(right, "TB302") == []
    wrong = """
    for m in model.modules():
        m.requires_grad = False
    model.encoder.requires_grad = False
    torch.backends.cudnn.determinstic = True
    """
    assert found(wrong, "TB302") == [3, 4, 5]


def test_tb303_nll_on_softmax_model_output_and_log_of_softmax():
    wrong = """
    class Net(nn.Module):
        def forward(self, x):
            return self.fc(x).softmax(dim=1)

    net = Net()
    out = net(x)
    loss = F.nll_loss(out, y)
    logp = torch.log(F.softmax(logits, dim=-1))
    """
    right = """
    class Net(nn.Module):
        def forward(self, x):
            return self.fc(x)

    net = Net()
    loss = F.nll_loss(F.log_softmax(net(x), dim=1), y)
    probs = F.softmax(net(x), dim=1)
    confidence = probs.max(dim=1).values
    ce = nn.CrossEntropyLoss()(net(x), y)
    """
    fires("TB303", wrong, [8, 9], right)


def test_tb303_hand_written_cross_entropy_without_log():
    assert found("loss = -(targets * F.softmax(logits, 1)).sum(1).mean()\n", "TB303") == [1]
    assert found("loss = -(targets * F.log_softmax(logits, 1)).sum(1).mean()\n", "TB303") == []


@pytest.mark.parametrize("lam", [
    "lambda s: s / warmup",
    "lambda s: min(1.0, s / warmup)",
    "lambda it: float(it) / float(max(1, warmup))",
    "lambda e: (e / 5) ** 2 if e < 5 else 1.0",
    "lambda step: step * (1.0 / warmup)",
])
def test_tb304_zero_factor_at_step_zero(lam):
    assert found(f"sched = LambdaLR(opt, lr_lambda={lam})\n", "TB304") == [1]


@pytest.mark.parametrize("lam", [
    "lambda s: (s + 1) / warmup",
    "lambda s: min(1.0, (s + 1) / warmup)",
    "lambda e: 0.95 ** e",
    "lambda e: 1 - e / epochs",
    "lambda s: max(0.01, s / warmup)",
    "lambda s: schedule(s)",
])
def test_tb304_non_zero_factors(lam):
    assert found(f"sched = LambdaLR(opt, lr_lambda={lam})\n", "TB304") == []


def test_tb304_named_function_reports_the_return_line():
    src = """
    WARM = 10

    def factor(step):
        if step >= WARM:
            return 1.0
        return step / WARM

    sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    """
    assert found(src, "TB304") == [7]


# --------------------------------------------------------------------------- param groups built before the call
@pytest.mark.parametrize(
    "build",
    [
        'groups = [{"params": decay}, {"parameters": no_decay, "weight_decay": 0.0}]\n'
        "opt = torch.optim.SGD(groups, lr=0.1)",
        'groups = []\ngroups.append({"params": decay})\ngroups.append({"parameters": no_decay})\n'
        "opt = torch.optim.SGD(params=groups, lr=0.1)",
        "opt = torch.optim.Adam([dict(params=decay, lr=1e-4), dict(parameters=no_decay, lr=1e-3)])",
        'g2 = {"parameters": no_decay}\nopt = torch.optim.Adam([{"params": decay}, g2])',
    ],
)
def test_tb301_bad_key_in_a_list_built_before_or_a_dict_call(build):
    assert len(found(build, "TB301")) == 1
    assert found(build.replace("parameters=", "params=").replace('"parameters"', '"params"'), "TB301") == []


def test_tb301_groups_from_a_helper_and_a_self_attribute():
    src = """
    def groups_of(model):
        return [{"params": model.a.parameters()}, {"param": model.b.parameters()}]

    class Builder:
        def __init__(self, model):
            self.groups = [dict(params=model.a.parameters(), learning_rate=1e-3)]

        def build(self, model):
            return optim.AdamW(self.groups), optim.SGD(groups_of(model), lr=0.1)
    """
    assert found(src, "TB301") == [3, 7]


# --------------------------------------------------------------------------- NLL on probabilities without the log
@pytest.mark.parametrize("body", [
    "probs = logits.softmax(-1)\npicked = torch.gather(probs, 1, y[:, None]).squeeze(1)\nreturn -picked.mean()",
    "return -F.softmax(logits, dim=1).gather(1, y.unsqueeze(1)).mean()",
    "p = torch.softmax(logits, 1)\nreturn -p[torch.arange(len(y)), y].mean()",
    "p = logits.softmax(1)\nreturn torch.mean(-torch.take_along_dim(p, y[:, None], dim=1))",
])
def test_tb303_negated_target_probability_without_log(body):
    src = "def my_nll(logits, y):\n" + "".join(f"    {ln}\n" for ln in body.splitlines())
    assert found(src, "TB303") == [len(body.splitlines()) + 1]


@pytest.mark.parametrize("body", [
    "logp = F.log_softmax(logits, 1)\nreturn -logp.gather(1, y[:, None]).mean()",
    "logpt = F.log_softmax(logits, 1).gather(1, y[:, None])\nreturn (-(1 - logpt.exp()) ** 2 * logpt).mean()",
    "p = torch.softmax(logits, 1)\nreturn -p[:, 0].mean()",
    "logp = torch.log_softmax(logits, 1)\nreturn -(logp.gather(1, a[:, None]) * adv).mean()",
    "p = torch.softmax(logits, 1)\nreturn -torch.log(p.gather(1, y[:, None]) + 1e-8).mean()",
])
def test_tb303_nll_with_log_softmax_is_not_reported(body):
    src = "def my_nll(logits, y):\n" + "".join(f"    {ln}\n" for ln in body.splitlines())
    assert found(src, "TB303") == []


def test_tb303_model_argument_of_a_class_whose_forward_returns_probabilities():
    wrong = """
    import torch.nn.functional as F
    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)
        def forward(self, x):
            h = self.fc(x)
            return F.softmax(h, dim=1)

    def train(model, loader, opt, criterion=nn.CrossEntropyLoss()):
        for x, y in loader:
            probs = model(x)
            loss = F.cross_entropy(probs, y)
            criterion(model(x), y).backward()
    """
    fires("TB303", wrong, [14, 15], wrong.replace("return F.softmax(h, dim=1)", "return h"))
    sigmoid = wrong.replace("return F.softmax(h, dim=1)", "return torch.sigmoid(h)")
    assert found(sigmoid, "TB303") == [14, 15]
    # another model class returning logits, or a model built here from another class: not known to be probabilities
    mixed = wrong + "\nclass Head(nn.Module):\n    def forward(self, x):\n        return x\n"
    built = wrong.replace("for x, y in loader:", "model = torchvision.models.resnet18()\n        for x, y in loader:")
    bce = sigmoid.replace("F.cross_entropy(probs, y)", "F.binary_cross_entropy(probs, y)").replace(
        "nn.CrossEntropyLoss()", "nn.BCELoss()")
    assert found(mixed, "TB303") == found(built, "TB303") == found(bce, "TB303") == []


def test_tb303_loss_object_as_a_default_argument():
    wrong = """
    def train_step(model, batch, optimizer, criterion=nn.CrossEntropyLoss(), *, nll=nn.NLLLoss()):
        tokens, labels = batch
        probs = torch.softmax(model(tokens), dim=-1)
        loss = criterion(probs, labels)
        other = nll(probs, labels)
    """
    right = wrong.replace("torch.softmax(", "torch.log_softmax(").replace("criterion(probs", "criterion(model(tokens)")
    fires("TB303", wrong, [5, 6], right)


# --------------------------------------------------------------------------- log of softmax probabilities in a name
@pytest.mark.parametrize("body", [
    "probs = F.softmax(logits, dim=-1)\nreturn -(targets * torch.log(probs)).sum(-1).mean()",
    "p = logits.softmax(-1)\nlogp = p.log()\nloss = -(targets * logp).sum(-1).mean()\nreturn loss",
    "p = torch.softmax(logits, 1)\nreturn -torch.log(p.gather(1, targets[:, None])).mean()",
    "p = torch.softmax(logits, 1)\npt = p.gather(1, targets[:, None])\nreturn (-(1 - pt) ** 2 * torch.log(pt)).mean()",
    "p = torch.softmax(logits, 1).gather(1, targets[:, None])\nreturn -p.log().mean()",
    "probs = F.softmax(logits, 1)\nreturn F.nll_loss(torch.log(probs), targets)",
])
def test_tb303_log_of_softmax_probabilities_held_in_a_name(body):
    src = "def soft_ce(logits, targets):\n" + "".join(f"    {ln}\n" for ln in body.splitlines())
    lines = body.splitlines()
    expect = next(i for i, ln in enumerate(lines, 2) if "log(" in ln or ".log()" in ln)
    assert found(src, "TB303") == [expect]


@pytest.mark.parametrize("body", [
    "p = F.softmax(logits, -1)\nreturn -(p * p.log()).sum(-1).mean()",
    "probs = torch.softmax(logits, -1)\nentropy = -(probs * torch.log(probs)).sum(-1)\nreturn entropy.mean()",
    "probs = F.softmax(logits, -1)\nreturn -(targets * torch.log(probs.clamp(min=1e-6) + 1e-6)).sum(-1).mean()",
    "probs = F.softmax(logits, -1)\nlog.info(torch.log(probs).max(-1).values)\nreturn F.cross_entropy(logits, targets)",
    "logp = F.log_softmax(logits, -1)\nreturn -(targets * logp).sum(-1).mean()",
])
def test_tb303_entropy_terms_and_guarded_logs_are_not_reported(body):
    src = "def soft_ce(logits, targets):\n" + "".join(f"    {ln}\n" for ln in body.splitlines())
    assert found(src, "TB303") == []


@pytest.mark.parametrize("reshape", ["probs.view(-1, probs.size(-1))", "probs.reshape(-1, 10).float()",
                                     "probs.permute(0, 2, 1).contiguous()", "torch.flatten(probs, 0, 1)",
                                     "probs.transpose(1, 2)"])
def test_tb303_probabilities_through_reshapes(reshape):
    wrong = f"""
    import torch
    import torch.nn.functional as F
    crit = torch.nn.CrossEntropyLoss()
    def seq_loss(logits, target):
        probs = torch.softmax(logits, dim=-1)
        return crit({reshape}, target.view(-1))
    """
    right = wrong.replace("torch.softmax(logits, dim=-1)", "logits")
    fires("TB303", wrong, [7], right)
    nll = wrong.replace("crit(", "F.nll_loss(").replace("torch.softmax", "torch.log_softmax")
    assert found(nll, "TB303") == []


def test_tb303_reassigned_reshape_of_probabilities():
    wrong = """
    import torch.nn.functional as F
    def f(logits, y):
        p = F.softmax(logits, -1)
        p = p.flatten(0, 1)
        return F.nll_loss(p, y)
    """
    fires("TB303", wrong, [6], wrong.replace("F.softmax", "F.log_softmax"))


def test_tb304_callable_class_as_warmup():
    wrong = """
    import torch

    class RampUp:
        def __init__(self, steps):
            self.steps = steps

        def __call__(self, step):
            if step >= self.steps:
                return 1.0
            return step / self.steps

    def build(opt):
        ramp = RampUp(500)
        return torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda=ramp)
    """
    fires("TB304", wrong, [11], wrong.replace("return step / self.steps", "return (step + 1) / self.steps"))


def test_tb302_cudnn_flag_typo_through_an_import_alias():
    wrong = """
    from torch.backends import cudnn as cdn
    cdn.determinstic = True
    """
    fires("TB302", wrong, [3], wrong.replace("determinstic", "deterministic"))


@pytest.mark.parametrize("lam", [
    "lambda s: min(s / warmup, math.exp(-s / total))",
    "lambda s: min(s / warmup, (1 - s / total) ** 2)",
    "lambda s: min(s / warmup, 1.0 - 0.5 * math.sin(s / total))",
    "lambda s: min(s / warmup, max(0.1, 0.5 * (1 + math.cos(math.pi * s / total))))",
])
def test_tb304_min_of_zero_and_a_non_negative_decay(lam):
    assert found(f"sched = LambdaLR(opt, lr_lambda={lam})\n", "TB304") == [1]


@pytest.mark.parametrize("lam", [
    "lambda s: min((s + 1) / warmup, math.exp(-s / total))",
    "lambda s: min(s / warmup, math.cos(s / total))",
    "lambda s: min(s / warmup, 0.5 - math.cos(s / total))",
    "lambda s: max(s / warmup, math.exp(-s / total))",
])
def test_tb304_min_with_a_decay_that_may_be_negative_or_a_non_zero_warmup(lam):
    assert found(f"sched = LambdaLR(opt, lr_lambda={lam})\n", "TB304") == []


# --------------------------------------------------------------------------- probe 7
def test_tb304_partial_bound_warmup_function():
    src = """
    import functools

    def schedule(it, *, warmup, total):
        if it < warmup:
            return it / warmup
        return max(0.0, (total - it) / (total - warmup))

    def make(opt):
        return LambdaLR(opt, lr_lambda=functools.partial(schedule, warmup=50, total=900))
    """
    assert found(src, "TB304") == [6]
    assert found(src.replace("return it / warmup", "return (it + 1) / warmup"), "TB304") == []
    assert found(src.replace("partial(schedule, warmup", "partial(schedule, 3, warmup"), "TB304") == []


def test_tb304_scaled_noam_factor():
    wrong = "sched = LambdaLR(opt, lambda n: 2.0 * width ** -0.5 * min(n ** -0.5 if n else 0.0, n * wu ** -1.5))\n"
    assert found(wrong, "TB304") == [1]
    right = "sched = LambdaLR(opt, lambda n: 2.0 * width ** -0.5 * min((n + 1) ** -0.5, (n + 1) * wu ** -1.5))\n"
    assert found(right, "TB304") == []


def test_tb303_class_whose_softmax_is_a_layer_attribute():
    src = """
    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Linear(32, 16)
            self.norm = nn.Softmax(dim=1)

        def forward(self, x):
            return self.norm(self.body(x))

    def fit(loader):
        tagger = Tagger()
        for x, y in loader:
            F.nll_loss(tagger(x), y).backward()
    """
    assert found(src, "TB303") == [14]
    assert found(src.replace("nn.Softmax(dim=1)", "nn.LogSoftmax(dim=1)"), "TB303") == []


def test_tb302_setattr_with_a_misspelled_constant_name():
    wrong = """
    import torch
    def freeze(model):
        for p in model.encoder.parameters():
            setattr(p, "require_grad", False)
        [setattr(q, "requires_gard", False) for q in model.head.parameters()]
    """
    right = wrong.replace("require_grad", "requires_grad").replace("requires_gard", "requires_grad")
    fires("TB302", wrong, [5, 6], right)


def test_tb304_factory_returned_warmup_functions():
    wrong = """
    import torch
    def warmup_factory(warmup):
        def factor(step):
            return min(1.0, step / warmup)
        return factor
    def noam_factory(d, warm):
        return lambda it: d ** -0.5 * min(max(it, 1) ** -0.5, it * warm ** -1.5)
    def build(opt, opt2):
        a = torch.optim.lr_scheduler.LambdaLR(opt, warmup_factory(100))
        b = torch.optim.lr_scheduler.LambdaLR(opt2, lr_lambda=noam_factory(512, 4000))
        return a, b
    """
    right = wrong.replace("step / warmup", "(step + 1) / warmup").replace("it * warm", "max(it, 1) * warm")
    fires("TB304", wrong, [5, 8], right)


def test_tb304_bound_method_as_factor():
    wrong = """
    import torch
    class Sched:
        def __init__(self, optim, ramp):
            self.ramp = ramp
            self.lr = torch.optim.lr_scheduler.LambdaLR(optim, lr_lambda=self.ramp_factor)

        def ramp_factor(self, step):
            return min(1.0, step / self.ramp)
    """
    fires("TB304", wrong, [9], wrong.replace("step / self.ramp", "(step + 1) / self.ramp"))


def test_tb303_self_call_of_a_model_class_whose_forward_returns_probabilities():
    wrong = """
    import torch.nn.functional as F
    from torch import nn
    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(8, 3)
            self.criterion = nn.CrossEntropyLoss()
        def forward(self, x):
            return F.softmax(self.linear(x), dim=-1)
        def training_step(self, batch, batch_idx):
            x, y = batch
            return self.criterion(self.linear(x), y)
        def validation_step(self, batch, batch_idx):
            x, y = batch
            return self.criterion(self(x), y)
        def predict(self, x):
            return self(x).argmax(-1)
    """
    fires("TB303", wrong, [16], wrong.replace("return F.softmax(self.linear(x), dim=-1)", "return self.linear(x)"))


def test_tb302_parameter_loop_variable_shadowing_a_module_loop_variable():
    src = """
    def setup(model, freeze):
        for k, v in model.named_parameters():
            v.requires_grad = not any(x in k for x in freeze)
        for k, v in model.named_modules():
            v.requires_grad = False
    """
    assert found(src, "TB302") == [6]  # the second loop's v is a module; the first loop's is a parameter


def test_tb303_clamped_logs_and_matching_costs_are_not_losses_on_probabilities():
    src = """
    import torch
    def log(t, eps=1e-20):
        return torch.log(t + eps)
    def dino_loss(teacher_logits, student_logits):
        student_probs = student_logits.softmax(dim=-1)
        teacher_probs = teacher_logits.softmax(dim=-1)
        return -(teacher_probs * log(student_probs)).sum(dim=-1).mean()
    def match(outputs, tgt_ids):
        out_prob = outputs["pred_logits"].softmax(-1)
        cost_class = -out_prob[:, tgt_ids]
        return cost_class
    """
    assert found(src, "TB303", show_all=True) == []
    unclamped = src.replace("return torch.log(t + eps)", "return torch.log(t)")
    assert found(unclamped, "TB303") == [8]
