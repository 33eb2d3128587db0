# Fixed version of ../154_voxcpm_resume_torch_load_unsafe.py: silent on the codes that file expects.
from pathlib import Path

import torch


def load_checkpoint(model, optimizer, scheduler, save_dir: Path) -> int:
    """Load the latest checkpoint if present; return the step to resume from (0 if none)."""
    latest_folder = save_dir / "latest"
    if not latest_folder.exists():
        return 0

    unwrapped = model.module if hasattr(model, "module") else model
    if unwrapped.lora_config is not None:
        weights_path = latest_folder / "lora_weights.safetensors"
        if not weights_path.exists():
            weights_path = latest_folder / "lora_weights.ckpt"
    else:
        weights_path = latest_folder / "model.safetensors"
        if not weights_path.exists():
            weights_path = latest_folder / "pytorch_model.bin"

    if weights_path.exists():
        if weights_path.suffix == ".safetensors":
            from safetensors.torch import load_file

            state_dict = load_file(str(weights_path))
        else:
            ckpt = torch.load(weights_path, map_location="cpu", weights_only=True)  # not: TB403
            state_dict = ckpt.get("state_dict", ckpt)
        unwrapped.load_state_dict(state_dict, strict=False)
        print(f"Loaded model weights from {weights_path}")

    optimizer_path = latest_folder / "optimizer.pth"
    if optimizer_path.exists():
        optimizer.load_state_dict(torch.load(optimizer_path, map_location="cpu", weights_only=True))  # not: TB403

    scheduler_path = latest_folder / "scheduler.pth"
    if scheduler_path.exists():
        scheduler.load_state_dict(torch.load(scheduler_path, map_location="cpu", weights_only=True))  # not: TB403

    step_folders = [d for d in save_dir.iterdir() if d.is_dir() and d.name.startswith("step_")]
    if step_folders:
        return max(int(d.name.split("_")[1]) for d in step_folders)
    return 0
