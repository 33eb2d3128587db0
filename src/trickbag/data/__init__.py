"""Data tricks and loading: mixup/CutMix, Cutout, one-hot, dataset statistics, frame sampling, transform presets.

The recipe data sources (one module each) are in :mod:`trickbag.data.sources`; the resumable,
rank-sharded sampler in :mod:`trickbag.data.sampler`.

Pure functions on tensors; randomness comes from an explicit ``generator=`` (or
``lam=``/``perm=``/``center=`` values).  See ``docs/data.md``.
"""

from trickbag.data.cutout import cutout
from trickbag.data.encoding import one_hot
from trickbag.data.mix import MixupCutmix, cutmix, mixup
from trickbag.data.stats import mean_std
from trickbag.data.video_sampling import tsn_indices


def __getattr__(name: str):
    # the presets import torchvision: load them only when asked, so `import trickbag.data` stays light
    if name in ("train_transforms", "eval_transforms"):
        from trickbag.data import transforms

        return getattr(transforms, name)
    raise AttributeError(f"module 'trickbag.data' has no attribute {name!r}")

__all__ = [
    "MixupCutmix",
    "cutmix",
    "cutout",
    "eval_transforms",
    "mean_std",
    "mixup",
    "one_hot",
    "train_transforms",
    "tsn_indices",
]
