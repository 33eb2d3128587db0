import os
import torch

model = torch.nn.Linear(10, 10)

if __name__ == "__main__":
    model.cuda()
    os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"  # expect: TB402
