"""The whole recipe: the core sections of :mod:`trickbag.config` plus one section per trick module.

A recipe is a YAML file whose sections mirror :class:`Recipe`. Every key is validated against the
schema; an unknown key, a wrong type or an out-of-range value raises :class:`RecipeError` with one
line naming the key, the value and what is allowed (with a close-match suggestion for typos).
Nothing here imports torch.

>>> r = load_recipe("digits", ["train.epochs=3", "optim.lr=0.05"])
>>> (r.train.epochs, r.optim.lr)
(3, 0.05)
>>> load_recipe("digits", ["optim.lrr=0.1"])
Traceback (most recent call last):
...
trickbag.errors.RecipeError: unknown recipe key 'optim.lrr' (did you mean 'optim.lr'?)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError, model_validator

from trickbag.config import (
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
    apply_overrides,
    builtin_recipes,
    format_validation_error,
    parse_overrides,
    read_yaml,
    resolve_recipe_path,
)
from trickbag.config.errors import all_keys
from trickbag.config.loading import run_recipe_path
from trickbag.errors import RecipeError
from trickbag.train.tricks import TricksConfig

__all__ = ["Recipe", "TricksConfig", "load_recipe", "recipe_from_dict", "recipe_to_yaml", "load_run_recipe",
           "recipe_keys", "builtin_recipes", "resolve_recipe_path"]


class Recipe(Section):
    """A whole training recipe."""

    name: str = "custom"  # the recipe's name (a file's default: its name); runs are <name>-<date>-<time>
    description: str = ""  # one line saying what the recipe is for
    data: DataConfig = Field(default_factory=DataConfig)
    task: TaskConfig = Field(default_factory=TaskConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    optim: OptimConfig = Field(default_factory=OptimConfig)
    schedule: ScheduleConfig = Field(default_factory=ScheduleConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    run: RunConfig = Field(default_factory=RunConfig)
    log: LogConfig = Field(default_factory=LogConfig)
    dist: DistConfig = Field(default_factory=DistConfig)
    tricks: TricksConfig = Field(default_factory=TricksConfig)  # type: ignore[valid-type]

    @model_validator(mode="after")
    def _cross_checks(self) -> Recipe:
        if self.train.deterministic and self.train.benchmark:
            raise ValueError(
                "train.deterministic and train.benchmark cannot both be true "
                "(cuDNN autotuning is not deterministic)"
            )
        return self


def recipe_keys() -> list[str]:
    """Every key of the recipe schema, dotted (``optim.lr``, ``tricks.mix.prob``, ...)."""
    return all_keys(Recipe)


def recipe_from_dict(data: dict[str, Any]) -> Recipe:
    """Validate a nested dict as a :class:`Recipe`, raising :class:`RecipeError` on the first problem."""
    try:
        return Recipe.model_validate(data)
    except ValidationError as err:
        raise RecipeError(format_validation_error(err, Recipe)) from None
    except RecursionError:
        raise RecipeError("the recipe nests too deeply to be read") from None


def load_recipe(name_or_path: str | None = None, overrides: list[str] | None = None) -> Recipe:
    """Load a built-in recipe by name (default ``digits``) or a YAML file, then apply overrides."""
    path = resolve_recipe_path(name_or_path or "digits")
    data = read_yaml(path)
    data.setdefault("name", path.stem)
    data = apply_overrides(data, parse_overrides(list(overrides or [])))
    return recipe_from_dict(data)


def recipe_to_yaml(recipe: Recipe) -> str:
    """The fully resolved recipe as YAML (every default written out)."""
    return yaml.safe_dump(recipe.model_dump(mode="json"), sort_keys=False)


def load_run_recipe(run_dir: str | Path, overrides: list[str] | None = None) -> Recipe:
    """The resolved recipe saved in a run directory, with overrides applied (for ``--resume``)."""
    path = run_recipe_path(run_dir, f"--resume {str(run_dir)!r}: no such run directory")
    data = apply_overrides(read_yaml(path), parse_overrides(list(overrides or [])))
    return recipe_from_dict(data)
