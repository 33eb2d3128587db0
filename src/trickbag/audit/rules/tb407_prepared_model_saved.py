"""TB407 prepared-model-saved: The state_dict of a model Accelerate wrapped is saved as it is.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from trickbag.audit import _roles as R
from trickbag.audit._ast import call_name, dotted, walk
from trickbag.audit._flow import FileModel, FunctionModel
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []

_ACCELERATOR = re.compile(r"accelerator", re.IGNORECASE)
_SAVES = {"save", "save_file"}  # torch.save / accelerator.save / safetensors' save_file
_NOT_MODELS = (R.OPTIMIZER, R.SCHEDULER, R.SCALER)


def _prepare_call(value: ast.AST | None) -> ast.Call | None:
    """``accelerator.prepare(...)`` / ``self.accelerator.prepare_model(...)``, else None."""
    if isinstance(value, ast.Call) and call_name(value) in ("prepare", "prepare_model") \
            and isinstance(value.func, ast.Attribute) and _ACCELERATOR.search(dotted(value.func.value) or ""):
        return value
    return None


def _wrapped_names(nodes: list[ast.AST]) -> dict[str, int]:
    """name -> line, for the names bound to a module Accelerate's ``prepare`` returned: a target of the call
    (``model, opt = accelerator.prepare(model, opt)``) or an item of a name holding its result
    (``objs = accelerator.prepare(vae, loader)``; ``vae = objs[0]``); the last binding of each name decides (a
    later ``model = accelerator.unwrap_model(model)`` unbinds it)."""
    holders: dict[str, ast.Call] = {}
    out: dict[str, int] = {}
    for node in sorted((n for n in nodes if isinstance(n, ast.Assign)), key=lambda n: n.lineno):
        call = _prepare_call(node.value)
        for target in node.targets:
            bound: list[tuple[str | None, ast.AST | None]] = []
            if call is not None and isinstance(target, (ast.Tuple, ast.List)):
                bound = [(dotted(t), call.args[i] if i < len(call.args) else None) for i, t in enumerate(target.elts)]
            elif call is not None and len(call.args) == 1:
                bound = [(dotted(target), call.args[0])]
            elif call is not None:
                holders[dotted(target) or ""] = call
                continue
            elif isinstance(node.value, ast.Subscript) and dotted(node.value.value) in holders \
                    and isinstance(node.value.slice, ast.Constant) and isinstance(node.value.slice.value, int):
                args = holders[dotted(node.value.value) or ""].args
                index = node.value.slice.value
                bound = [(dotted(target), args[index] if 0 <= index < len(args) else None)]
            else:
                for t in walk(target):
                    out.pop(dotted(t) or "", None)
                continue
            for name, arg in bound:
                if name and arg is not None and not isinstance(arg, ast.Starred) \
                        and R.role_by_name(dotted(arg)) not in _NOT_MODELS and "loader" not in (dotted(arg) or ""):
                    out[name] = node.lineno
                elif name:
                    out.pop(name, None)
    return out


def _saved_state_dicts(fm: FunctionModel) -> Iterator[ast.Call]:
    """The ``X.state_dict()`` calls ``fm`` saves: inside a save call, or in a value assigned to a name it saves."""
    saves = [n for n in fm.nodes if isinstance(n, ast.Call) and call_name(n) in _SAVES]
    saved_names = {dotted(a) for s in saves for a in [*s.args, *(k.value for k in s.keywords)]} - {None}
    roots: list[ast.AST] = [*saves, *(n.value for n in fm.nodes if isinstance(n, ast.Assign)
                                      and any(dotted(t) in saved_names for t in n.targets))]
    seen: set[int] = set()
    for root in roots:
        for n in walk(root):
            if isinstance(n, ast.Call) and call_name(n) == "state_dict" and isinstance(n.func, ast.Attribute) \
                    and not n.args and id(n) not in seen:
                seen.add(id(n))
                yield n


@rule("TB407", "prepared-model-saved", fix="save accelerator.unwrap_model(model).state_dict() (or "
      "accelerator.get_state_dict(model), or accelerator.save_model(model, folder))")
def prepared_model_saved(file: FileModel) -> Iterator[Hit]:
    """The state_dict of a model Accelerate wrapped is saved as it is.

    ``accelerator.prepare(model)`` returns the model wrapped for the run: in ``DistributedDataParallel`` on several
    processes, in torch.compile's ``OptimizedModule`` with ``dynamo_backend``, in FSDP.  Its ``state_dict()`` then
    has the wrapper's keys (``module.encoder.weight``, ``_orig_mod.encoder.weight``; FSDP's sharded or flattened
    ones), so the checkpoint loads into nothing but the same wrapper: ``load_state_dict`` on the plain model fails
    with missing and unexpected keys, or, with ``strict=False``, silently loads nothing.  On one process the model
    is not wrapped and the same code works, which is why the mistake survives until the first multi-GPU run.
    Accelerate's documentation says to unwrap first (``accelerator.unwrap_model``, or
    ``accelerator.get_state_dict`` for FSDP / DeepSpeed).

    Reported at ``X.state_dict()`` inside a save call (``torch.save``, ``accelerator.save``, safetensors'
    ``save_file``; directly or through a name it saves) when ``X`` is bound, earlier in the same function, to
    what an ``accelerator``'s ``prepare`` returned for a module (a target of the call, or an item of a name
    holding its result), or, for ``self.X``, in any method of the class; not when a later assignment rebinds
    ``X`` (``model = accelerator.unwrap_model(model)``).  Optimizers, schedulers and loaders prepared with it are
    not models and are left alone (their ``state_dict()`` is the inner one).

    Wrong::

        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        ...
        torch.save({"model": model.state_dict(), "step": step}, "ckpt.pt")

    Right::

        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        ...
        torch.save({"model": accelerator.unwrap_model(model).state_dict(), "step": step}, "ckpt.pt")
    """
    if not any(_prepare_call(n) for n in file.nodes):
        return
    by_class: dict[str, dict[str, int]] = {}
    for fm in file.functions:
        if fm.cls is not None:
            table = by_class.setdefault(fm.cls.name, {})
            table.update({k: v for k, v in _wrapped_names(fm.nodes).items() if k.startswith("self.")})
    for fm in file.functions:
        local = _wrapped_names(fm.nodes)
        own = by_class.get(fm.cls.name, {}) if fm.cls is not None else {}
        rebound = {d for n in fm.nodes if isinstance(n, ast.Assign) for t in n.targets for d in [dotted(t)] if d}
        for call in _saved_state_dicts(fm):
            assert isinstance(call.func, ast.Attribute)
            name = dotted(call.func.value) or ""
            line = local.get(name)
            if line is not None and line < call.lineno or line is None and name in own and name not in rebound:
                yield Hit(call, f"{name}.state_dict() of the model accelerator.prepare() returned: wrapped for the "
                                "run (DDP, compile, FSDP), its keys carry the wrapper's prefix ('module.', "
                                "'_orig_mod.') and the checkpoint will not load into the plain model; save "
                                f"accelerator.unwrap_model({name}).state_dict()")
