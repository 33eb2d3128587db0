"""``trickbag export``: a trained run as a model file that loads without trickbag, and ``trickbag.load``.

An export folder holds the model file, ``preprocess.json`` (what a caller does to an input, what comes
out), ``README.md`` (how to load and call it) and the run's ``recipe.yaml``. Formats:

* ``torchscript`` (``model.pt``, :func:`torch.jit.load`) and ``exported`` (``model.pt2``,
  :func:`torch.export.load`): the whole prediction in one graph: a table's column encoding, the network,
  the recipe's evaluation tricks (flip TTA, the FixRes test size) and the output (softmax probabilities,
  sigmoid label probabilities, or regression values in the targets' units). Made by tracing, like
  Lightning's ``to_torchscript(method="trace")``: a model whose forward branches on its input's values
  is traced along one branch.
* ``onnx`` (``model.onnx``, onnxruntime): the same graph through :func:`torch.onnx.export` (its
  ``torch.export``-based exporter, the default since torch 2.9, which needs ``onnxscript``; the older
  TorchScript-based exporter is tried when it fails); needs ``pip install 'trickbag[export]'``.
* ``safetensors`` (``model.safetensors``): the network's weights only (timm's ``pretrained_cfg`` style):
  the architecture must be rebuilt (a built-in model with ``trickbag.models.build_model``, as
  ``preprocess.json`` says), and the encoding, evaluation tricks and output function are applied by
  the caller as ``preprocess.json`` describes (or by ``trickbag.load``).

Images enter every format prepared (resized, cropped, scaled to [0, 1], normalised: ``preprocess.json``
says how); table rows enter as raw values, one float per raw column (a category's index in its list,
NaN for a missing cell or an unseen category, a date's parts), except for ``safetensors``.
"""

from __future__ import annotations

import json
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple, cast

import torch

from trickbag.errors import TrickbagError

__all__ = ["FORMATS", "Deployed", "export_run", "load", "Loaded"]

#: format -> model file name
FORMATS = {"torchscript": "model.pt", "onnx": "model.onnx", "exported": "model.pt2", "safetensors": "model.safetensors"}


