"""Ablation tricks and variants, checked through the recipes they resolve to."""

from __future__ import annotations

import pytest

from trickbag.experiments import ExperimentError
from trickbag.experiments.ablate import ablation_variants, parse_tricks
from trickbag.recipe import load_recipe


def _switches(recipe):
    return {
        "label_smoothing": recipe.tricks.label_smoothing.enabled,
        "ema": recipe.tricks.ema.enabled,
        "data.augment": recipe.data.augment,
        "mixup": recipe.tricks.mix.enabled and recipe.tricks.mix.cutmix_alpha == 0,
    }


@pytest.mark.parametrize("mode", ["leave-one-out", "add-one"])
def test_variants_switch_exactly_the_intended_tricks(mode):
    names = ["label_smoothing", "ema", "data.augment", "mixup"]
    variants, ref = ablation_variants(parse_tricks(",".join(names)), mode)
    # start from a recipe with everything on, so "off" must really be written
    base = ["tricks.label_smoothing.enabled=true", "tricks.ema.enabled=true", "data.augment=true",
            "tricks.mix.enabled=true"]
    expected = {}
    if mode == "leave-one-out":
        assert ref == "all"
        expected["all"] = set(names)
        expected.update({f"-{n}": set(names) - {n} for n in names})
        expected["baseline"] = set()
    else:
        assert ref == "baseline"
        expected["baseline"] = set()
        expected.update({f"+{n}": {n} for n in names})
    assert [v.name for v in variants] == list(expected)
    for v in variants:
        on = {k for k, val in _switches(load_recipe("digits", [*base, *v.overrides])).items() if val}
        assert on == expected[v.name], v.name
        assert set(v.enabled) == expected[v.name]
    assert len({v.slug for v in variants}) == len(variants) and not any(v.slug.startswith("-") for v in variants)


def test_one_trick_leave_one_out_has_no_duplicate_variant():
    variants, ref = ablation_variants(parse_tricks("label_smoothing"), "leave-one-out")
    assert [v.name for v in variants] == ["all", "baseline"] and ref == "all"


@pytest.mark.parametrize("spec, msg", [
    ("label_smothing", "unknown trick 'label_smothing' (did you mean 'label_smoothing'?)"),
    ("optim.lr", "'optim.lr' is not a true/false recipe key"),
    ("data.augmnt", "(did you mean 'data.augment'?)"),
    ("ema,ema", "names ema more than once"),
    ("mixup,cutmix", "'mixup' and 'cutmix' switch the same recipe key (tricks.mix.enabled)"),
    (" , ", "--tricks is empty"),
])
def test_bad_tricks_are_one_clear_line(spec, msg):
    with pytest.raises(ExperimentError) as e:
        parse_tricks(spec)
    assert msg in str(e.value) and "\n" not in str(e.value)
