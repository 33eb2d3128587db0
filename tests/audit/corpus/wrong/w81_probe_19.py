import torch

def export(net):
    torch.save(net, "net.pth")  # expect: TB404