class Deployed(torch.nn.Module):
    """Prepared input -> what ``trickbag predict`` reports: [table encoder] -> network -> evaluation tricks ->
    softmax (classification) / sigmoid (multi-label) / ``value * std + mean`` (regression)."""

    target_mean: torch.Tensor  # buffers, registered in __init__
    target_std: torch.Tensor

    def __init__(self, model: torch.nn.Module, task: str, *, encoder: torch.nn.Module | None = None,
                 wrappers: list[Callable[[Any], Any]] | None = None, target_mean: list[float] | None = None,
                 target_std: list[float] | None = None) -> None:
        super().__init__()
        self.model, self.encoder, self.task = model, encoder, task
        self.wrappers = list(wrappers or [])
        n = len(target_mean or [])
        self.register_buffer("target_mean", torch.tensor(target_mean or [], dtype=torch.float32).reshape(1, n))
        self.register_buffer("target_std", torch.tensor(target_std or [], dtype=torch.float32).reshape(1, n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.encoder is not None:
            x = self.encoder(x)
        forward: Callable[[torch.Tensor], torch.Tensor] = self.model
        for wrap in self.wrappers:
            forward = wrap(forward)
        out = forward(x).float()
        if self.task == "classification":
            return torch.softmax(out, dim=1)
        if self.task == "multilabel":
            return torch.sigmoid(out)
        if self.target_mean.numel():
            return out.reshape(out.shape[0], -1) * self.target_std + self.target_mean
        return out


def _table_encoder(data: Any, state: dict[str, Any]) -> torch.nn.Module | None:
    """A table's ``prepare`` (its TableEncoder, a Module exported with the network); None for other data."""
    return cast(torch.nn.Module, data.prepare) if "table" in state else None


def _deployed(run: Path, *, plain: bool, trust_code: bool, tricks: list[str] | None = None) -> tuple[Any, ...]:
    """(Deployed module, recipe, data, network) of a run's best.pt (or a checkpoint file)."""
    from trickbag.runs.inference import checkpoint_of
    from trickbag.train.parts import model_from_checkpoint
    from trickbag.tricks import eval_wrappers

    recipe, model, _, data = model_from_checkpoint(checkpoint_of(run), trust_code=trust_code)
    wrappers = [] if plain else eval_wrappers(recipe, data.input_shape)
    if tricks is not None:
        tricks += [phrase for phrase, _ in wrappers]
    state = data.fitted or {}
    return Deployed(model, recipe.task.type, encoder=_table_encoder(data, state),
                    wrappers=[w for _, w in wrappers], target_mean=data.target_mean,
                    target_std=data.target_std).eval(), recipe, data, model


def _example(state: dict[str, Any]) -> torch.Tensor:
    """A batch of two inputs of the exported graph's input shape."""
    if "table" in state:
        return torch.zeros(2, len(state["table"]["columns"]))
    if "image" in state:
        im = state["image"]
        return torch.zeros(2, len(im["mean"]), im["crop"], im["crop"])
    return torch.zeros(2, *state["input_shape"])


def _write_model(module: Deployed, network: torch.nn.Module, fmt: str, path: Path, example: torch.Tensor) -> None:
    if fmt == "safetensors":
        from trickbag._optional import require

        save_file = require("safetensors.torch", extra="export", feature="export --format safetensors").save_file
        save_file({k: v.detach().contiguous() for k, v in network.state_dict().items()}, str(path))
        return
    with warnings.catch_warnings():  # torch.jit.trace's deprecation notice; tracer notes on shape arithmetic
        warnings.simplefilter("ignore")
        if fmt == "torchscript":
            torch.jit.save(torch.jit.trace(module, example, check_trace=False), str(path))
        elif fmt == "exported":
            torch.export.save(torch.export.export(module, (example,), dynamic_shapes=_batch_dim()), str(path))
        else:
            _write_onnx(module, path, example)


def _batch_dim() -> dict[str, Any]:
    return {"x": {0: torch.export.Dim("batch", min=1, max=1 << 20)}}


def _write_onnx(module: Deployed, path: Path, example: torch.Tensor) -> None:
    """``torch.onnx.export`` with the ``torch.export``-based exporter (offline: it needs ``onnxscript``, no
    download), else the TorchScript-based one; the batch dimension stays dynamic."""
    from trickbag._optional import require

    require("onnx", extra="export", feature="export --format onnx")
    input_names, output_names = ["input"], ["output"]
    try:
        require("onnxscript", extra="export", feature="export --format onnx")
        torch.onnx.export(module, (example,), str(path), dynamo=True, dynamic_shapes=_batch_dim(), verbose=False,
                          external_data=False, input_names=input_names, output_names=output_names)
        return
    except TrickbagError:
        raise
    except Exception as first:  # the torch.export path cannot take this model: try the older exporter
        reason = f"{type(first).__name__}: {str(first).splitlines()[0][:160]}" if str(first) else type(first).__name__
    try:
        torch.onnx.export(module, (example,), str(path), dynamo=False, dynamic_axes={"input": {0: "batch"},
                          "output": {0: "batch"}}, input_names=input_names, output_names=output_names)
    except Exception as exc:
        raise TrickbagError(f"export --format onnx failed: {reason}; the TorchScript-based exporter also failed: "
                            f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}; try --format exported or "
                            "torchscript") from None


def export_run(run: Path, fmt: str, out: Path | None = None, *, plain: bool = False, trust_code: bool = False,
               tricks: list[str] | None = None) -> Path:
    """Write the export folder of a run (``out``, default ``RUN/export-FORMAT``); returns it.

    The folder is written to a temporary sibling and renamed into place, so a failed export leaves nothing.
    """
    from trickbag.runs.export_files import preprocess_json, usage_note

    if fmt not in FORMATS:
        raise TrickbagError(f"--format {fmt!r} is not an export format; allowed: {', '.join(FORMATS)}")
    run = Path(run)
    module, recipe, data, network = _deployed(run, plain=plain, trust_code=trust_code, tricks=tricks)
    out = Path(out) if out is not None else (run if run.is_dir() else run.parent.parent) / f"export-{fmt}"
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise TrickbagError(f"--out {str(out)!r} exists and is not empty; remove it or name another folder")
    tmp = out.with_name(f".{out.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        example = _example(data.fitted or {})
        _write_model(module, network, fmt, tmp / FORMATS[fmt], example)
        info = preprocess_json(fmt, FORMATS[fmt], recipe, data, module, network, plain)
        (tmp / "preprocess.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
        (tmp / "README.md").write_text(usage_note(info), encoding="utf-8")
        from trickbag.recipe import recipe_to_yaml

        (tmp / "recipe.yaml").write_text(recipe_to_yaml(recipe), encoding="utf-8")
        if out.exists():
            out.rmdir()
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


class Loaded(NamedTuple):
    """What :func:`load` returns: ``model`` (an ``nn.Module`` in eval mode) and ``predict(inputs)``."""

    model: torch.nn.Module
    predict: Callable[[Any], torch.Tensor]


def load(path: str | Path, *, trust_code: bool = False) -> Loaded:
    """A run folder, checkpoint or export folder -> (model in eval mode, ``predict``).

    ``predict(inputs)`` applies the stored preprocessing and returns what ``trickbag predict`` reports, one
    row per input: class probabilities ``[N, K]``, label probabilities or regression values. ``inputs``:
    image paths, folders or PIL images (image runs); a CSV path or a list of row dicts ``{column: cell}``
    (table runs); or a tensor already prepared as ``preprocess.json`` describes. ``model`` is the trained
    network for a run or a ``safetensors`` export, the whole exported graph for the other formats.
    """
    path = Path(path).expanduser()
    if (path / "preprocess.json").is_file():
        return load_export(path)
    module, _, data, network = _deployed(path, plain=False, trust_code=trust_code)
    return Loaded(network.eval(), _predictor(module, data.fitted or {}))


def _predictor(module: Callable[[torch.Tensor], torch.Tensor], state: dict[str, Any]) -> Callable[[Any], Any]:
    from trickbag.runs.export_files import prepare_inputs

    def predict(inputs: Any) -> torch.Tensor:
        with torch.inference_mode():
            return module(prepare_inputs(state, inputs))

    return predict


def load_export(folder: Path) -> Any:
    """(model, predict) of an export folder (see :func:`load`)."""
    info = json.loads((folder / "preprocess.json").read_text(encoding="utf-8"))
    path, fmt, state = folder / info["model_file"], info["format"], info["fitted"]
    if fmt == "torchscript":
        with warnings.catch_warnings():  # torch.jit.load's deprecation notice: the format still loads
            warnings.simplefilter("ignore", FutureWarning)
            model = torch.jit.load(str(path)).eval()
    elif fmt == "exported":
        model = torch.export.load(str(path)).module()
    elif fmt == "onnx":
        model = _OnnxModule(path)
    else:
        return _load_weights(folder, info)
    return Loaded(model, _predictor(model, state))


def _load_weights(folder: Path, info: dict[str, Any]) -> Any:
    """A safetensors export: the built-in architecture rebuilt, the weights loaded, the recipe's evaluation."""
    from trickbag._optional import require
    from trickbag.data.sources.fitted import restore
    from trickbag.models import build_model
    from trickbag.recipe import load_recipe
    from trickbag.tricks import eval_wrappers

    load_file = require("safetensors.torch", extra="export", feature="loading a safetensors export").load_file
    a, state = info["architecture"], info["fitted"]
    if ":" in a["model"]:
        raise TrickbagError(f"{str(folder)!r} holds weights of your own model {a['model']!r}: build it yourself and "
                            "load model.safetensors into it")
    network = build_model(a["model"], tuple(a["input_shape"]), a["num_outputs"], **a["kwargs"])
    network.load_state_dict(load_file(str(folder / info["model_file"])))
    recipe = load_recipe(str(folder / "recipe.yaml"))
    data = restore(state)
    wrappers = [] if info.get("plain") else [w for _, w in eval_wrappers(recipe, data.input_shape)]
    module = Deployed(network, info["task"], encoder=_table_encoder(data, state), wrappers=wrappers,
                      target_mean=data.target_mean, target_std=data.target_std).eval()
    return Loaded(network.eval(), _predictor(module, state))


class _OnnxModule(torch.nn.Module):
    """An ONNX file run by onnxruntime, called like a module (CPU)."""

    def __init__(self, path: Path) -> None:
        from trickbag._optional import require

        super().__init__()
        ort = require("onnxruntime", extra="export", feature="loading an ONNX export")
        self.session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        name = self.session.get_inputs()[0].name
        return torch.from_numpy(self.session.run(None, {name: x.detach().cpu().float().numpy()})[0])
