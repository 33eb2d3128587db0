import torch
import torch.nn.functional as F
from torch import nn

net = nn.Sequential(nn.Flatten(), nn.Linear(64, 10), nn.Softmax(dim=1))
opt = torch.optim.SGD(net.parameters(), lr=0.1)


def step(x, y):
    opt.zero_grad()
    out = net(x)
    loss = F.nll_loss(out, y)  # expect: TB303
    loss.backward()
    opt.step()
    return loss.item()


def handmade_ce(logits, onehot):
    return -(onehot * torch.log(torch.softmax(logits, dim=-1))).sum(dim=-1).mean()  # expect: TB303
