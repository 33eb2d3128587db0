"""Using a trained run: its metrics on a split (``trickbag eval``) and its predictions (``trickbag predict``).

The recipe's evaluation tricks (flip TTA, the multi-scale test size) are applied as in the run's own
evaluation, unless ``plain``; EMA/SWA need nothing here, their checkpoints hold the averaged weights.
"""

from __future__ import annotations

import glob
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from trickbag import runtime
from trickbag.data.sources.images import MAX_IMAGE_PIXELS
from trickbag.errors import CheckpointError, TrickbagError
from trickbag.train.parts import make_loader, make_task, model_from_checkpoint
from trickbag.tricks import eval_wrappers

__all__ = ["evaluate_run", "predict", "predict_image", "prediction_rows", "expand_inputs", "checkpoint_of"]


def checkpoint_of(path: Path) -> Path:
    """``path`` itself, or the ``checkpoints/best.pt`` of a run directory."""
    path = Path(path).expanduser()
    if path.is_dir():
        best = path / "checkpoints" / "best.pt"
        if not best.exists():
            raise CheckpointError(f"{str(path)!r} has no checkpoints/best.pt")
        return best
    return path


def _forward(model: torch.nn.Module, recipe: Any, input_shape: tuple[int, ...], plain: bool,
             tricks: list[str] | None) -> Callable[[torch.Tensor], torch.Tensor]:
    wrappers = eval_wrappers(recipe, input_shape)
    if tricks is not None:
        tricks += [phrase for phrase, _ in wrappers]
    forward: Callable[[torch.Tensor], torch.Tensor] = model
    for _, wrap in [] if plain else wrappers:
        forward = wrap(forward)
    return forward


def _labelled(data: Any, path: str) -> Any:
    """``eval --data PATH``: a labelled CSV (table runs) or a folder of class sub-folders (image-folder runs),
    prepared with the run's stored preprocessing."""
    from trickbag.data.sources.fitted import labelled_table
    from trickbag.data.sources.images import labelled_folder

    state = data.fitted or {}
    if "table" in state:
        return labelled_table(state, path)
    if "image" in state:
        return labelled_folder(state["image"], list(data.classes), path)
    raise TrickbagError(f"eval --data takes a labelled CSV (table runs) or a folder of class sub-folders (image-folder "
                        f"runs); this run's data source ({state.get('source', 'unknown')}) has neither: use --split")


@torch.inference_mode()
def evaluate_run(path: Path, split: str = "test", device: str = "auto", *, trust_code: bool = False,
                 plain: bool = False, tricks: list[str] | None = None, data: str | None = None) -> dict[str, Any]:
    """Metrics of a run's best.pt (or of a checkpoint file) on the recipe's ``split``, or on new labelled ``data``
    (a CSV file or a folder of class sub-folders, prepared with the run's stored preprocessing).

    ``tricks``, when given, receives one phrase per evaluation trick the recipe turns on.
    """
    recipe, model, _, splits = model_from_checkpoint(checkpoint_of(path), trust_code=trust_code, splits=data is None)
    if data is not None:
        ds = _labelled(splits, data)
    else:
        ds = {"test": splits.test, "val": splits.val, "train": splits.eval_train}.get(split)
    if ds is None or len(ds) == 0:
        raise TrickbagError(f"split {split!r} is empty for this recipe; allowed: test, val, train")
    dev = runtime.select_device(device)
    model.to(dev).eval()
    forward = _forward(model, recipe, splits.input_shape, plain, tricks)
    precision = recipe.train.precision if recipe.train.precision != "16" else "32"
    metrics = make_task(recipe, splits).metrics(dev, test=split == "test" or data is not None)
    for batch in make_loader(ds, recipe, train=False, dist=runtime.DistInfo(), device=dev):
        x, y = runtime.move_to(batch, dev)[:2]
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
            out = _checked(forward, x, recipe, splits)
        metrics.update(out, y)
    return metrics.compute()


