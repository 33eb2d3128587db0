import torch

def main(model, data):
    opt = torch.optim.SGD([{"parameters": model.parameters(), "lr": 0.01}], momentum=0.9)  # expect: TB301
    return opt
