import argparse
import os

import torch


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpu", default="0")
    args = parser.parse_args()
    n_gpus = torch.cuda.device_count()
    print(f"found {n_gpus} GPUs")
    os.environ["CUDA_VISIBLE_DEVICES"] = args.gpu  # expect: TB402
    model = torch.nn.Linear(4, 4).cuda()
    return model
