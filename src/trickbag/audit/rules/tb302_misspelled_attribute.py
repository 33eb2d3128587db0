"""TB302 misspelled-attribute: An assignment to a misspelled torch attribute silently creates a new attribute.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trickbag.audit import _roles as R
from trickbag.audit._ast import call_name, child_nodes, dotted, edit_distance
from trickbag.audit._flow import FileModel, FunctionModel
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []



_TYPO_TARGETS = {"requires_grad": {"requires_gradient", "require_gradient", "requires_grad_"},
                 "training": set()}
_CUDNN = {"benchmark", "deterministic", "enabled", "allow_tf32", "benchmark_limit"}
_MODULE_ITERS = {"modules", "children", "named_modules", "named_children"}


def _module_loop_var(fm: FunctionModel, name: str, loops: tuple = ()) -> bool:
    """``name`` is the loop variable of a loop over ``.modules()`` / ``.children()``: the loop around the
    assignment that binds it when there is one (``for k, v in model.named_parameters()`` holds parameters,
    whatever another loop of the function binds to ``v``), else any such loop of the function."""
    for lp in reversed(loops):
        if name in lp.targets:
            it = lp.iter
            return isinstance(it, ast.Call) and call_name(it) in _MODULE_ITERS
    for a in fm.assigns:
        if isinstance(a.node, (ast.For, ast.AsyncFor)) and a.names and a.names[-1] == name:
            it = a.node.iter
            if isinstance(it, ast.Call) and call_name(it) in _MODULE_ITERS:
                return True
    return False


_REAL_ATTRS = {"require_backward_grad_sync", "require_forward_param_sync", "requires_grad"}


def _read_back(file: FileModel, attr: str) -> bool:
    """The file reads ``x.<attr>`` somewhere: an attribute of its own (``ctx.req_grad`` set in an
    ``autograd.Function``'s forward, tested in its backward), not a misspelt torch flag."""
    reads = file.memo("tb302_reads", lambda: {n.attr for n in file.nodes
                                              if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load)})
    return attr in reads


_TENSOR_MAKERS = {"Parameter", "tensor", "Tensor", "zeros", "ones", "randn", "rand", "empty", "full", "arange"}


def _last_made_tensor(fm: FunctionModel, base: str, line: int) -> bool:
    """The latest assignment to ``base`` before ``line`` in this function makes a tensor or an ``nn.Parameter``
    (``self.skip_k = nn.Parameter(...)`` in this branch, a layer in another): ``requires_grad`` is real there."""
    made = [n for n in fm.nodes if isinstance(n, ast.Assign) and n.lineno < line
            and any(dotted(t) == base for t in n.targets)]
    if not made:
        return False
    last = max(made, key=lambda n: n.lineno)
    return isinstance(last.value, ast.Call) and call_name(last.value) in _TENSOR_MAKERS


def _typo_message(fm: FunctionModel, base: str, attr: str, loops: tuple = (), line: int = 0) -> str | None:
    if attr not in ("requires_grad_", "requires_grad", "training") and attr not in _REAL_ATTRS \
            and _read_back(fm.file, attr):
        return None
    if attr == "requires_grad_" or (attr not in _REAL_ATTRS and not attr.startswith("_") and (
            attr in _TYPO_TARGETS["requires_grad"] or edit_distance(attr, "requires_grad") <= 2
            or (attr.startswith("req") and "grad" in attr and len(attr) <= len("requires_gradient")))):
        return f"'.{attr}' is not 'requires_grad': the assignment creates a new attribute and freezes nothing"
    if attr == "requires_grad" and (fm.role(base) == R.MODEL or _module_loop_var(fm, base, loops)) \
            and not _last_made_tensor(fm, base, line):
        return (f"an nn.Module has no 'requires_grad': '{base}.requires_grad = ...' freezes nothing "
                f"(use {base}.requires_grad_(False))")
    if fm.file.imports.resolve(base).split(".")[-1] == "cudnn" and attr not in _CUDNN:
        near = next((c for c in _CUDNN if edit_distance(attr, c) <= 2), None)
        if near:
            return f"'cudnn.{attr}' is not a cuDNN flag (did you mean 'cudnn.{near}'?): nothing is set"
    if attr != "training" and edit_distance(attr, "training") <= 2 and len(attr) > 6 and fm.role(base) == R.MODEL:
        return f"'.{attr}' is not 'training': use {base}.train() / {base}.eval()"
    return None


@rule(
    "TB302",
    "misspelled-attribute",
    fix="spell the attribute exactly (p.requires_grad = False / model.requires_grad_(False))",
)
def misspelled_attribute(file: FileModel) -> Iterator[Hit]:
    """An assignment to a misspelled torch attribute silently creates a new attribute.

    Python objects accept any attribute: ``p.required_grad = False`` (or ``requires_gard``,
    ``require_grad``) stores a new, unused attribute and the parameter keeps training;
    ``model.requires_grad = False`` does the same on a module (modules have ``requires_grad_()``);
    ``torch.backends.cudnn.benchmarks = True`` sets nothing.  ``setattr(p, "requires_grads", False)`` with a
    constant name is the same assignment.  An attribute the file reads back (``ctx.req_grad`` set in an
    ``autograd.Function``'s forward and tested in its backward) is the program's own, not a misspelling, and so is
    a private one (``feature_extractor._requires_grad = False``: the Hugging Face encoder's own flag).

    Wrong::

        for p in model.backbone.parameters():
            p.required_grad = False

    Right::

        for p in model.backbone.parameters():
            p.requires_grad = False
    """
    for fm in file.functions:
        for a in fm.assigns:
            if not isinstance(a.node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                continue
            for name in a.names:
                base, _, attr = name.rpartition(".")
                msg = _typo_message(fm, base, attr, a.loops, getattr(a.node, "lineno", 0)) if base else None
                if msg:
                    yield Hit(a.node, msg)
        for call, base, attr in _setattr_calls(fm):
            msg = _typo_message(fm, base, attr)
            if msg:
                yield Hit(call, msg)


def _setattr_calls(fm: FunctionModel) -> Iterator[tuple[ast.Call, str, str]]:
    """``setattr(p, "requires_grads", False)`` with a constant name, in ``fm`` (lambdas included)."""
    if not fm.file.memo("has_setattr", lambda: any(isinstance(n, ast.Name) and n.id == "setattr"
                                                   for n in fm.file.nodes)):
        return
    todo: list[ast.AST] = list(fm.body())
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "setattr" \
                and len(n.args) == 3 and isinstance(n.args[1], ast.Constant) and isinstance(n.args[1].value, str):
            base = dotted(n.args[0])
            if base:
                yield n, base, n.args[1].value
        todo.extend(c for c in child_nodes(n)
                    if not isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))
