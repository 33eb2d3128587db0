# Reconstructed after FabianPlum/SMILify PR #82 ("set CUDA_VISIBLE_DEVICES before `import torch` in neuralSMIL entrypoints (#73)", merged, https://github.com/FabianPlum/SMILify/pull/82): train_smil_regressor.py imported torch (and seeded torch/CUDA RNGs) at module level and only set CUDA_DEVICE_ORDER / CUDA_VISIBLE_DEVICES inside main() just before torch.cuda.is_available(); with torch >= 2.3 changing CUDA_VISIBLE_DEVICES after CUDA init raises "device >= 0 && device < num_gpus INTERNAL ASSERT FAILED" (issue #73). The merged fix (commit 2aa03f9) sets CUDA_DEVICE_ORDER / CUDA_VISIBLE_DEVICES at the top of the file before any torch import and drops the late write in main().
# Fixed version (the merged PR applied).
import os
import sys

# Single-GPU default: set CVD before any torch import.
import config as _cfg_for_env

os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
os.environ.setdefault("CUDA_VISIBLE_DEVICES", _cfg_for_env.GPU_IDS)  # not: TB402
del _cfg_for_env

import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import DataLoader

import config
from smal_fitter.neuralSMIL.smil_image_regressor import SMILImageRegressor
from smal_fitter.neuralSMIL.smil_datasets import replicAntSMILDataset


def set_random_seeds(seed):
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)


def main(dataset_name=None, checkpoint_path=None, device_override=None):
    training_params = config.TRAINING_PARAMS

    # Set random seeds for reproducibility
    set_random_seeds(training_params["seed"])

    # Set device
    if device_override:
        device = device_override
    else:
        device = "cuda" if torch.cuda.is_available() else "cpu"
        print(f"Using device: {device}")

    dataset = replicAntSMILDataset(dataset_name or config.DATA_PATH)
    loader = DataLoader(dataset, batch_size=training_params["batch_size"], shuffle=True)

    model = SMILImageRegressor().to(device)
    optimizer = optim.Adam(model.parameters(), lr=training_params["learning_rate"])
    criterion = nn.MSELoss()

    for epoch in range(training_params["num_epochs"]):
        model.train()
        for images, targets in loader:
            images, targets = images.to(device), targets.to(device)
            optimizer.zero_grad()
            loss = criterion(model(images), targets)
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    main(*sys.argv[1:2])
