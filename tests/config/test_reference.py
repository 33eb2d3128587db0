"""The recipe reference: generated from the schema, complete, and docs/recipes.md is never stale."""

from __future__ import annotations

from pathlib import Path

from trickbag.config.reference import key_docs, keys_markdown, keys_text
from trickbag.recipe import Recipe, recipe_keys

DOCS = Path(__file__).resolve().parents[2] / "docs" / "recipes.md"


def test_docs_recipes_md_is_the_generated_reference():
    assert DOCS.read_text(encoding="utf-8") == keys_markdown(Recipe), (
        "docs/recipes.md is stale: regenerate it with `trickbag recipes --keys --markdown > docs/recipes.md`")


def test_every_key_is_listed_with_a_help_line():
    docs = key_docs(Recipe)
    assert list(dict.fromkeys(d.key for d in docs)) == recipe_keys()  # schedule.gamma: once per schedule taking it
    assert [d.key for d in docs if not d.help] == []
    text = keys_text(Recipe)
    for key in recipe_keys():
        assert f"  {key} " in text, key


def test_types_defaults_and_allowed_values_come_from_the_schema():
    by_key = {d.key: d for d in key_docs(Recipe)}
    lr = by_key["optim.lr"]
    assert (lr.type, lr.default, lr.allowed) == ("float", "0.1", "> 0.0")
    assert by_key["task.type"].allowed == "classification, multilabel, regression"
    assert (
        by_key["tricks.mix.enabled"].default == "false" and by_key["tricks.mix.enabled"].help == "switch the trick on"
    )
    assert by_key["optim.lr"].help.startswith("peak learning rate")


def test_each_schedule_lists_its_own_keys():
    """schedule is one section per schedule.name: the shared keys once, then each schedule's own keys."""
    docs = [d for d in key_docs(Recipe) if d.key.startswith("schedule.")]
    shared = [(d.key, d.type, d.default) for d in docs if not d.variant]
    assert shared[0][:3] == ("schedule.name", "choice", "cosine") and shared[1][0] == "schedule.warmup_epochs"
    assert docs[0].allowed == "constant, step, multistep, cosine, onecycle, linear, polynomial, plateau, wsd, none"
    own = {}
    for d in docs:
        if d.variant:
            own.setdefault(d.variant, []).append(d.key.removeprefix("schedule."))
    assert own == {"name=step": ["step_epochs", "gamma"], "name=multistep": ["milestones", "gamma"],
                   "name=cosine": ["min_lr"], "name=polynomial": ["power"], "name=plateau": ["gamma", "patience"],
                   "name=wsd": ["min_lr", "decay_fraction", "decay_shape"]}
    assert all(d.help for d in docs)
    text = keys_text(Recipe)
    assert "[schedule, name=wsd] " in text and "## `schedule` with `name: wsd`" in keys_markdown(Recipe)
