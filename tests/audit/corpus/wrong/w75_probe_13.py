import torch

torch.backends.cudnn.benchmark = True  # expect: TB405
torch.backends.cudnn.deterministic = True
