# Reconstructed after pytorch/pytorch issue #6351 ("cudnn benchmark=True overrides deterministic=True", reported
# from user code): a training script asked for deterministic cuDNN and for benchmark mode at once; benchmarking
# picks kernels by timing, so the runs were not reproducible and nothing warned.
import random

import numpy as np
import torch
from torch.backends import cudnn


def setup(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    cudnn.deterministic = True
    cudnn.benchmark = True  # expect: TB405
