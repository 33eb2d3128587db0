"""Recipe tricks: build the plug-ins the recipe's ``tricks`` section switches on."""

from __future__ import annotations

from trickbag.config import Recipe
from trickbag.train.plugin import Plugin

__all__ = ["build_tricks"]


def build_tricks(recipe: Recipe) -> list[Plugin]:
    """Plug-ins for the tricks enabled in ``recipe.tricks``, in the order they run."""
    return []


def describe_tricks() -> str:
    """One line per trick: its name, what it does, and its recipe keys."""
    return "no recipe tricks are registered yet"
