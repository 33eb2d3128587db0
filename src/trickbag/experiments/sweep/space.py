"""The search space of a sweep: a YAML mapping from dotted recipe keys to distributions.

::

    optim.lr:            {type: log, low: 1.0e-3, high: 0.3}          # log-uniform float
    optim.weight_decay:  {type: float, low: 0.0, high: 1.0e-3}        # uniform float (step: optional)
    data.batch_size:     {type: int, low: 16, high: 128, step: 16}
    optim.name:          {type: categorical, choices: [sgd, adamw]}

Every key and bound is checked against the recipe schema before the first trial (an unknown key
is one line naming it, exit 2). The grid sampler needs a finite grid: ``choices``, an ``int``
range, a ``float`` with ``step``, or a ``log`` with ``num`` points (geometrically spaced, both ends
included).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
from pathlib import Path
from typing import Any, Literal

import yaml

from trickbag.experiments import ExperimentError

__all__ = ["ParamSpec", "parse_space", "load_space", "recipe_with", "TYPES"]

TYPES = ("float", "log", "int", "categorical")
_FIELDS = {"type", "low", "high", "step", "num", "choices"}


@dataclasses.dataclass(frozen=True)
class ParamSpec:
    """One dimension of the search space."""

    key: str
    type: Literal["float", "log", "int", "categorical"]
    low: Any = None
    high: Any = None
    step: Any = None
    num: int | None = None
    choices: tuple[Any, ...] | None = None

    def _choices(self) -> tuple[Any, ...]:
        """A categorical's values (set for every categorical: the space file's reader refuses one without)."""
        assert self.choices is not None
        return self.choices

    def suggest(self, trial: Any) -> Any:
        """Ask an Optuna trial for a value of this parameter."""
        if self.type == "categorical":
            return trial.suggest_categorical(self.key, list(self._choices()))
        if self.type == "int":
            return trial.suggest_int(self.key, self.low, self.high, step=self.step or 1)
        if self.type == "log":
            return trial.suggest_float(self.key, self.low, self.high, log=True)
        return trial.suggest_float(self.key, self.low, self.high, step=self.step)

    def grid(self) -> list[Any]:
        """The values of this parameter on a grid (raises :class:`ExperimentError` when it has none)."""
        if self.type == "categorical":
            return list(self._choices())
        if self.type == "int":
            return list(range(self.low, self.high + 1, self.step or 1))
        if self.type == "float" and self.step is not None:
            n = int(math.floor((self.high - self.low) / self.step + 1e-9))
            return [min(self.low + i * self.step, self.high) for i in range(n + 1)]
        if self.type == "log" and self.num is not None:
            import numpy as np

            vals = np.geomspace(self.low, self.high, self.num).tolist()
            return [min(max(v, self.low), self.high) for v in vals]
        need = "step" if self.type == "float" else "num"
        raise ExperimentError(
            f"--sampler grid: {self.key!r} ({self.type}) has no finite grid; add `{need}:` to it in the space file, "
            "or use --sampler random/tpe"
        )

    def probes(self) -> list[Any]:
        """Values used to check the key against the recipe schema before the sweep starts."""
        if self.type == "categorical":
            return list(self._choices())
        return [self.low, self.high]


def _number(v: Any, what: str, integer: bool = False) -> Any:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (integer and not isinstance(v, int)):
        raise ExperimentError(f"{what} must be {'an integer' if integer else 'a number'}, got {v!r}")
    return v


def _categorical(key: str, spec: dict[str, Any], where: str) -> ParamSpec:
    choices = spec.get("choices")
    if not isinstance(choices, list) or not choices:
        raise ExperimentError(f"{where}: a categorical needs a non-empty list `choices`")
    bad = [c for c in choices if not (c is None or isinstance(c, (bool, int, float, str)))]
    if bad:
        raise ExperimentError(f"{where}: choices must be numbers, strings, booleans or null, got {bad[0]!r}")
    if "low" in spec or "high" in spec or "step" in spec:
        raise ExperimentError(f"{where}: a categorical takes `choices` only, not low/high/step")
    return ParamSpec(key, "categorical", choices=tuple(choices))


def _check_log(low: Any, high: Any, step: Any, num: Any, where: str) -> None:
    if not 0 < low < high:
        raise ExperimentError(f"{where}: a log range needs 0 < low < high, got low={low}, high={high}")
    if step is not None:
        raise ExperimentError(f"{where}: a log range takes no `step` (use `num` for grid points)")
    if num is not None and (isinstance(num, bool) or not isinstance(num, int) or num < 2):
        raise ExperimentError(f"{where}: num must be an integer >= 2, got {num!r}")


def _check_linear(typ: str, low: Any, high: Any, step: Any, num: Any, where: str) -> None:
    integer = typ == "int"
    if num is not None:
        raise ExperimentError(f"{where}: `num` is for type log; use `step` for {typ}")
    if (integer and not low <= high) or (not integer and not low < high):
        raise ExperimentError(f"{where}: need low {'<=' if integer else '<'} high, got low={low}, high={high}")
    if step is not None:
        _number(step, f"{where}: step", integer)
        if not step > 0:
            raise ExperimentError(f"{where}: step must be > 0, got {step}")


def _range(key: str, typ: str, spec: dict[str, Any], where: str) -> ParamSpec:
    if "choices" in spec:
        raise ExperimentError(f"{where}: `choices` belongs to type categorical, not {typ}")
    if "low" not in spec or "high" not in spec:
        raise ExperimentError(f"{where}: type {typ} needs `low` and `high`")
    integer = typ == "int"
    low = _number(spec["low"], f"{where}: low", integer)
    high = _number(spec["high"], f"{where}: high", integer)
    step, num = spec.get("step"), spec.get("num")
    if typ == "log":
        _check_log(low, high, step, num, where)
    else:
        _check_linear(typ, low, high, step, num, where)
    return ParamSpec(key, typ, low, high, step, num)  # type: ignore[arg-type]


def _param(key: Any, spec: Any, source: str) -> ParamSpec:
    if not isinstance(key, str) or not key:
        raise ExperimentError(f"{source}: keys must be dotted recipe keys such as optim.lr, got {key!r}")
    where = f"{source}: {key!r}"
    if key.split(".")[0] == "run":
        raise ExperimentError(f"{where}: run.* keys are set by the sweep itself and cannot be searched")
    if not isinstance(spec, dict):
        raise ExperimentError(f"{where} must map to {{type: ..., ...}}, got {spec!r}")
    extra = set(spec) - _FIELDS
    if extra:
        raise ExperimentError(f"{where}: unknown field(s) {', '.join(sorted(map(str, extra)))}; "
                              f"allowed: {', '.join(sorted(_FIELDS))}")
    typ = spec.get("type")
    if typ not in TYPES:
        close = difflib.get_close_matches(str(typ), TYPES, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ExperimentError(f"{where}: type {typ!r} is not allowed{hint}; allowed: {', '.join(TYPES)}")
    return _categorical(key, spec, where) if typ == "categorical" else _range(key, typ, spec, where)


def parse_space(data: Any, source: str = "space") -> list[ParamSpec]:
    """Validate a space mapping (as read from YAML) into :class:`ParamSpec` objects (no recipe check).

    >>> [p.type for p in parse_space({"optim.lr": {"type": "log", "low": 1e-3, "high": 1.0},
    ...                                "optim.name": {"type": "categorical", "choices": ["sgd", "adamw"]}})]
    ['log', 'categorical']
    >>> parse_space({"optim.lr": {"type": "log", "low": 0, "high": 1}})
    Traceback (most recent call last):
    ...
    trickbag.experiments.ExperimentError: space: 'optim.lr': a log range needs 0 < low < high, got low=0, high=1
    """
    if not isinstance(data, dict) or not data:
        raise ExperimentError(
            f"{source} must be a non-empty mapping of recipe keys to distributions, e.g. "
            "'optim.lr: {type: log, low: 1.0e-3, high: 0.3}'"
        )
    return [_param(key, spec, source) for key, spec in data.items()]


def load_space(path: str | os.PathLike, recipe: Any = None) -> list[ParamSpec]:
    """Read a search-space YAML file; with ``recipe`` (a Recipe) also check every key and bound against it.

    Raises :class:`ExperimentError` (one line) for a missing file, bad YAML, a bad distribution, or a
    key / value the recipe schema refuses (with the schema's own message, e.g. a close-match hint).
    """
    path = Path(path)
    if not path.is_file():
        raise ExperimentError(f"--space {str(path)!r} does not exist; give a YAML file of recipe keys to search")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ExperimentError(f"--space {str(path)!r} is not valid YAML{where}") from None
    specs = parse_space(data, source=f"space {path.name}")
    if recipe is not None:
        base = recipe.model_dump(mode="json")
        for p in specs:
            for value in p.probes():
                recipe_with(base, {p.key: value}, f"space {path.name}: {p.key}={value!r}")
    return specs


def recipe_with(base: dict[str, Any], params: dict[str, Any], what: str = "") -> Any:
    """The recipe ``base`` (a resolved recipe dict) with dotted ``params`` set; ExperimentError if refused.

    A trial with another ``schedule.name`` leaves out the base's keys its schedule does not take (they were
    the base schedule's); a key of another schedule among ``params`` is refused."""
    from trickbag.config import apply_overrides
    from trickbag.errors import RecipeError
    from trickbag.optim.schedules import settle_schedule
    from trickbag.recipe import recipe_from_dict

    if "schedule.name" in params and isinstance(base.get("schedule"), dict):
        base = {**base, "schedule": settle_schedule({**base["schedule"], "name": params["schedule.name"]},
                                                    stored=True)}
    try:
        return recipe_from_dict(apply_overrides(base, [(k.split("."), v) for k, v in params.items()]))
    except RecipeError as exc:
        raise ExperimentError(f"{what}: {exc}" if what else str(exc)) from None
