"""What the code says about intent: frozen models, models whose mode changes nothing, and comments that say a
departure from the textbook loop is on purpose.

These facts never make a finding certain; they make one uncertain (shown with ``--all``, with the reason) or,
where the mistake cannot happen (a model without dropout or BatchNorm has no train/eval difference), remove it.
"""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
from types import SimpleNamespace

from trickbag.audit._ast import Imports, call_name, const_value, dotted, walk
from trickbag.audit._flow import FileModel
from trickbag.audit._project import MOVES as _MOVES
from trickbag.audit._project import imported_definition_at, module_definition_at, parsed_module
from trickbag.audit._query import short_name

__all__ = ["frozen_models", "mode_free", "injected_class", "stated_intent", "INTENT_WORDS"]

#: layers whose forward is the same in train and eval mode (torch.nn names)
_MODE_FREE_LAYERS = {
    "Linear", "Bilinear", "Identity", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
    "ConvTranspose3d", "Embedding", "EmbeddingBag", "LayerNorm", "GroupNorm", "RMSNorm", "ReLU", "ReLU6", "LeakyReLU",
    "PReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish", "Tanh", "Sigmoid", "Softplus", "Softmax", "LogSoftmax",
    "Flatten", "Unflatten", "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d",
    "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveMaxPool2d", "Upsample", "PixelShuffle", "Hardtanh",
    "Hardswish", "Hardsigmoid", "Softsign", "Tanhshrink", "Parameter", "ParameterList", "ParameterDict"}
_CONTAINERS = {"Sequential", "ModuleList", "ModuleDict", "dict"}
_NOT_MODULES = ("torch.optim", "optim.", "torch.distributions", "torch.cuda.amp", "torch.amp", "Normal", "Categorical")

#: the comment forms that demote a finding to ``--all`` (documented in docs/lint.md)
INTENT_WORDS = re.compile(
    r"\b(on purpose|intentional(ly)?|deliberate(ly)?|by design|frozen|freez(e|ing)|linear[- ]prob(e|ing)|"
    r"linear classification|trickbag: intended)\b", re.IGNORECASE)
_WINDOW = 10  # lines above a finding searched for such a comment


def _chain_base(node: ast.AST) -> str | None:
    """``sampler`` for ``sampler.eval().requires_grad_(False)``: the name at the bottom of a method chain."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        node = node.func.value
    return dotted(node)


def _find_frozen(file: FileModel) -> set[str]:
    out: set[str] = set()
    for n in file.nodes:
        if isinstance(n, ast.Call) and call_name(n) == "requires_grad_" and n.args \
                and const_value(n.args[0]) is False and isinstance(n.func, ast.Attribute):
            if base := _chain_base(n.func.value):
                out.add(short_name(base))
        elif isinstance(n, ast.For) and isinstance(n.iter, ast.Call) \
                and call_name(n.iter) in ("parameters", "named_parameters") and isinstance(n.iter.func, ast.Attribute):
            if _sets_requires_grad_false(n) and (base := _chain_base(n.iter.func.value)):
                out.add(short_name(base))
    return out


def _sets_requires_grad_false(loop: ast.For) -> bool:
    for n in walk(loop):
        if isinstance(n, ast.Assign) and const_value(n.value) is False and any(
                isinstance(t, ast.Attribute) and t.attr == "requires_grad" for t in n.targets):
            return True
        if isinstance(n, ast.Call) and call_name(n) == "requires_grad_" and n.args and const_value(n.args[0]) is False:
            return True
    return False


def frozen_models(file: FileModel) -> set[str]:
    """Short names of the models frozen in this file: ``m.requires_grad_(False)`` (also inside a method chain,
    ``m.eval().requires_grad_(False)``) or a loop over ``m.parameters()`` / ``m.named_parameters()`` that sets
    ``requires_grad = False`` (possibly on part of them: linear probing)."""
    return file.memo("intent_frozen", lambda: _find_frozen(file))


def _layer_name(call: ast.AST) -> str:
    return (dotted(call.func) or "").split(".")[-1] if isinstance(call, ast.Call) else ""


def _init_assigns(cls: ast.ClassDef) -> dict[str, list[ast.AST]]:
    """``self.X = value`` assignments of a class's methods: X -> the values."""
    out: dict[str, list[ast.AST]] = {}
    for n in walk(cls):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                    out.setdefault(t.attr, []).append(n.value)
    return out


