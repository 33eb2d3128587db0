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



# A gradient-free forward that computes what training uses (an RL target, a memory bank) is not an evaluation:
# uncertain (--all).  The same shape that scores the model is an evaluation.
class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 64), nn.Dropout(0.1), nn.Linear(64, 1))

    def forward(self, s):
        return self.body(s)


def td_targets(critic, data, gamma):
    out = []
    for s, r, s_next in data:
        with torch.no_grad():
            td_target = r + gamma * critic(s_next)  # expect-low: TB201
        out.append(td_target)
    return out


def critic_scores(critic, data):
    out = []
    for s, r, s_next in data:
        with torch.no_grad():
            score = critic(s)  # expect: TB201
        out.append(score)
    return out


def fit_critic(data, gamma):
    critic = Critic()
    optimizer = torch.optim.Adam(critic.parameters())
    for _epoch in range(3):
        critic.train()
        targets = td_targets(critic, data, gamma)
        for (s, r, s_next), t in zip(data, targets):
            optimizer.zero_grad()
            ((critic(s) - t) ** 2).mean().backward()
            optimizer.step()
        print(critic_scores(critic, data))


# Train and eval mode compute the same thing for a model without dropout or BatchNorm: nothing to report.
class PlainCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 1))

    def forward(self, s):
        return self.body(s)


def plain_critic_scores(plain, data):
    out = []
    for s, r, s_next in data:
        with torch.no_grad():
            score = plain(s)
        out.append(score)
    return out


def fit_plain_critic(data):
    plain = PlainCritic()
    optimizer = torch.optim.Adam(plain.parameters())
    for _epoch in range(3):
        plain.train()
        for s, r, s_next in data:
            optimizer.zero_grad()
            ((plain(s) - r) ** 2).mean().backward()
            optimizer.step()
        print(plain_critic_scores(plain, data))