_IMAGE_EXT = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def read_image(path: Path) -> Any:
    from PIL import Image, UnidentifiedImageError

    Image.MAX_IMAGE_PIXELS = MAX_IMAGE_PIXELS
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as im:
                if im.width * im.height > MAX_IMAGE_PIXELS:
                    raise TrickbagError(f"image {str(path)!r} has {im.width}x{im.height} pixels, more than the "
                                        f"{MAX_IMAGE_PIXELS:,} allowed; resize it first")
                return im.copy()
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise TrickbagError(f"image {str(path)!r} is too large to decode safely (more than {MAX_IMAGE_PIXELS:,} "
                            "pixels); resize it first") from None
    except (UnidentifiedImageError, OSError):
        raise TrickbagError(f"{str(path)!r} is not an image file PIL can read") from None


def expand_inputs(items: list[str]) -> list[Path]:
    """Files, folders (their images, recursively, sorted) and glob patterns -> the list of files."""
    out: list[Path] = []
    for item in items:
        path = Path(item).expanduser()
        if any(c in item for c in "*?["):
            matches = sorted(Path(p) for p in glob.glob(str(path), recursive=True))
            if not matches:
                raise TrickbagError(f"{item!r} matches no file")
            out += [m for m in matches if m.is_file()]
        elif path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.suffix.lower() in _IMAGE_EXT and p.is_file())
            if not found:
                raise TrickbagError(f"folder {item!r} holds no image ({', '.join(_IMAGE_EXT)})")
            out += found
        elif path.is_file():
            out.append(path)
        else:
            raise TrickbagError(f"input {item!r} does not exist")
    return out


def _table_inputs(data: Any, files: list[Path], id_column: str | None,
                  skipped: list[tuple[str, str]] | None) -> tuple[list[str], Any]:
    """(row names, model inputs) of CSV files of feature rows, prepared with the run's stored encoding.

    A file that cannot be used (bad cells, a missing column) is added to ``skipped`` with its reason,
    or, without ``skipped``, raises its one-line error."""
    from trickbag.data.sources.table import read_csv

    if data.read_rows is None or data.prepare is None:
        raise TrickbagError("this run's data source does not take CSV rows; predict takes images or table rows")
    names, parts = [], []
    for path in files:
        try:
            header, rows = read_csv(path, repr(str(path)))
            if id_column is not None and id_column not in header:
                raise TrickbagError(f"--id-column {id_column!r} is not a column of {str(path)!r}; its columns: "
                                    f"{', '.join(header)}")
            parts.append(data.prepare(data.read_rows(header, rows, str(path))))
        except TrickbagError as exc:
            if skipped is None:
                raise
            skipped.append((str(path), str(exc)))
            continue
        if id_column is not None:
            i = header.index(id_column)
            names += [row[i].strip() for row in rows]
        else:
            names += [f"{path}:{i}" for i in range(1, len(rows) + 1)]
    return names, torch.cat(parts) if parts else None


def _image_inputs(data: Any, files: list[Path], skipped: list[tuple[str, str]] | None) -> tuple[list[str], Any]:
    if data.predict_transform is None:  # the run takes images
        raise TrickbagError("this run's data source does not take images; predict takes images or CSV table rows")
    names, xs = [], []
    for f in files:
        try:
            xs.append(data.predict_transform(read_image(f)))
        except TrickbagError as exc:  # an unreadable or too large file
            if skipped is None:
                raise
            skipped.append((str(f), str(exc)))
            continue
        except Exception as exc:  # a mode the transform cannot convert
            reason = f"{str(f)!r} cannot be prepared: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
            if skipped is None:
                raise TrickbagError(reason) from None
            skipped.append((str(f), reason))
            continue
        names.append(str(f))
    return names, torch.stack(xs) if xs else None