def _value_mode_free(file, value: ast.AST, depth: int) -> bool:
    """``value`` (a layer, a container of layers, an instance of a class of the project) behaves the same in train and
    eval mode.  ``file`` is the FileModel (or :func:`_module_view`) the value is written in."""
    if isinstance(value, ast.Lambda):
        return True  # ``self.mlpf = lambda x: m.c_proj(m.act(m.c_fc(x)))``: runs modules the class holds (checked)
    if isinstance(value, (ast.ListComp, ast.GeneratorExp)):
        return _value_mode_free(file, value.elt, depth)  # ``nn.ModuleList([Block(c) for _ in range(n)])``
    if isinstance(value, ast.Dict):
        return all(v is not None and _value_mode_free(file, v, depth) for v in value.values)
    if isinstance(value, ast.Subscript) and isinstance(value.value, (ast.List, ast.Tuple)) and value.value.elts:
        return all(_value_mode_free(file, e, depth) for e in value.value.elts)  # ``[nn.ReLU(), nn.Tanh()][i]``
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _MOVES:
        return _value_mode_free(file, value.func.value, depth)  # ``Model(...).cuda()``
    name = _layer_name(value)
    if name in _WRAPPERS and isinstance(value, ast.Call) and value.args:
        return _value_mode_free(file, value.args[0], depth)  # ``DataParallel(Model(...))``
    if name in _MODE_FREE_LAYERS:
        return True
    if isinstance(value, ast.Call) and file.classes.get(name) is None \
            and file.imports.qualname(value.func).startswith("torch_geometric."):
        return _pyg_mode_free(file, value, name, depth)
    if name in _RECURRENT and isinstance(value, ast.Call):  # dropout between layers only when asked for
        return all(k.arg != "dropout" or const_value(k.value) in (0, 0.0) for k in value.keywords) \
            and len(value.args) < 5
    if name in _CONTAINERS and isinstance(value, ast.Call):
        items = [a for a in value.args if not isinstance(a, ast.Starred)]
        elts = [e for a in items for e in (a.elts if isinstance(a, (ast.List, ast.Tuple)) else [a])]
        elts += [k.value for k in value.keywords if k.arg is not None]  # ``nn.ModuleDict(dict(wte=...))``
        return len(items) == len(value.args) and bool(elts) and all(_value_mode_free(file, e, depth) for e in elts)
    cls = file.classes.get(name)
    if cls is not None:
        return _class_mode_free(file, cls, depth + 1)
    found = _project_class(file, value)
    return found is not None and _class_mode_free(found[0], found[1], depth + 1)


#: ``nn.Module``'s own methods a class calls on ``self`` (no submodule of its own behind them)
_MODULE_METHODS = {"register_buffer", "register_parameter", "parameters", "named_parameters", "buffers",
                   "named_buffers", "modules", "named_modules", "children", "named_children", "apply", "to", "cuda",
                   "cpu", "type", "float", "half", "double", "state_dict", "load_state_dict", "zero_grad",
                   "requires_grad_", "get_parameter", "get_buffer", "extra_repr"}
_WRAPPERS = {"DataParallel", "DistributedDataParallel"}
_RECURRENT = {"GRU", "LSTM", "RNN", "GRUCell", "LSTMCell", "RNNCell"}


def _project_class(file, value: ast.AST):
    """(module view, class) of ``Name(...)`` when ``Name`` is imported from a module of the same project
    (``from model import RecurrentAttention``)."""
    if not isinstance(value, ast.Call) or not file.path:
        return None
    func = value.func
    if isinstance(func, ast.Name):
        at = imported_definition_at(file.tree, file.path, func.id)
    elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in file.imports.alias:
        at = module_definition_at(file.path, file.imports.alias[func.value.id], func.attr)  # ``modules.Glimpse(...)``
    else:
        return None
    if at is None or not isinstance(at[1], ast.ClassDef):
        return None
    return _module_view(at[0]), at[1]


@functools.lru_cache(maxsize=256)
def _module_view(path: str) -> SimpleNamespace:
    """What the mode checks read of another module of the project: its tree, path, classes and imports."""
    tree = parsed_module(path) or ast.Module(body=[], type_ignores=[])
    nodes = list(ast.walk(tree))
    return SimpleNamespace(tree=tree, path=path, imports=Imports(nodes),
                           classes={n.name: n for n in nodes if isinstance(n, ast.ClassDef)})


