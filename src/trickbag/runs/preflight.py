"""Pre-flight: before a run directory exists, one real training batch goes through the model, the loss
and backward, exactly as training will run it; a model that does not fit the data is one line."""

from __future__ import annotations

from typing import Any

from trickbag.errors import TrickbagError

__all__ = ["PreflightError", "first_batch", "preflight", "model_hint"]


class PreflightError(TrickbagError, ValueError):
    """The model cannot train on the data (input or output shape); nothing was written."""


def first_batch(dataset: Any, batch_size: int) -> tuple[Any, ...]:
    """The first ``min(batch_size, 8)`` samples of ``dataset``, collated as the loader would."""
    from trickbag.data.sources import TensorDataset, collate

    n = max(1, min(batch_size, 8, len(dataset)))
    if isinstance(dataset, TensorDataset):
        return tuple(dataset.gather(list(range(n))))
    return tuple(collate([dataset[i] for i in range(n)]))


def model_hint(kind: str, shape: tuple[int, ...]) -> str:
    """What model fits data of ``kind`` (tabular, image, signal) and per-sample ``shape``."""
    if kind == "tabular":
        return f"tabular features ({shape[-1]},): use model.name=mlp (or auto)"
    if kind == "signal":
        return f"1-D signals {list(shape)}: use model.name=signal_cnn or fast_signal_cnn (or auto)"
    if kind == "image" and min(shape[1:]) < 32:
        return (f"small images {list(shape)}: use model.name=small_cnn (or auto); torchvision models such as "
                "resnet18 downsample 32x and need images of 32 pixels or more")
    return f"images {list(shape)}: use model.name=auto, small_cnn or a torchvision model name"


def _first_line(exc: BaseException) -> str:
    text = (str(exc).strip().splitlines() or [""])[0]
    return text if len(text) <= 200 else text[:197] + "..."


def preflight(trainer: Any, ctx: Any) -> None:
    """Run :meth:`~trickbag.train.trainer.Trainer.try_batch` on the first training batch; raise one
    :class:`PreflightError` naming the model, the input shape, the error and the fix."""
    from trickbag.train.build import resolve_model_name

    data, name = ctx.data, resolve_model_name(ctx.recipe, ctx.data)
    shape = tuple(data.input_shape)
    where = f"model {name!r} on {data.kind} samples of shape {list(shape)}"
    batch = first_batch(data.train, ctx.recipe.data.batch_size)
    try:
        out = trainer.try_batch(batch)
    except TrickbagError:
        raise
    except Exception as exc:  # shape and dtype errors from the model, the loss or a trick
        raise PreflightError(f"{where} fails on the first training batch: {type(exc).__name__}: "
                             f"{_first_line(exc)}; {model_hint(data.kind, shape)}") from None
    want = ctx.num_outputs
    if out.dim() != 2 or out.shape[1] != want:
        raise PreflightError(
            f"{where} returns outputs of shape {list(out.shape)}, but task.type={ctx.task.name} needs [N, {want}] "
            f"({want} {'classes' if ctx.task.name == 'classification' else 'outputs'}); a model.name=package.module:"
            "function model must build num_classes outputs"
        )
