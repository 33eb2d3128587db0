# Fixed version of ../87_dmcount_test_without_eval.py: silent on the codes that file expects.
import argparse

import numpy as np
import torch
from datasets.crowd import Crowd_qnrf
from models import vgg19

parser = argparse.ArgumentParser(description="Test")
parser.add_argument("--model-path", type=str, default="pretrained_models/model_qnrf.pth")
args = parser.parse_args()

device = torch.device("cuda")
dataloader = torch.utils.data.DataLoader(Crowd_qnrf("data/test", 512, 8, method="val"), 1, shuffle=False)
model = vgg19()
model.to(device)
model.load_state_dict(torch.load(args.model_path, device, weights_only=True))
model.eval()
image_errs = []
for inputs, count, _name in dataloader:
    inputs = inputs.to(device)
    with torch.set_grad_enabled(False):
        outputs, _ = model(inputs)  # not: TB201
    image_errs.append(count[0].item() - torch.sum(outputs).item())
image_errs = np.array(image_errs)
print("mae", np.mean(np.abs(image_errs)), "mse", np.sqrt(np.mean(np.square(image_errs))))
