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