def predict(path: Path, inputs: list[str], *, top_k: int = 5, trust_code: bool = False, plain: bool = False,
            tricks: list[str] | None = None, batch_size: int = 64, id_column: str | None = None,
            skipped: list[tuple[str, str]] | None = None) -> tuple[Any, list[str], Any]:
    """(task, input names, outputs ``[N, K]``) of a run on images (files, folders, globs) or CSV rows.

    Inputs are prepared with the run's stored preprocessing (no training data needed) and batched
    ``batch_size`` at a time through the run's evaluation forward (its TTA and test size unless
    ``plain``); the task turns outputs into predictions (:meth:`Task.describe`). CSV rows are named
    ``file:row``, or by their ``id_column``. With a ``skipped`` list, an input that cannot be read is
    added to it as (name, reason) and the others are predicted; without it, the first one raises.
    """
    if top_k < 1:
        raise TrickbagError(f"--top-k must be >= 1, got {top_k}")
    files = expand_inputs(inputs)
    recipe, model, _, data = model_from_checkpoint(checkpoint_of(path), trust_code=trust_code)
    tables = [f for f in files if f.suffix.lower() == ".csv"]
    if id_column is not None and not tables:
        raise TrickbagError("--id-column names a column of CSV inputs; these inputs are images")
    names, x = _table_inputs(data, tables, id_column, skipped) if tables else _image_inputs(data, files, skipped)
    if x is None:
        reasons = "; ".join(reason for _, reason in (skipped or [])[:3])
        raise TrickbagError(f"no input could be read: {reasons}")
    forward = _forward(model, recipe, data.input_shape, plain, tricks)
    outs = []
    with torch.inference_mode():
        for i in range(0, len(x), batch_size):
            outs.append(_checked(forward, x[i:i + batch_size], recipe, data))
    return make_task(recipe, data), names, torch.cat(outs)


def _checked(forward: Any, x: Any, recipe: Any, data: Any) -> Any:
    """``forward(x)``, a model/input mismatch turned into one line (the pre-flight check of eval/predict)."""
    from trickbag.runs.preflight import model_hint
    from trickbag.train.parts import resolve_model_name

    try:
        return forward(x)
    except TrickbagError:
        raise
    except Exception as exc:
        raise TrickbagError(f"model {resolve_model_name(recipe, data)!r} cannot take inputs of shape "
                            f"{list(x.shape[1:])}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}; "
                            f"{model_hint(data.kind, tuple(data.input_shape))}") from None


def prediction_rows(task: Any, names: list[str], outputs: Any, top_k: int) -> tuple[list[str], list[list[Any]]]:
    """CSV header and rows: one row per input, with the prediction and its probability or value."""
    described = task.describe(outputs, top=top_k)
    if task.name == "classification":
        header = ["input", "prediction", "probability", f"top{top_k}"]
        rows = [
            [n, d[0][0], f"{d[0][1]:.6f}", "; ".join(f"{c} {p:.4f}" for c, p in d)] for n, d in zip(names, described)
        ]
    elif task.name == "multilabel":
        header = ["input", "labels"] + [f"p({label})" for label, _ in described[0]]
        rows = [[n, ";".join(label for label, p in d if p > 0.5)] + [f"{p:.6f}" for _, p in d]
                for n, d in zip(names, described)]
    else:
        header = ["input"] + [target for target, _ in described[0]]
        rows = [[n] + [f"{v:.6g}" for _, v in d] for n, d in zip(names, described)]
    return header, rows


def predict_image(ckpt_path: Path, image_path: Path, top: int = 5, *, trust_code: bool = False,
                  plain: bool = False, tricks: list[str] | None = None) -> list[tuple[str, float]]:
    """Class probabilities of one image under a run checkpoint, highest first."""
    image_path = Path(image_path)
    if not image_path.is_file():
        raise TrickbagError(f"image {str(image_path)!r} does not exist")
    task, _, out = predict(ckpt_path, [str(image_path)], top_k=top, trust_code=trust_code, plain=plain, tricks=tricks)
    return task.describe(out, top=top)[0]
