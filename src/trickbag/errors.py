"""User-facing errors.  The CLI prints their message on one line and exits with status 2."""

from __future__ import annotations


class TrickbagError(Exception):
    """An error caused by the user's input (recipe, data, checkpoint, command line)."""


class RecipeError(TrickbagError, ValueError):
    """A recipe or override is invalid: unknown key, wrong type, out-of-range value."""


class DataError(TrickbagError, ValueError):
    """A data source cannot be read or does not match the recipe."""


class CheckpointError(TrickbagError):
    """A checkpoint is missing, unreadable, unsafe or does not match the model."""


class MissingExtraError(TrickbagError, ImportError):
    """An optional dependency is needed for the requested feature."""


class ConflictError(RecipeError):
    """Two requested features cannot be combined."""
