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
from trickbag.train.build import make_loader, make_task, model_from_checkpoint
from trickbag.train.tricks import eval_wrappers

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


@torch.inference_mode()
def evaluate_run(path: Path, split: str = "test", device: str = "auto", *, trust_code: bool = False,
                 plain: bool = False, tricks: list[str] | None = None) -> dict[str, Any]:
    """Metrics of a run's best.pt (or of a checkpoint file) on the recipe's ``split``.

    ``tricks``, when given, receives one phrase per evaluation trick the recipe turns on.
    """
    recipe, model, _, data = model_from_checkpoint(checkpoint_of(path), trust_code=trust_code)
    ds = {"test": data.test, "val": data.val, "train": data.eval_train}.get(split)
    if ds is None:
        raise TrickbagError(f"split {split!r} is empty for this recipe; allowed: test, val, train")
    dev = runtime.select_device(device)
    model.to(dev).eval()
    forward = _forward(model, recipe, data.input_shape, plain, tricks)
    precision = recipe.train.precision if recipe.train.precision != "16" else "32"
    metrics = make_task(recipe, data).metrics(dev, test=split == "test")
    for batch in make_loader(ds, recipe, train=False, dist=runtime.DistInfo(), device=dev):
        x, y = runtime.move_to(batch, dev)[:2]
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
            out = _checked(forward, x, recipe, data)
        metrics.update(out, y)
    return metrics.compute()


_IMAGE_EXT = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def _read_image(path: Path) -> Any:
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


def _table_inputs(data: Any, files: list[Path]) -> tuple[list[str], Any]:
    """(row names, model inputs) of CSV files of feature rows, prepared as the training data was."""
    import csv

    if data.read_rows is None or data.prepare is None:
        raise TrickbagError("this run's data source does not take CSV rows; predict takes images or table rows")
    names, parts = [], []
    for path in files:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            rows = [r for r in csv.reader(fh) if r and any(c.strip() for c in r)]
        if len(rows) < 2:
            raise TrickbagError(f"{str(path)!r} has no data rows (a header and at least one row expected)")
        try:
            parts.append(data.prepare(data.read_rows(rows[0], rows[1:])))
        except ValueError as exc:  # a feature column the file lacks
            raise TrickbagError(f"{str(path)!r} lacks a feature column of the run: {exc}") from None
        names += [f"{path}:{i}" for i in range(1, len(rows))]
    return names, torch.cat(parts)


def _image_inputs(data: Any, files: list[Path]) -> tuple[list[str], Any]:
    images = [_read_image(f) for f in files]  # every input is an image (else one line naming it) ...
    if data.predict_transform is None:  # ... and the run takes images
        raise TrickbagError("this run's data source does not take images; predict takes images or CSV table rows")
    return [str(f) for f in files], torch.stack([data.predict_transform(im) for im in images])


def predict(path: Path, inputs: list[str], *, top_k: int = 5, trust_code: bool = False, plain: bool = False,
            tricks: list[str] | None = None, batch_size: int = 64) -> tuple[Any, list[str], Any]:
    """(task, input names, outputs ``[N, K]``) of a run on images (files, folders, globs) or CSV rows.

    Inputs are batched ``batch_size`` at a time through the run's evaluation forward (its TTA and
    test size unless ``plain``); the task turns outputs into predictions (:meth:`Task.describe`).
    """
    if top_k < 1:
        raise TrickbagError(f"--top-k must be >= 1, got {top_k}")
    files = expand_inputs(inputs)
    recipe, model, _, data = model_from_checkpoint(checkpoint_of(path), trust_code=trust_code)
    tables = [f for f in files if f.suffix.lower() == ".csv"]
    names, x = _table_inputs(data, tables) if tables else _image_inputs(data, files)
    forward = _forward(model, recipe, data.input_shape, plain, tricks)
    outs = []
    with torch.inference_mode():
        for i in range(0, len(x), batch_size):
            outs.append(_checked(forward, x[i:i + batch_size], recipe, data))
    return make_task(recipe, data), names, torch.cat(outs)


def _checked(forward: Any, x: Any, recipe: Any, data: Any) -> Any:
    """``forward(x)``, a model/input mismatch turned into one line (the pre-flight check of eval/predict)."""
    from trickbag.runs.preflight import model_hint
    from trickbag.train.build import resolve_model_name

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
