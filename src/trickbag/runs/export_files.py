"""The files of an export folder beside the model (``preprocess.json``, ``README.md``), and turning raw inputs
into the exported graph's input (:func:`prepare_inputs`); :mod:`trickbag.runs.export` reads a folder back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from trickbag.errors import TrickbagError

__all__ = ["preprocess_json", "usage_note", "prepare_inputs"]

_OUTPUT = {
    "classification": "probabilities of the classes, in the order of 'classes' (softmax)",
    "multilabel": "probability of each label, in the order of 'classes' (sigmoid; 0.5 is the usual threshold)",
    "regression": "the predicted values of the targets named in 'classes', in their own units",
}
_RAW = {
    "classification": "logits: softmax over dim 1 gives the class probabilities",
    "multilabel": "logits: sigmoid gives each label's probability",
    "regression": "standardised values: multiply by 'target_std' and add 'target_mean' for the targets' units",
}


def _image_input(state: dict[str, Any]) -> dict[str, Any]:
    if "image" in state:
        im = state["image"]
        steps = [f"convert to {im['mode']}", f"resize the shorter side to {im['resize']} pixels (bilinear, "
                 "antialiased: torchvision.transforms.v2.Resize)", f"center crop {im['crop']}x{im['crop']}",
                 "to float32 in [0, 1] (divide by 255)", "subtract 'mean' and divide by 'std', per channel"]
        return {"shape": ["batch", len(im["mean"]), im["crop"], im["crop"]], "layout": "NCHW", "steps": steps,
                **{k: im[k] for k in ("mode", "resize", "crop", "mean", "std")}}
    if state.get("source") == "digits":
        norm = state["normalise"]
        steps = ["convert to greyscale (L), bright ink on a dark background", "resize to 8x8 (PIL bilinear)",
                 "to float32 in [0, 1] (divide by 255)", "subtract 'mean' and divide by 'std'"]
        mean, std = torch.tensor(norm["mean"]).flatten().tolist(), torch.tensor(norm["std"]).flatten().tolist()
        return {"shape": ["batch", 1, 8, 8], "layout": "NCHW", "steps": steps, "mean": mean, "std": std}
    return {"shape": ["batch", *state["input_shape"]], "steps": ["the tensors the run's own data source made"]}


def _table_input(state: dict[str, Any], raw: bool) -> dict[str, Any]:
    t = state["table"]
    columns = [{k: c[k] for k in ("name", "column", "type", "part", "categories") if c.get(k) is not None}
               for c in t["columns"]]
    steps = ["one float32 value per entry of 'columns', in that order, read from the CSV column 'column'",
             "type number: the number; a date part: days since 1970-01-01 (with the time of day as a fraction), "
             "month 1-12, weekday 0-6 (Monday 0) or day of the year 1-366",
             "type category: the index of the cell in 'categories'",
             "NaN for an empty cell (or NA, N/A, nan, null, none, ?, -) and for a category not in the list"]
    if raw:
        return {"shape": ["batch", len(columns)], "columns": columns, "steps": steps}
    steps += ["then the encoding of 'encoding' (trickbag.data.sources.table_state.TableEncoder): per column, a "
              "number filled with 'fill' where missing, followed by a 0/1 missing indicator when 'missing_flag', or "
              "one 0/1 indicator per bin of 'bins' (edges; numpy.digitize(v, bins[1:-1]), the last for missing); a "
              "category one 0/1 indicator per category plus one for missing/unseen; then (x - mean) / std",
              "shape [batch, 1, features]"]
    return {"shape": ["batch", 1, len(t["mean"])], "columns": columns, "steps": steps,
            "encoding": {"columns": t["columns"], "mean": t["mean"], "std": t["std"]}}


def preprocess_json(fmt: str, file: str, recipe: Any, data: Any, module: Any, network: Any,
                    plain: bool) -> dict[str, Any]:
    """What a caller must do to an input of the exported model, and what comes out (``preprocess.json``)."""
    from trickbag import __version__
    from trickbag.train.parts import make_task, resolve_model_name, task_outputs
    from trickbag.tricks import eval_wrappers

    state = dict(data.fitted or {})
    task = state.get("task", recipe.task.type)
    weights_only = fmt == "safetensors"
    inp = _table_input(state, raw=not weights_only) if "table" in state else _image_input(state)
    tricks = [] if plain else [phrase for phrase, _ in eval_wrappers(recipe, data.input_shape)]
    included = ([] if weights_only else (["the table encoding"] if "table" in state else [])
                + tricks + [_OUTPUT[task].split("(")[-1].rstrip(")") if task != "regression" else "target units"])
    info: dict[str, Any] = {
        "format": fmt, "model_file": file, "task": task, "classes": list(data.classes),
        "input": {"name": "input", "dtype": "float32", **inp},
        "output": {"name": "output", "shape": ["batch", len(data.classes)],
                   "meaning": _RAW[task] if weights_only else _OUTPUT[task]},
        "included_in_model": included, "evaluation_tricks": tricks, "plain": plain,
        "target_mean": data.target_mean, "target_std": data.target_std,
        "architecture": {"model": resolve_model_name(recipe, data), "kwargs": dict(recipe.model.kwargs),
                         "input_shape": list(data.input_shape), "num_outputs": task_outputs(make_task(recipe, data))},
        "trickbag_version": __version__, "fitted": state,
    }
    if weights_only:
        a = info["architecture"]
        info["architecture"]["rebuild"] = (
            f"from trickbag.models import build_model; model = build_model({a['model']!r}, "
            f"{tuple(a['input_shape'])!r}, {a['num_outputs']}, **{a['kwargs']!r}); "
            "model.load_state_dict(safetensors.torch.load_file('model.safetensors'))")
        if tricks:
            info["output"]["note"] = ("the run evaluated with " + "; ".join(tricks) + ": apply them yourself, or use "
                                      "trickbag.load(folder), for the same numbers as trickbag predict")
    return info


_LOADERS = {
    "torchscript": "import torch\nmodel = torch.jit.load('{f}')\nout = model(x)",
    "exported": "import torch\nmodel = torch.export.load('{f}').module()\nout = model(x)",
    "onnx": "import onnxruntime\nsession = onnxruntime.InferenceSession('{f}')\nout = session.run(None, "
            "{{'input': x.numpy()}})[0]",
    "safetensors": "import torch, safetensors.torch\n# the architecture is not in the file: rebuild it (see "
                   "preprocess.json 'architecture')\n{rebuild}\nmodel.eval()\nout = model(x)",
}


def usage_note(info: dict[str, Any]) -> str:
    """The export folder's README.md: what the files are, how to load and call the model."""
    loader = _LOADERS[info["format"]].format(f=info["model_file"],
                                             rebuild=info["architecture"].get("rebuild", "").replace("; ", "\n"))
    inp = info["input"]
    steps = "\n".join(f"{i}. {s}" for i, s in enumerate(inp["steps"], 1))
    inside = ", ".join(info["included_in_model"]) or "nothing but the network's weights"
    return f"""# Exported trickbag model ({info['format']})

Files: `{info['model_file']}` (the model), `preprocess.json` (input preparation, classes, output), `recipe.yaml`
(the run's recipe). Task: {info['task']}; classes/outputs: {', '.join(map(str, info['classes'][:20]))}.

## Input `x`: float32, shape {inp['shape']}
{steps}

## Load and call (trickbag not needed)
```python
{loader}
```
Inside the model file: {inside}.
Output, shape {info['output']['shape']}: {info['output']['meaning']}. {info['output'].get('note', '')}

## With trickbag installed
```python
import trickbag
model, predict = trickbag.load("path/to/this/folder")
probabilities = predict(["image.jpg"])   # or a CSV path / a list of row dicts for a table model
```
"""


