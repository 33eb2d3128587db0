# TB201 eval-without-eval-mode: fixture (read as text by tests/audit/test_rule_fixtures.py, never run).
# ruff: noqa  (wrong code on purpose, names left undefined)
import torch
from torch import nn
from transformers import AutoModelForCausalLM


class Net(nn.Module):
    def forward(self, x):
        return x


@torch.no_grad()
def evaluate(model, loader):
    return [model(x).argmax(1) for x, _ in loader]  # expect: TB201


@torch.no_grad()
def evaluate_in_eval_mode(model, loader):
    model.eval()
    return [model(x).argmax(1) for x, _ in loader]


def fit(model, loader, val_loader, optimizer):
    for _epoch in range(3):
        model.train()
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
        evaluate(model, val_loader)
        evaluate_in_eval_mode(model, val_loader)


def test():  # a shape check in a model file
    net = Net()
    print(net(torch.randn(2, 3, 32, 32)).shape)


def test_logits_match(loader):  # a unit test
    model = Net()
    with torch.inference_mode():
        for x, y in loader:
            assert model(x).shape == y.shape


@torch.no_grad()
def score_pretrained(name, loader):
    model = AutoModelForCausalLM.from_pretrained(name)  # Hugging Face returns it in eval mode
    return [model(**batch).loss.item() for batch in loader]


class NetworkEMA(nn.Module):  # an EMA wrapper that keeps its copy in eval mode
    def __init__(self, net):
        super().__init__()
        self.net_ema = copy.deepcopy(net).eval().requires_grad_(False)

    def forward(self, x):
        return self.net_ema(x)


class Averaged(nn.Module):  # a wrapper that does not
    def __init__(self, net):
        super().__init__()
        self.inner = copy.deepcopy(net)

    def forward(self, x):
        return self.inner(x)


def fit_with_ema(net, loader, val_loader, optimizer):
    net_ema = NetworkEMA(net)
    avg_net = Averaged(net)
    for _epoch in range(3):
        net.train()
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(net(x), y).backward()
            optimizer.step()
            net_ema.update(net)
        with torch.no_grad():
            for x, y in val_loader:
                acc_ema = (net_ema(x).argmax(1) == y).float().mean()
        with torch.no_grad():
            for x, y in val_loader:
                acc_avg = (avg_net(x).argmax(1) == y).float().mean()  # expect: TB201
