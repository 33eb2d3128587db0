"""Recipe configuration core: the schema's base and core sections, YAML loading, overrides, one-line errors.

The whole recipe (these sections plus one section per trick module) is assembled in
:mod:`trickbag.recipe`; this package knows no trick and imports no torch.
"""

from trickbag.config.errors import format_validation_error
from trickbag.config.loading import (
    apply_overrides,
    builtin_recipes,
    parse_overrides,
    read_yaml,
    resolve_recipe_path,
    safe_load_yaml,
)
from trickbag.config.schema import (
    BinConfig,
    DataConfig,
    DistConfig,
    LogConfig,
    ModelConfig,
    OptimConfig,
    RunConfig,
    ScheduleConfig,
    Section,
    TaskConfig,
    TrainConfig,
    TrickSection,
    needs_items,
)

__all__ = [
    "Section",
    "TrickSection",
    "needs_items",
    "BinConfig",
    "DataConfig",
    "TaskConfig",
    "ModelConfig",
    "OptimConfig",
    "ScheduleConfig",
    "TrainConfig",
    "RunConfig",
    "LogConfig",
    "DistConfig",
    "format_validation_error",
    "builtin_recipes",
    "resolve_recipe_path",
    "read_yaml",
    "safe_load_yaml",
    "parse_overrides",
    "apply_overrides",
]
