"""Data tricks and loading: mixup/CutMix, Cutout, random erasing, one-hot, statistics, frame sampling, presets.

The recipe data sources (one module each) are in :mod:`trickbag.data.sources`; the resumable,
rank-sharded sampler in :mod:`trickbag.data.sampler`.

Pure functions on tensors; randomness comes from an explicit ``generator=`` (or
``lam=``/``perm=``/``center=`` values).  See ``docs/data.md``.
"""

from trickbag._optional import lazy_exports
from trickbag.data.cutout import cutout
from trickbag.data.encoding import one_hot
from trickbag.data.erasing import random_erasing
from trickbag.data.mix import MixupCutmix, cutmix, mixup
from trickbag.data.stats import mean_std
from trickbag.data.video_sampling import tsn_indices

# the presets import torchvision: load them only when asked, so `import trickbag.data` stays light
_EXPORTS = {"train_transforms": "trickbag.data.transforms", "eval_transforms": "trickbag.data.transforms"}
__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

__all__ = [
    "MixupCutmix",
    "cutmix",
    "cutout",
    "eval_transforms",
    "mean_std",
    "mixup",
    "one_hot",
    "random_erasing",
    "train_transforms",
    "tsn_indices",
]
