"""scikit-learn's 8x8 handwritten digits (1797 images, 10 classes), shipped in its wheel."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from trickbag._optional import require
from trickbag.data.sources.memory import random_shift, tensor_splits
from trickbag.data.sources.splits import DataSplits

__all__ = ["digits", "digits_predict"]


def digits(cfg: Any) -> DataSplits:
    """``[N, 1, 8, 8]`` images in [0, 1] (then standardised), random 1-pixel shifts with ``data.augment``."""
    d = require("sklearn.datasets", extra="app", feature="data.name=digits").load_digits()
    x = torch.tensor(d.images, dtype=torch.float32).unsqueeze(1) / 16.0  # [N, 1, 8, 8] in [0, 1]
    y = torch.tensor(d.target, dtype=torch.long)
    splits = tensor_splits(x, y, cfg, augment=random_shift(1) if cfg.augment else None)
    splits.predict_transform = digits_predict(splits.fitted["normalise"])  # type: ignore[index]
    splits.fitted = {"source": "digits", **(splits.fitted or {})}
    return splits


def digits_predict(normalise: dict[str, Any]) -> Any:
    """A PIL image -> ``[1, 8, 8]`` like the training data (bright = ink, as in the digits set), standardised
    with the stored ``normalise`` statistics."""
    mean, std = torch.tensor(normalise["mean"]), torch.tensor(normalise["std"])

    def predict(img: Any) -> torch.Tensor:
        from PIL import Image

        g = img.convert("L").resize((8, 8), Image.BILINEAR)  # type: ignore[attr-defined]
        return (torch.tensor(np.asarray(g, dtype=np.float32) / 255.0).unsqueeze(0) - mean) / std

    return predict
