# Reconstructed after pytorch/pytorch issue #23544 ("CUDA_VISIBLE_DEVICES setting unavailable after called
# torch.cuda.is_available function"): the script queried CUDA first and set CUDA_VISIBLE_DEVICES afterwards, so
# the setting had no effect and the job always ran on GPU 0.
import os

import torch


def main(cuda_index, model_fn):
    use_cuda = torch.cuda.is_available()
    os.environ["CUDA_VISIBLE_DEVICES"] = cuda_index  # expect: TB402
    device = torch.device("cuda" if use_cuda else "cpu")
    return model_fn().to(device)