#: calls that can register submodules (buffers and parameters are no modules: a class holding only those is
#: mode-free)
_REGISTERS = {"add_module", "register_module", "ModuleList", "ModuleDict", "Sequential", "setattr"}


def _calls_held_items(cls: ast.ClassDef) -> bool:
    """``for layer in self.layers: x = layer(x)``: the class runs modules it holds in a container."""
    for n in walk(cls):
        if isinstance(n, ast.For) and any(isinstance(a, ast.Attribute) and isinstance(a.value, ast.Name)
                                          and a.value.id == "self" for a in walk(n.iter)):
            targets = {t.id for t in walk(n.target) if isinstance(t, ast.Name)}
            if any(isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id in targets
                   for st in n.body for c in walk(st)):
                return True
    return False


#: PyTorch Geometric layers with no dropout and no batch statistics: the same in train and eval mode
_PYG_MODE_FREE = {"GCNConv", "SAGEConv", "GraphConv", "ChebConv", "SGConv", "TAGConv", "GatedGraphConv",
                  "ResGatedGraphConv", "LEConv", "ClusterGCNConv", "GravNetConv", "FeaStConv", "GMMConv", "SplineConv",
                  "CGConv", "MFConv", "SimpleConv", "LGConv", "GCN2Conv", "HypergraphConv"}
#: ... whose only dropout is a keyword argument that defaults to 0 (attention or propagation dropout)
_PYG_DROPOUT_ZERO = {"GATConv", "GATv2Conv", "TransformerConv", "ARMAConv", "APPNP", "SuperGATConv", "FAConv"}
#: ... that run a network they are given (``GINConv(nn.Sequential(...))``): mode-free when that network is
_PYG_RUN_GIVEN = {"GINConv", "GINEConv", "NNConv", "EdgeConv", "DynamicEdgeConv", "PointNetConv"}
#: PyG's ready-made models (``BasicGNN``): dropout 0 and no norm layer unless given (the 5th positional is dropout)
_PYG_MODELS = {"GCN", "GraphSAGE", "GIN", "GAT", "PNA", "EdgeCNN"}


def _pyg_mode_free(file, call: ast.Call, name: str, depth: int) -> bool:
    """A PyTorch Geometric layer or model built by ``call`` behaves the same in train and eval mode: a layer without
    dropout, one whose dropout keyword is absent or 0, a ``GINConv``-style layer around a mode-free network, or a
    ``GCN``/``GAT``/... model built without ``dropout=``, ``norm=`` or ``**kwargs``."""
    def zero_dropout(keys: tuple[str, ...]) -> bool:
        return all(k.arg is not None and (k.arg not in keys or const_value(k.value) in (0, 0.0, None))
                   for k in call.keywords)

    if name in _PYG_MODE_FREE:
        return True
    if name in _PYG_DROPOUT_ZERO:
        return zero_dropout(("dropout",))
    if name in _PYG_MODELS:
        return len(call.args) <= 4 and zero_dropout(("dropout", "norm"))
    if name in _PYG_RUN_GIVEN:
        nets = [a for a in [*call.args[:1], *(k.value for k in call.keywords if k.arg in ("nn", "local_nn",
                                                                                          "global_nn"))]]
        return bool(nets) and all(isinstance(n, ast.Call) and _value_mode_free(file, n, depth) for n in nets)
    return False


