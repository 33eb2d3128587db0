"""The recipe ``trickbag train`` uses when none is named, and the image size of ``imagefolder-scratch``.

With no recipe named, the data picks it: ``data.name=csv`` trains with ``tabular`` (an MLP held back for small
tables), ``data.name=imagefolder`` with ``imagefolder-scratch`` (a small CNN from scratch, sized from the images);
any other data keeps the default (``digits``). The user's overrides still apply on top. ``imagefolder-scratch``
without ``data.image_size`` trains at the median short side of the folder's images (up to
:data:`SIZE_SAMPLE` of them, read header-only), clamped to [16, 64] and rounded to a multiple of 8.

Nothing here imports torch.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

__all__ = ["DATA_RECIPES", "SCRATCH", "SIZE_SAMPLE", "fit_recipe", "image_size_rule", "folder_image_size"]

#: data.name -> the built-in recipe a run with no recipe named trains with
DATA_RECIPES = {"csv": "tabular", "imagefolder": "imagefolder-scratch"}
#: the recipe sized from its images
SCRATCH = "imagefolder-scratch"
#: at most this many images are looked at for the size (spread evenly over the sorted file list)
SIZE_SAMPLE = 300
_IMG_EXT = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def image_size_rule(short_sides: list[int]) -> int:
    """The training size for images whose short sides are ``short_sides``: their median, clamped to [16, 64],
    rounded to the nearest multiple of 8 (halves up).

    >>> image_size_rule([28, 28, 30]), image_size_rule([8, 10]), image_size_rule([500, 375]), image_size_rule([43])
    (32, 16, 64, 40)
    """
    s = min(64.0, max(16.0, float(statistics.median(short_sides))))
    return int(math.floor(s / 8 + 0.5)) * 8


def folder_image_size(root: str | Path, limit: int = SIZE_SAMPLE) -> tuple[int, int, float] | None:
    """(size by :func:`image_size_rule`, images looked at, their median short side) for the images under
    ``root`` (any depth), or None when none can be read. Only the headers are read (PIL's lazy open)."""
    from PIL import Image

    root = Path(root).expanduser()
    if not root.is_dir():
        return None
    files = sorted(p for p in root.rglob("*") if p.suffix.lower() in _IMG_EXT and p.is_file())
    if len(files) > limit:  # evenly spread, so every class folder is represented
        files = [files[(i * len(files)) // limit] for i in range(limit)]
    sides = []
    for path in files:
        try:
            with Image.open(path) as img:
                sides.append(min(img.size))
        except Exception:  # not an image, truncated header: the data source reports it when the run reads it
            continue
    if not sides:
        return None
    return image_size_rule(sides), len(sides), float(statistics.median(sides))


def _given(overrides: list[str], key: str) -> bool:
    return any(item.partition("=")[0].strip() == key for item in overrides)


def fit_recipe(recipe_name: str | None, overrides: list[str]) -> tuple[str | None, list[str], str | None]:
    """The recipe to load for ``trickbag train [recipe_name] overrides``: ``(name, extra overrides, line)``.

    A named recipe stays; only ``imagefolder-scratch`` gets its image size from the folder when the overrides do
    not set ``data.image_size``. With none named, the recipe of ``data.name`` (:data:`DATA_RECIPES`), else None
    (the default). ``extra`` goes *before* the user's overrides; ``line`` is what the command says on stderr
    about its choice (None when there is nothing to say). Bad overrides are left for the recipe loader to refuse.
    """
    from trickbag.errors import RecipeError
    from trickbag.recipe import load_recipe

    name, line = recipe_name, None
    if recipe_name is None:
        try:
            data = load_recipe(None, overrides).data
        except RecipeError:
            return None, [], None  # refused again, in one line, when the command loads it
        name = DATA_RECIPES.get(data.name)
        if name is None:
            return None, [], None
        line = f"no recipe named: data.name={data.name} trains with the {name} recipe"
    extra: list[str] = []
    if recipe_name is None and data.name == "csv" and not _given(overrides, "data.label_column"):
        # which column is the label is the user's data, not the recipe's choice: the command's default stays
        column = data.label_column
        extra.append(f"data.label_column={column}" if isinstance(column, str)
                     else f"data.label_column=[{', '.join(column)}]")
    if name == SCRATCH and not _given(overrides, "data.image_size"):
        try:
            root = load_recipe(name, overrides).data.root
        except RecipeError:
            root = None
        found = folder_image_size(root) if root else None
        if found is not None:
            size, n, median = found
            extra = [f"data.image_size={size}"]
            said = (f"{size}x{size} pixels (the median short side of {n} images is {median:g}; "
                    "data.image_size=N to change)")
            line = f"{line} at {said}" if line else f"{name}: images at {said}"
    if line is not None and recipe_name is None:
        line += "; name one to choose"
    return name, extra, line
