"""Model-level tricks: weight EMA and SWA, drop path, freezing, parameter groups, weight loading, TTA, init, inspection.

Weight EMA and SWA, drop path (stochastic depth), activation checkpointing of repeated blocks, freezing,
optimizer parameter groups and layer ids, checkpoint loading and unwrapping (DDP / compile), initialisation,
bilinear pooling, flip test-time augmentation and inspection helpers.
"""

from trickbag.nn.activation_checkpointing import checkpoint_blocks, find_blocks, uncheckpoint_blocks
from trickbag.nn.drop_path import DropPath, add_drop_path, drop_path
from trickbag.nn.ema import EMA
from trickbag.nn.freeze import freeze, unfreeze
from trickbag.nn.init import init_weights
from trickbag.nn.inspect import count_parameters, feature_extractor, summary
from trickbag.nn.loading import LoadReport, device_of, load_matching, unwrap
from trickbag.nn.param_groups import layer_id_by_depth, param_groups
from trickbag.nn.pooling import BilinearPool
from trickbag.nn.swa import SWA
from trickbag.nn.tta import flip_tta

__all__ = [
    "EMA",
    "SWA",
    "BilinearPool",
    "DropPath",
    "LoadReport",
    "add_drop_path",
    "checkpoint_blocks",
    "count_parameters",
    "drop_path",
    "feature_extractor",
    "find_blocks",
    "flip_tta",
    "freeze",
    "init_weights",
    "layer_id_by_depth",
    "load_matching",
    "param_groups",
    "summary",
    "uncheckpoint_blocks",
    "unfreeze",
    "unwrap",
    "device_of",
]