def _class_mode_free(file, cls: ast.ClassDef, depth: int = 0) -> bool:
    """Every module a class of this file builds or calls is mode-free (no dropout, no BatchNorm), it never reads
    ``self.training``, and its base is ``nn.Module``."""
    plain = all((dotted(b) or "") == "object" for b in cls.bases)  # ``class Retina:``: no module, no mode to switch
    if depth > 4 or not plain and any((dotted(b) or "").split(".")[-1] != "Module" for b in cls.bases):
        return False
    nodes = list(walk(cls))
    if any(isinstance(n, ast.Attribute) and n.attr == "training" for n in nodes) or any(
            isinstance(n, ast.Call) and "dropout" in call_name(n).lower() for n in nodes):
        return False
    assigns = _init_assigns(cls)
    methods = {n.name for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    called = {n.func.attr for n in nodes if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
              and isinstance(n.func.value, ast.Name) and n.func.value.id == "self"} - methods - _MODULE_METHODS
    if any(not assigns.get(name) for name in called):
        return False
    values = [v for name in called for v in assigns[name]]
    values += [v for vals in assigns.values() for v in vals if isinstance(v, ast.Call) and _layer_name(v)[:1].isupper()
               and not file.imports.qualname(v.func).startswith(_NOT_MODULES)]
    if not values:  # holds no module at all (a numpy computation from given weights) unless it registers some
        return ("forward" in methods or plain) and not called and not _calls_held_items(cls) \
            and not any(isinstance(n, ast.Call) and call_name(n) in _REGISTERS for n in nodes)
    return all(_value_mode_free(file, v, depth) for v in values)


def mode_free(file: FileModel, recv: str, cls: ast.ClassDef | None = None, fm=None) -> bool:
    """The model called as ``recv`` behaves the same in train and eval mode (no dropout, no BatchNorm), as far
    as this file shows: ``self.fc1`` built as ``nn.Linear``, or an instance of a class of this file made only of
    such layers.  ``cls`` is the class of the method the call is in (for ``self.X``)."""
    parts = recv.split(".")
    if parts[0] == "self" and cls is not None:
        if len(parts) == 1:
            return _class_mode_free(file, cls)
        values = _init_assigns(cls).get(parts[1], [])
        return len(parts) == 2 and bool(values) and all(_value_mode_free(file, v, 0) for v in values)
    local = [a.value for a in fm.assigns if a.names == [recv] and a.op is None and a.value is not None] \
        if fm is not None and "." not in recv else []
    values = local or [n.value for n in file.nodes if isinstance(n, ast.Assign)
                       and any(dotted(t) == recv for t in n.targets)]
    values = [v for v in values if not _moved_self(v, recv)]  # ``model = model.cuda()``: the same model
    return bool(values) and all(_value_mode_free(file, v, 0) for v in values)


def injected_class(file: FileModel, recv: str, cls: ast.ClassDef | None = None, fm=None) -> str | None:
    """The parameter that names the model's class when the model called as ``recv`` is built by calling it
    (``def __init__(self, network): self.network = network().to(device)``; ``model = model_cls(cfg)``): the caller
    chooses the class, so its layers (dropout? BatchNorm?) cannot be seen here; None otherwise."""
    parts = recv.split(".")
    if parts[0] == "self" and cls is not None and len(parts) == 2:
        sites = [(n.value, f) for f in walk(cls) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                 for n in walk(f) if isinstance(n, ast.Assign)
                 and any(isinstance(t, ast.Attribute) and dotted(t) == recv for t in n.targets)]
    elif fm is not None and "." not in recv and isinstance(fm.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        sites = [(a.value, fm.node) for a in fm.assigns if a.names == [recv] and a.op is None and a.value is not None]
    else:
        return None
    names = set()
    for value, func in sites:
        while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _MOVES:
            value = value.func.value  # ``network().to(device)``
        if isinstance(value, ast.Call) and _layer_name(value) in _WRAPPERS and value.args:
            value = value.args[0]
        params = {a.arg for a in [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]}
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in params):
            return None
        names.add(value.func.id)
    return sorted(names)[0] if names else None


def _moved_self(value: ast.AST, recv: str) -> bool:
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _MOVES:
        value = value.func.value
    return dotted(value) == recv


def _comments(text: str) -> dict[int, str]:
    out: dict[int, str] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                out[tok.start[0]] = tok.string
            elif tok.type == tokenize.STRING and tok.start[0] != tok.end[0]:
                for k, ln in enumerate(tok.string.splitlines()):
                    out[tok.start[0] + k] = ln
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    return out


def stated_intent(file: FileModel, text: str, line: int) -> str | None:
    """The comment on ``line``, or in the block of comment (or docstring) lines right above it (one blank line
    allowed in between), that says the code is meant that way (:data:`INTENT_WORDS`), stripped; None without
    one.  ``noqa`` comments do not count."""
    comments = file.memo("intent_comments", lambda: _comments(text))
    lines = text.splitlines()
    block = [line]
    ln, blanks = line - 1, 0
    while ln >= 1 and len(block) <= _WINDOW:
        if ln in comments:
            block.append(ln)
        elif ln <= len(lines) and not lines[ln - 1].strip() and blanks == 0 and len(block) == 1:
            blanks += 1
        else:
            break
        ln -= 1
    for ln in block:
        c = comments.get(ln)
        if c and "noqa" not in c and INTENT_WORDS.search(c):
            return c.strip().lstrip("#").strip()
    return None
