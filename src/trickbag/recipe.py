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

import functools
import operator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import yaml
from pydantic import Discriminator, Field, Tag, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from trickbag.config import (
    DataConfig,
    DistConfig,
    LogConfig,
    ModelConfig,
    OptimConfig,
    RunConfig,
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
from trickbag.optim import optimizers
from trickbag.optim.schedules import DEFAULT, sections, settle_schedule
from trickbag.tricks import TricksConfig

__all__ = ["Recipe", "TricksConfig", "OptimSection", "ScheduleSection", "load_recipe", "recipe_from_dict",
           "recipe_to_yaml", "load_run_recipe", "recipe_keys", "builtin_recipes", "resolve_recipe_path",
           "stored_recipe"]


def _schedule_name(v: Any) -> Any:
    return v.get("name", DEFAULT) if isinstance(v, dict) else getattr(v, "name", None)


#: the recipe's ``schedule``: one section per schedule (``trickbag.optim.schedules``), told apart by its ``name``
if TYPE_CHECKING:  # the union is built from the registry at import; every member is a ScheduleConfig
    from typing import TypeAlias

    from trickbag.config import ScheduleConfig

    ScheduleSection: TypeAlias = ScheduleConfig
else:
    ScheduleSection = Annotated[
        functools.reduce(operator.or_, [Annotated[cls, Tag(name)] for name, cls in sections().items()]),
        Discriminator(_schedule_name),
    ]


if TYPE_CHECKING:
    OptimizerName = str
else:  # Literal[every name of trickbag.optim.optimizers], read when the recipe is first imported
    OptimizerName = optimizers.name_type()


class OptimSection(*reversed(optimizers.option_sections()), OptimConfig):  # type: ignore[misc]
    """Optimizer and its hyper-parameters."""

    # the shared keys (OptimConfig) first, then the keys of each optimizer that has its own (its `options`)

    name: OptimizerName = optimizers.DEFAULT

    @model_validator(mode="after")
    def _fused_kernel(self) -> OptimSection:
        """``optim.fused`` only where the optimizer's entry reads it (torch has fused kernels for a few)."""
        if self.fused and "fused" not in optimizers.get(self.name).keys:
            able = ", ".join(n for n, e in optimizers.optimizers().items() if "fused" in e.keys)
            raise PydanticCustomError("recipe_line", "{line}", {"line": (
                f"optim.fused: optim.name={self.name} has no fused kernel; it works with {able} "
                "(or set optim.fused=false)")})
        return self


class Recipe(Section):
    """A whole training recipe."""

    name: str = "custom"  # the recipe's name (a file's default: its name); runs are <name>-<date>-<time>
    description: str = ""  # one line saying what the recipe is for
    data: DataConfig = Field(default_factory=DataConfig)
    task: TaskConfig = Field(default_factory=TaskConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    optim: OptimSection = Field(default_factory=OptimSection)
    schedule: ScheduleSection = Field(default_factory=sections()[DEFAULT])
    train: TrainConfig = Field(default_factory=TrainConfig)
    run: RunConfig = Field(default_factory=RunConfig)
    log: LogConfig = Field(default_factory=LogConfig)
    dist: DistConfig = Field(default_factory=DistConfig)
    tricks: TricksConfig = Field(default_factory=TricksConfig)

    @field_validator("schedule", mode="before")
    @classmethod
    def _own_schedule_keys(cls, v: Any, info: ValidationInfo) -> Any:
        """Only the keys of the chosen schedule (see :func:`~trickbag.optim.schedules.settle_schedule`); a run's
        stored recipe (``context={"stored": True}``) drops the other schedules' keys whatever their values."""
        try:
            return settle_schedule(v, stored=bool(info.context and info.context.get("stored")))
        except ValueError as exc:
            raise PydanticCustomError("recipe_line", "{line}", {"line": str(exc)}) from None

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


def recipe_from_dict(data: dict[str, Any], *, stored: bool = False) -> Recipe:
    """Validate a nested dict as a :class:`Recipe`, raising :class:`RecipeError` on the first problem.

    ``stored``: ``data`` is a recipe a run saved (its recipe.yaml, a checkpoint's recipe), maybe by a trickbag
    from before each schedule had its own keys: the keys of other schedules are dropped whatever their values
    (they did nothing in that run) instead of refused."""
    try:
        return Recipe.model_validate(data, context={"stored": stored})
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
    data = apply_overrides(stored_recipe(read_yaml(path)), parse_overrides(list(overrides or [])))
    return recipe_from_dict(data)


def stored_recipe(data: Any) -> Any:
    """A recipe dict a run saved with its ``schedule`` section reduced to its schedule's keys (a recipe written
    before each schedule had its own keys holds them all; those did nothing in the run). Other dicts and
    sections are returned as they are: the schema reports what is wrong with them."""
    if isinstance(data, dict) and isinstance(data.get("schedule"), dict):
        try:
            return {**data, "schedule": settle_schedule(data["schedule"], stored=True)}
        except ValueError:  # not reached with stored=True; the schema reports the section
            return data
    return data
