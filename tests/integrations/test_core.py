"""The framework-neutral session: its refusal table is the docs' table, batches are found in tuples and dicts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from trickbag.errors import MissingExtraError, RecipeError
from trickbag.integrations.core import MINIMUM, REFUSED, TrickSession, require, split_batch

DOCS = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"


def test_docs_refused_table_is_core_refused() -> None:
    text = DOCS.read_text()
    block = text.split("<!-- refused-table")[1].split("<!-- end refused-table")[0]
    rows = dict(re.findall(r"^\| (\w+) \| (.+?) \|$", block, flags=re.M))
    rows.pop("refused", None)
    assert rows == REFUSED


def test_docs_keep_the_hf_section() -> None:
    assert "\n## Hugging Face Trainer\n" in DOCS.read_text()


def test_split_batch_finds_inputs_and_labels() -> None:
    x, y = torch.zeros(2, 3), torch.ones(2)
    (a, b), back = split_batch({"pixel_values": x, "labels": y, "mask": 1})
    assert a is x and b is y and back((y, x)) == {"pixel_values": y, "labels": x, "mask": 1}
    (a, b, c), back = split_batch([x, y, 5])
    assert a is x and back((y, x, 5)) == [y, x, 5]
    (a, b), back = split_batch({"input_ids": x, "label": y})
    assert a is x and b is y


@pytest.mark.parametrize("batch", [{"text": 1, "labels": 2}, torch.zeros(3), (torch.zeros(3),)])
def test_split_batch_refuses_what_it_cannot_read(batch: object) -> None:
    with pytest.raises(RecipeError, match="batch tricks need"):
        split_batch(batch)


def test_session_validates_before_training() -> None:
    with pytest.raises(RecipeError, match="tricks.compile is refused under HF"):
        TrickSession({"compile": {}}, framework="HF")
    with pytest.raises(RecipeError, match="decai"):
        TrickSession({"ema": {"decai": 1}})
    with pytest.raises(RecipeError, match="schedule= takes a recipe's schedule section"):
        TrickSession(schedule="cosine")  # type: ignore[arg-type]
    assert TrickSession({"ema": {}}).enabled("ema") and not TrickSession({}).enabled("ema")


@pytest.mark.parametrize(("package", "installed"), [("lightning", "2.5.2"), ("lightning", "2.4.0"),
                                                    ("transformers", "4.57.6"), ("transformers", "5.0.0"),
                                                    ("accelerate", "1.2.1"), ("accelerate", "1.6.0")])
def test_a_framework_release_older_than_the_tested_one_is_refused_in_one_line(package: str, installed: str,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRICKBAG_ANY_FRAMEWORK_RELEASE", raising=False)
    want = ".".join(map(str, MINIMUM[package]))
    with pytest.raises(MissingExtraError) as err:
        require(package, installed)
    assert str(err.value) == (f"trickbag.integrations needs {package}>={want}, installed is {installed}: "
                              f"pip install -U '{package}>={want}'")


@pytest.mark.parametrize("installed", ["2.5.3", "2.5.6", "2.6.0", "2.6.6", "3.0.0rc1", "10.1"])
def test_the_tested_releases_and_newer_pass(installed: str) -> None:
    require("lightning", installed)


def test_the_minimums_are_pyprojects() -> None:
    """pyproject's extras declare the releases :data:`MINIMUM` holds."""
    text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    for package, need in MINIMUM.items():
        assert re.search(rf'"{package}>={re.escape(".".join(map(str, need)))}(\.0)?"', text), package
