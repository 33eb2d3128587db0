"""MNIST-1D (Greydanus 2020): 1-D signals of 40 samples, 10 classes, generated locally and cached."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from trickbag._optional import require
from trickbag.data.sources.memory import tensor_splits
from trickbag.data.sources.splits import DataSplits

__all__ = ["mnist1d", "cache_dir"]


def cache_dir() -> Path:
    """Folder for generated data: ``$TRICKBAG_CACHE``, else ``$XDG_CACHE_HOME/trickbag``, else ``~/.cache/trickbag``."""
    if os.environ.get("TRICKBAG_CACHE"):
        return Path(os.environ["TRICKBAG_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "trickbag"


def mnist1d(cfg: Any) -> DataSplits:
    """Greydanus' MNIST-1D signals ``[N, 1, 40]`` generated locally (and cached), with their own test split."""
    n = cfg.num_samples or 5000
    path = cache_dir() / f"mnist1d-{n}.npz"
    if path.exists():
        with np.load(path) as f:
            data = {k: f[k] for k in f.files}
    else:
        mnist1d_data = require("mnist1d.data", extra="app", feature="data.name=mnist1d")
        get_dataset_args, make_dataset = mnist1d_data.get_dataset_args, mnist1d_data.make_dataset

        args = get_dataset_args()
        args.num_samples = n
        state = np.random.get_state()  # make_dataset reseeds NumPy's global generator
        try:
            ds = make_dataset(args)
        finally:
            np.random.set_state(state)
        data = {"x": ds["x"], "y": ds["y"], "x_test": ds["x_test"], "y_test": ds["y_test"]}
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")
        np.savez(tmp, **data)
        os.replace(tmp, path)
    x = torch.tensor(data["x"], dtype=torch.float32).unsqueeze(1)  # [N, 1, 40]
    y = torch.tensor(data["y"], dtype=torch.long)
    xt = torch.tensor(data["x_test"], dtype=torch.float32).unsqueeze(1)
    yt = torch.tensor(data["y_test"], dtype=torch.long)
    # the generator already standardises the whole set; keep its scale (and its test split)
    splits = tensor_splits(x, y, cfg, augment=None, test=(xt, yt), normalise=False)
    splits.kind = "signal"
    return splits
