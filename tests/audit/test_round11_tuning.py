"""Round 11's false alarms, tuned on after the round was measured (its numbers after this are tuned numbers)."""

from tests.audit.helpers import found

GAN = '''
import torch
from torch import nn, optim


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 1))

    def forward(self, x):
        return self.body(x)


class GAN(object):
    def __init__(self, G, loader):
        self.G = G
        self.D = Discriminator()
        self.loader = loader
        self.G_optimizer = optim.Adam(self.G.parameters())
        self.D_optimizer = optim.Adam(self.D.parameters())

    def train(self):
        self.D.train()
        for epoch in range(10):
            self.G.train()
            for x, z in self.loader:
                self.D_optimizer.zero_grad()
                G_ = self.G(z)
                D_loss = self.D(x).mean() - self.D(G_).mean()
                D_loss.backward()
                self.D_optimizer.step()
                self.G_optimizer.zero_grad()
                G_ = self.G(z)
                G_loss = -self.D(G_).mean()
                G_loss.backward()
                self.G_optimizer.step()
            with torch.no_grad():
                self.visualize_results(epoch + 1)

    def visualize_results(self, epoch):
        self.G.eval()
        return self.G(torch.rand(8, 4))
'''


def test_tb202_a_method_that_switches_one_attribute_leaves_the_others_as_they_were():
    # visualize_results() puts self.G in eval mode (switched back at the top of each epoch); self.D is untouched
    assert found(GAN, "TB202") == []
    # the same method switching self.D, which nothing switches back: reported at the call
    wrong = GAN.replace("        self.G.eval()\n        return", "        self.D.eval()\n        return")
    assert found(wrong, "TB202") == [39]


def test_tb301_a_key_the_projects_optimizer_wrapper_reads_back_is_uncertain(tmp_path):
    from trickbag.audit.lint import lint_file

    (tmp_path / ".git").mkdir()
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    helper = pkg / "helpers.py"
    helper.write_text("import torch\n\ndef groups(model):\n"
                      "    return [{'named_params': list(model.named_parameters()), 'lr': 1e-3}]\n"
                      "\nopt = torch.optim.AdamW(groups(model))\n")
    assert [f.rule for f in lint_file(helper, show_all=True)] == ["TB301"]
    assert [f.rule for f in lint_file(helper)] == ["TB301"]  # nothing in the project reads the key back
    (pkg / "named_optimizer.py").write_text(
        "def convert(groups):\n    return [{'params': [p for _, p in g['named_params']]} for g in groups]\n")
    from trickbag.audit.rules import tb301_param_group_key as tb301
    tb301._project_texts.cache_clear()
    assert [f.rule for f in lint_file(helper)] == []
    assert [f.rule for f in lint_file(helper, show_all=True)] == ["TB301"]


APEX = '''
from apex import amp


def train(model, loader, optimizer, args):
    for step, (x, y) in enumerate(loader):
        loss = model(x, y)
        if args.gradient_accumulation_steps > 1:
            loss = loss / args.gradient_accumulation_steps
        if args.fp16:
            with amp.scale_loss(loss, optimizer) as scaled_loss:
                scaled_loss.backward()
        else:
            loss.backward()
        if (step + 1) % args.gradient_accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
'''


def test_tb105_apex_scale_loss_passes_the_divided_loss_through():
    assert found(APEX, "TB105") == []
    undivided = APEX.replace("loss = loss / args.gradient_accumulation_steps", "pass")
    assert found(undivided, "TB105") == [12, 14]


def test_tb403_a_file_cached_from_a_url_comes_from_outside():
    src = '''
import torch

def cache_url(url):
    return "/tmp/cache/" + url.split("/")[-1]

def load_state_dict_from_url(url, map_location="cpu"):
    cached_file = cache_url(url)
    return torch.load(cached_file, map_location=map_location)

def load_file(f):
    if f.startswith("http"):
        f = cache_url(f)
    return torch.load(f, map_location="cpu")

def load_local(path):
    return torch.load(path, map_location="cpu")
'''
    assert found(src, "TB403", torch="old") == [9, 14]
    assert found(src, "TB403", torch="old", show_all=True) == [9, 14, 17]
