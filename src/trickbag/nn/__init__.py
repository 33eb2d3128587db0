"""Model-level tricks: weight EMA, freezing, optimizer parameter groups, checkpoint loading,
initialisation, bilinear pooling and inspection helpers."""

from trickbag.nn.ema import EMA
from trickbag.nn.freeze import freeze, unfreeze
from trickbag.nn.init import init_weights
from trickbag.nn.inspect import count_parameters, feature_extractor, summary
from trickbag.nn.loading import LoadReport, load_matching
from trickbag.nn.param_groups import param_groups
from trickbag.nn.pooling import BilinearPool

__all__ = [
    "EMA",
    "BilinearPool",
    "LoadReport",
    "count_parameters",
    "feature_extractor",
    "freeze",
    "init_weights",
    "load_matching",
    "param_groups",
    "summary",
    "unfreeze",
]
