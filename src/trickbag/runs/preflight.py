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


def _output_problem(out: Any, want: int, task: str) -> str | None:
    """Why a model's output cannot go into the task's loss, or None."""
    import torch

    need = f"one tensor of shape [N, {want}] ({want} {'classes' if task == 'classification' else 'outputs'})"
    if isinstance(out, (tuple, list)):
        return (
            f"returns a {type(out).__name__} of {len(out)} items; task.type={task} needs {need}: return the logits only"
        )
    if isinstance(out, dict):
        return f"returns a dict (keys {sorted(out)[:4]}); task.type={task} needs {need}: return the logits only"
    if not isinstance(out, torch.Tensor):
        return f"returns {type(out).__name__}; task.type={task} needs {need}"
    if out.dim() != 2 or out.shape[1] != want:
        return (f"returns outputs of shape {list(out.shape)}, but task.type={task} needs {need}; a "
                "model.name=package.module:function model must build num_classes outputs")
    return None


def preflight(trainer: Any, ctx: Any) -> None:
    """Run :meth:`~trickbag.train.trainer.Trainer.try_batch` on the first training batch; raise one
    :class:`PreflightError` naming the model, the input shape, the error and the fix (an output the
    loss cannot take is named as such, before the loss's own error)."""
    import torch

    from trickbag.nn import unwrap
    from trickbag.train.parts import resolve_model_name

    data, name = ctx.data, resolve_model_name(ctx.recipe, ctx.data)
    shape = tuple(data.input_shape)
    where = f"model {name!r} on {data.kind} samples of shape {list(shape)}"
    hint = (f"check that {name} takes samples of shape {list(shape)}, or use model.name=auto" if ":" in name
            else model_hint(data.kind, shape))
    batch = first_batch(data.train, ctx.recipe.data.batch_size)
    seen: list[Any] = []
    inputs: list[Any] = []

    def hook(module: Any, args: Any, output: Any) -> None:
        if not seen:
            seen.append(output)
            inputs.append(args[0] if args else None)

    handle = unwrap(trainer.state.model).register_forward_hook(hook)
    try:
        out = trainer.try_batch(batch)
    except TrickbagError:
        raise
    except Exception as exc:  # shape and dtype errors from the model, the loss or a trick
        problem = _output_problem(seen[0], ctx.num_outputs, ctx.task.name) if seen else None
        if problem:
            raise PreflightError(f"{where} {problem}") from None
        if isinstance(exc, torch.OutOfMemoryError):
            hint = ("set train.micro_batch_size=auto (the batch split until it fits, the same updates), a number of "
                    "samples, or a smaller data.batch_size")
        raise PreflightError(f"{where} fails on the first training batch: {type(exc).__name__}: "
                             f"{_first_line(exc)}; {hint}") from None
    finally:
        handle.remove()
    problem = _output_problem(out, ctx.num_outputs, ctx.task.name)
    if problem:
        raise PreflightError(f"{where} {problem}")
    _check_sizes(ctx, inputs)


def _eval_size(ctx: Any) -> tuple[int, ...] | None:
    """Spatial size of what the model sees at evaluation: a held-out sample through the evaluation wrappers."""
    import torch

    from trickbag.tricks import eval_wrappers

    ds = ctx.data.val if ctx.data.val is not None and len(ctx.data.val) else ctx.data.test
    if ds is None or not len(ds):
        return None
    seen: list[tuple[int, ...]] = []

    def probe(x: torch.Tensor) -> torch.Tensor:  # notes the size it is given, answers zeros
        seen.append(tuple(x.shape[2:]))
        return torch.zeros(x.shape[0], ctx.num_outputs)

    forward: Any = probe
    for _, wrap in eval_wrappers(ctx.recipe, tuple(ctx.data.input_shape)):
        forward = wrap(forward)
    forward(ds[0][0].unsqueeze(0).float())
    return seen[0] if seen else None


def _check_sizes(ctx: Any, inputs: list[Any]) -> None:
    """Image training batches larger than the evaluation inputs: upsampled training, never FixRes (one note)."""
    if ctx.data.kind != "image" or not inputs or getattr(inputs[0], "dim", lambda: 0)() != 4:
        return
    train, test = tuple(inputs[0].shape[2:]), _eval_size(ctx)
    if test is not None and len(test) == 2 and train[0] * train[1] > test[0] * test[1]:
        ctx.notes.append(
            f"warning: the first training batch is {train[0]}x{train[1]} (after the recipe's tricks) but evaluation "
            f"inputs are {test[0]}x{test[1]}: training images are resized above the evaluation size (e.g. by "
            "tricks.multiscale.train_sizes made for larger images), the opposite of FixRes, which trains below it; "
            "set the training sizes below the evaluation size")
