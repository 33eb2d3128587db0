"""trickbag: training tricks for PyTorch as correct, tested, composable parts, plus a small trainer.

The public API is re-exported here and loaded lazily, so ``import trickbag`` (and the CLI) stays fast:

>>> import trickbag
>>> trickbag.EMA.__module__
'trickbag.nn.ema'

Areas: :mod:`trickbag.losses`, :mod:`trickbag.data`, :mod:`trickbag.nn`, :mod:`trickbag.optim`
(the tricks), :mod:`trickbag.functional` (every pure function in one namespace), :mod:`trickbag.plugin`
(the plug-in interface), :mod:`trickbag.tricks` (the recipe tricks), :mod:`trickbag.train` (the trainer),
:mod:`trickbag.recipe` (recipes: :func:`~trickbag.recipe.load_recipe`), :mod:`trickbag.config` (their schema and
safe YAML loading).
"""

from __future__ import annotations

from trickbag import _moved
from trickbag._optional import lazy_exports

_moved.install()  # modules that moved this release answer at their former paths, with a warning

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # trainer
    "Trainer": "trickbag.train.trainer",
    "Plugin": "trickbag.plugin.interface",
    "Event": "trickbag.plugin.events",
    "State": "trickbag.plugin.state",
    "EarlyStopping": "trickbag.train.plugins.early_stopping",
    "save_checkpoint": "trickbag.train.checkpoint_files",
    "load_checkpoint": "trickbag.train.checkpoint_files",
    # recipes and runtime
    "Recipe": "trickbag.recipe",
    "load_recipe": "trickbag.recipe",
    "load": "trickbag.runs.export",
    "seed_everything": "trickbag.runtime",
    "seed_worker": "trickbag.runtime",
    "select_device": "trickbag.runtime",
    "configure_determinism": "trickbag.runtime",
    # losses
    "ClassificationLoss": "trickbag.losses",
    "smooth_targets": "trickbag.losses",
    "soft_target_cross_entropy": "trickbag.losses",
    "SoftTargetCrossEntropy": "trickbag.losses",
    "focal_loss": "trickbag.losses",
    "FocalLoss": "trickbag.losses",
    "sigmoid_focal_loss": "trickbag.losses",
    "sce_loss": "trickbag.losses",
    "gce_loss": "trickbag.losses",
    "RobustLoss": "trickbag.losses",
    "class_balanced_weights": "trickbag.losses",
    "logit_adjustment": "trickbag.losses",
    "distillation_loss": "trickbag.losses",
    "DistillationLoss": "trickbag.losses",
    "gradient_penalty": "trickbag.losses",
    "l1_penalty": "trickbag.losses",
    # data
    "mixup": "trickbag.data",
    "cutmix": "trickbag.data",
    "MixupCutmix": "trickbag.data",
    "cutout": "trickbag.data",
    "one_hot": "trickbag.data",
    "mean_std": "trickbag.data",
    "tsn_indices": "trickbag.data",
    "train_transforms": "trickbag.data",
    "eval_transforms": "trickbag.data",
    # nn
    "EMA": "trickbag.nn",
    "SWA": "trickbag.nn",
    "freeze": "trickbag.nn",
    "unfreeze": "trickbag.nn",
    "unwrap": "trickbag.nn",
    "param_groups": "trickbag.nn",
    "layer_id_by_depth": "trickbag.nn",
    "flip_tta": "trickbag.nn",
    "load_matching": "trickbag.nn",
    "LoadReport": "trickbag.nn",
    "init_weights": "trickbag.nn",
    "BilinearPool": "trickbag.nn",
    "count_parameters": "trickbag.nn",
    "summary": "trickbag.nn",
    "feature_extractor": "trickbag.nn",
    # optim
    "SAM": "trickbag.optim",
    "disable_running_stats": "trickbag.optim",
    "enable_running_stats": "trickbag.optim",
    "build_scheduler": "trickbag.optim",
    "LRSchedule": "trickbag.optim",
    "add_param_group": "trickbag.optim",
    "replan_schedule": "trickbag.optim",
    "scaled_lr": "trickbag.optim",
    "scale_lr": "trickbag.optim",
    "plot_lr": "trickbag.optim",
    "clip_gradients": "trickbag.optim",
    "adaptive_clip_gradients": "trickbag.optim",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)
