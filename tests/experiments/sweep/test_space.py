"""Search spaces: one-line errors naming the key and what is allowed, keys and bounds checked against the
recipe schema, and grids against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from trickbag.experiments import ExperimentError
from trickbag.experiments.sweep import load_space, parse_space
from trickbag.recipe import load_recipe


def write(path, text):
    path.write_text(text)
    return path


def test_space_errors_name_the_key_and_what_is_allowed():
    cases = [
        ({"optim.lr": {"type": "logg", "low": 1e-3, "high": 1}}, "type 'logg' is not allowed (did you mean 'log'?)"),
        ({"optim.lr": {"type": "float", "low": 1}}, "type float needs `low` and `high`"),
        ({"optim.lr": {"type": "float", "low": 1, "high": 0.5}}, "need low < high, got low=1, high=0.5"),
        ({"data.batch_size": {"type": "int", "low": 8.5, "high": 64}}, "low must be an integer, got 8.5"),
        ({"optim.name": {"type": "categorical", "choices": []}}, "a categorical needs a non-empty list `choices`"),
        ({"optim.lr": {"type": "log", "low": 1e-3, "high": 1, "stepp": 2}}, "unknown field(s) stepp"),
        ({"run.name": {"type": "categorical", "choices": ["a"]}}, "run.* keys are set by the sweep itself"),
        ({"optim.lr": {"type": "log", "low": 1e-3, "high": 1, "step": 2}}, "a log range takes no `step`"),
        ({"optim.lr": {"type": "float", "low": 0, "high": 1, "num": 3}}, "`num` is for type log"),
        ({"optim.lr": {"type": "float", "low": 0, "high": 1, "step": -1}}, "step must be > 0, got -1"),
        ([], "must be a non-empty mapping"),
    ]
    for data, msg in cases:
        with pytest.raises(ExperimentError) as e:
            parse_space(data)
        assert msg in str(e.value) and "\n" not in str(e.value)


def test_space_is_checked_against_the_recipe_schema(tmp_path):
    recipe = load_recipe("digits")
    bad_key = write(tmp_path / "a.yaml", "optim.lrr: {type: log, low: 1.0e-3, high: 0.1}\n")
    with pytest.raises(ExperimentError, match=r"unknown recipe key 'optim.lrr' \(did you mean 'optim.lr'\?\)"):
        load_space(bad_key, recipe)
    bad_value = write(tmp_path / "b.yaml", "optim.momentum: {type: float, low: 0.5, high: 1.5}\n")
    with pytest.raises(ExperimentError, match=r"optim.momentum=1.5.*recipe key 'optim.momentum'"):
        load_space(bad_value, recipe)
    bad_choice = write(tmp_path / "c.yaml", "optim.name: {type: categorical, choices: [sgd, adafactor]}\n")
    with pytest.raises(ExperimentError, match="'adafactor' is not allowed"):
        load_space(bad_choice, recipe)
    ok = write(tmp_path / "d.yaml", "optim.lr: {type: log, low: 1.0e-3, high: 0.1, num: 3}\n"
                                    "data.batch_size: {type: int, low: 16, high: 64, step: 16}\n"
                                    "optim.weight_decay: {type: float, low: 0.0, high: 1.0e-3, step: 5.0e-4}\n")
    specs = {p.key: p for p in load_space(ok, recipe)}
    np.testing.assert_allclose(specs["optim.lr"].grid(), np.geomspace(1e-3, 0.1, 3), rtol=1e-12)
    assert specs["data.batch_size"].grid() == [16, 32, 48, 64]
    np.testing.assert_allclose(specs["optim.weight_decay"].grid(), [0.0, 5e-4, 1e-3], atol=1e-18)
    nogrid = parse_space({"optim.lr": {"type": "log", "low": 1e-3, "high": 0.1}})[0]
    with pytest.raises(ExperimentError, match="has no finite grid; add `num:`"):
        nogrid.grid()