def prepare_inputs(state: dict[str, Any], inputs: Any) -> torch.Tensor:
    """Raw inputs -> the exported graph's input: a tensor as it is; table rows (a CSV path, paths, or dicts
    ``{column: cell}``) as raw values ``[N, R]``; images (paths, folders, PIL images) prepared ``[N, C, H, W]``."""
    from trickbag.data.sources.fitted import restore
    from trickbag.runs.inference import expand_inputs, read_image

    if isinstance(inputs, torch.Tensor):
        return inputs
    items = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    if "table" in state:
        return _table_rows(state, items)
    data = restore(state)
    if data.predict_transform is None:
        raise TrickbagError("this model's data source takes no files or images: pass a prepared tensor")
    images = []
    for item in items:
        if isinstance(item, (str, Path)):
            images += [read_image(p) for p in expand_inputs([str(item)])]
        else:
            images.append(item)
    return torch.stack([data.predict_transform(im) for im in images])


def _table_rows(state: dict[str, Any], items: list[Any]) -> torch.Tensor:
    from trickbag.data.sources.table import read_csv
    from trickbag.data.sources.table_state import read_cells

    columns = state["table"]["columns"]
    parts = []
    for item in items:
        if isinstance(item, dict):
            header = list(item)
            parts.append(read_cells(columns, header, [[str(item[h]) for h in header]], "a row"))
        else:
            header, rows = read_csv(item, repr(str(item)))
            parts.append(read_cells(columns, header, rows, str(item)))
    return torch.cat(parts)
