import torch
import torch.nn.functional as F


class Runner:
    def __init__(self, net, opt):
        self.net = net
        self.opt = opt
        self.history = []

    def train(self, loader):
        for x, y in loader:
            self.opt.zero_grad()
            loss = F.nll_loss(F.log_softmax(self.net(x), dim=1), y)
            loss.backward()
            self.opt.step()
            self.history.append(loss)  # expect: TB204
