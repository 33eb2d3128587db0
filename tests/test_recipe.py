"""Recipes: schema validation, overrides and one-line error messages naming key, value and what is allowed."""

from __future__ import annotations

import pytest
import yaml

from trickbag.config import apply_overrides, builtin_recipes, parse_overrides
from trickbag.errors import RecipeError
from trickbag.recipe import Recipe, load_recipe, recipe_from_dict, recipe_to_yaml


def error_of(overrides: list[str], recipe: str = "digits") -> str:
    with pytest.raises(RecipeError) as info:
        load_recipe(recipe, overrides)
    msg = str(info.value)
    assert "\n" not in msg, msg  # one line
    return msg


def test_builtin_digits_recipe_loads_with_its_file_values():
    path = builtin_recipes()["digits"]
    raw = yaml.safe_load(path.read_text())
    r = load_recipe("digits")
    assert r.name == "digits"
    assert (r.data.name, r.data.batch_size, r.optim.lr, r.train.epochs) == (
        raw["data"]["name"], raw["data"]["batch_size"], raw["optim"]["lr"], raw["train"]["epochs"])


def test_overrides_are_applied_and_typed():
    r = load_recipe("digits", ["train.epochs=3", "optim.lr=5e-2", "run.name=try1", "train.clip=1", "data.mean=[0.5]",
                               "log.tensorboard=false"])
    assert (r.train.epochs, r.optim.lr, r.run.name, r.train.clip, r.data.mean, r.log.tensorboard) == (
        3, 0.05, "try1", 1.0, [0.5], False)
    assert isinstance(r.train.epochs, int) and isinstance(r.train.clip, float)


def test_precision_given_as_a_number_is_accepted():
    assert load_recipe("digits", ["train.precision=16"]).train.precision == "16"


@pytest.mark.parametrize(
    "override,expected",
    [
        ("optim.lrr=0.1", "did you mean 'optim.lr'?"),
        ("train.epoch=3", "did you mean 'train.epochs'?"),
        ("trian.epochs=3", "did you mean 'train'?"),
        ("data.batchsize=8", "did you mean 'data.batch_size'?"),
    ],
)
def test_unknown_key_suggests_the_closest_one(override, expected):
    msg = error_of([override])
    assert msg.startswith("unknown recipe key '") and expected in msg, msg


def test_unknown_key_without_a_close_match_lists_the_allowed_keys():
    """No suggestion just because the section prefix matches ('optim.zzzzzz' is not close to 'optim.lr')."""
    msg = error_of(["optim.zzzzzz=1"])
    assert "did you mean" not in msg
    assert "'optim.zzzzzz'" in msg and "allowed in 'optim'" in msg
    for key in ("lr", "momentum", "weight_decay"):
        assert key in msg


@pytest.mark.parametrize(
    "override,key,value,allowed",
    [
        # a wrong type: the type
        ("train.epochs=abc", "train.epochs", "'abc'", "integer"),
        ("optim.lr=fast", "optim.lr", "'fast'", "number"),
        ("data.batch_size=[1, 2]", "data.batch_size", "[1, 2]", "integer"),
        ("log.tensorboard=maybe", "log.tensorboard", "'maybe'", "boolean"),
        # out of range: the range or the allowed values
        ("optim.lr=-1", "optim.lr", "-1", "greater than 0"),
        ("train.epochs=0", "train.epochs", "0", "greater than or equal to 1"),
        ("optim.momentum=1.0", "optim.momentum", "1.0", "less than 1"),
        ("data.val_fraction=1.5", "data.val_fraction", "1.5", "less than 1"),
        ("train.precision=fp8", "train.precision", "'fp8'", "'32', 'bf16' or '16'"),
        ("optim.name=adafactor", "optim.name", "'adafactor'", "'sgd'"),
        ("optim.betas=[0.9, 1.5]", "optim.betas", "1.5", "[0, 1)"),
        ("run.name=a/b", "run.name", "'a/b'", "plain directory name"),
    ],
)
def test_wrong_type_or_out_of_range_names_key_value_and_what_is_allowed(override, key, value, allowed):
    msg = error_of([override])
    assert f"'{key}'" in msg and value in msg and allowed in msg, msg


def test_cross_field_conflict_is_one_line():
    msg = error_of(["train.deterministic=true", "train.benchmark=true"])
    assert "train.deterministic" in msg and "train.benchmark" in msg


@pytest.mark.parametrize("item", ["optim.lr", "optim.lr:0.1", ""])
def test_override_without_equals_sign_is_refused_with_the_form_to_use(item):
    with pytest.raises(RecipeError, match="no '='.*key.sub=value"):
        parse_overrides([item])


def test_override_with_empty_key_part_is_refused():
    with pytest.raises(RecipeError, match="empty key"):
        parse_overrides(["optim..lr=0.1"])


def test_override_into_a_value_is_refused():
    with pytest.raises(RecipeError, match="'optim.lr' is a value, not a section"):
        apply_overrides({"optim": {"lr": 0.1}}, parse_overrides(["optim.lr.x=1"]))


def test_apply_overrides_does_not_change_its_input():
    data = {"optim": {"lr": 0.1}}
    out = apply_overrides(data, [(["optim", "lr"], 0.2), (["train", "epochs"], 2)])
    assert data == {"optim": {"lr": 0.1}} and out == {"optim": {"lr": 0.2}, "train": {"epochs": 2}}


@pytest.mark.parametrize("text", ["", "# only a comment\n", "\n\n"])
def test_empty_recipe_file_is_refused(tmp_path, text):
    path = tmp_path / "r.yaml"
    path.write_text(text)
    with pytest.raises(RecipeError, match="is empty") as info:
        load_recipe(str(path))
    assert "r.yaml" in str(info.value)


@pytest.mark.parametrize(
    "content,match",
    [
        (b"data: [1, 2\ntrain: {", "not valid YAML at line"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe", "not a text file|not valid YAML"),
        (b"- just\n- a list\n", "must be a mapping"),
        (b"data: 3\n", "'data' must be a mapping"),
    ],
    ids=["broken_yaml", "binary", "list", "section_not_mapping"],
)
def test_not_a_yaml_recipe_is_refused_in_one_line(tmp_path, content, match):
    path = tmp_path / "r.yaml"
    path.write_bytes(content)
    with pytest.raises(RecipeError, match=match) as info:
        load_recipe(str(path))
    assert "\n" not in str(info.value)


def test_missing_recipe_suggests_a_builtin():
    with pytest.raises(RecipeError, match="not found.*did you mean 'digits'"):
        load_recipe("digit")


def test_yaml_file_values_and_defaults(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("data:\n  name: fake\n  num_samples: 100\ntrain:\n  epochs: 2\n")
    r = load_recipe(str(path), ["train.seed=3"])
    assert r.name == "mine"  # from the file name
    assert (r.data.name, r.data.num_samples, r.train.epochs, r.train.seed) == ("fake", 100, 2, 3)
    assert r.optim == Recipe().optim  # untouched sections keep the schema defaults


def test_resolved_recipe_round_trips_through_yaml():
    r = load_recipe("digits", ["train.epochs=4", "optim.betas=[0.8, 0.9]"])
    back = recipe_from_dict(yaml.safe_load(recipe_to_yaml(r)))
    assert back == r
