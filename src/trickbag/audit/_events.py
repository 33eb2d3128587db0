"""Which training event a call is: ``loss.backward()`` -> BACKWARD, ``scaler.step(opt)`` -> STEP of
``opt``, ``model(x)`` -> FORWARD, ``evaluate(model)`` -> CALL of a local helper ...  Used by the flow
model's walker (:mod:`trickbag.audit._flow`) on every call of a function, in execution order."""

from __future__ import annotations

import ast
import re
from typing import Any, Protocol

from trickbag.audit import _roles as R
from trickbag.audit._ast import call_name, const_value, dotted, name_tokens, receiver
from trickbag.audit._project import imported_definition, project_class_of

__all__ = ["classify", "BACKWARD", "STEP", "ZERO", "SCHED", "SCALE", "UNSCALE", "SCALER_UPDATE", "CLIP",
           "EMA_UPDATE", "FORWARD", "EVAL", "TRAIN", "CALL", "TRAIN_CALL"]

BACKWARD, STEP, ZERO, SCHED, SCALE, UNSCALE, SCALER_UPDATE = \
    "backward", "step", "zero_grad", "sched", "scale", "unscale", "scaler_update"
CLIP, EMA_UPDATE, FORWARD, EVAL, TRAIN, CALL, TRAIN_CALL = \
    "clip", "ema", "forward", "eval", "train", "call", "train_call"

class FunctionModel(Protocol):
    """What classifying a call reads of the function it sits in: the flow model's
    :class:`trickbag.audit._flow.FunctionModel`, named here by its shape so the two modules do not import
    each other."""

    file: Any

    @property
    def nodes(self) -> list[ast.AST]: ...

    def role(self, name: str | None) -> str | None: ...


#: receivers whose ``.backward(loss)`` back-propagates its argument (apex FP16_Optimizer too)
_BACKWARD_DRIVERS = re.compile(r"accelerator|fabric|engine|^self$|trainer|manual|optim")
_CLIP_FUNCTIONS = {"clip_grad_norm_", "clip_grad_value_", "clip_grad_norm"}


def classify(fm: FunctionModel, call: ast.Call) -> list[tuple[str, str | None, dict]]:
    """The training events one call produces (usually none or one)."""
    name, recv = call_name(call), receiver(call)
    role = fm.role(recv)
    if name in ("backward", "manual_backward") and not _followed_backward(fm, call, recv):
        return [_backward(call, recv)]
    if name == "step" and recv:
        if role == R.SCALER:
            opt = dotted(call.args[0]) if call.args else None
            closure = [dotted(a) for a in call.args[1:] if dotted(a)]
            return [(STEP, opt, {"scaler": recv, "closure": closure})]
        if role in (R.OPTIMIZER, R.SCHEDULER, R.EMA):
            kind = {R.OPTIMIZER: STEP, R.SCHEDULER: SCHED, R.EMA: EMA_UPDATE}[role]
            given = [d for a in [*call.args, *(k.value for k in call.keywords)] if (d := dotted(a))]
            scaler = next((d for d in given if fm.role(d) == R.SCALER), None) if role == R.OPTIMIZER else None
            if scaler is not None:  # ``self.optimizer.step('generator', scaler=scaler)``: a wrapper that steps through
                return [(STEP, recv, {"scaler": scaler, "closure": [], "wrapper": True})]  # the scaler it is given
            return [(kind, recv, {"closure": [dotted(a) for a in call.args if dotted(a)]})]
    if name == "optimizer_step" and call.args and fm.file.resolve(call, fm) is None:
        return [(STEP, dotted(call.args[0]), {})]  # a framework's hook; a local helper is followed instead
    if name in ("eval", "train") and recv == "self" and _plain_class_method(fm, name):
        return _forward_or_call(fm, call, name, recv, role)  # ``self.eval()`` of an evaluator class: its own method
    if name in ("eval", "train") and recv and recv != "self" and (call.args or call.keywords):
        switched = _project_method_switch(fm, recv, name)
        if switched is not None:  # ``engine.eval(x, y)``: a project class's method that switches ``self.model``
            return [switched]
    simple = _simple_kind(fm, call, name, recv, role)
    if simple:
        if simple in (EVAL, TRAIN) and recv is None:
            recv = chain_receiver(call)  # ``model.to(dev).train()``
        return [(simple, recv, {})]
    return _forward_or_call(fm, call, name, recv, role)


def _project_method_switch(fm: FunctionModel, recv: str, name: str) -> tuple[str, str | None, dict] | None:
    """``engine.eval(x, y)`` / ``engine.train(x, y)`` where ``engine = trainer(...)`` is an instance of a class of
    another module of the project whose method of that name switches one of its models (``self.model.eval()``):
    that switch, on ``engine.model``.  None when ``recv`` is no such instance or the method switches nothing."""
    made = [a.value for a in getattr(fm, "assigns", []) if a.names == [recv] and a.op is None and a.value is not None]
    if not made:
        made = [n.value for n in fm.file.nodes if isinstance(n, ast.Assign)
                and any(dotted(t) == recv for t in n.targets)]
    file = fm.file
    found = project_class_of(file.tree, file.path, file.imports.alias, made[-1]) if len(made) == 1 else None
    if found is None:
        return None
    method = next((n for n in found.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                   and n.name == name), None)
    switches = sorted((n for n in ast.walk(method) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                       and n.func.attr in ("eval", "train") and not n.args and not n.keywords
                       and (dotted(n.func.value) or "").startswith("self.")), key=lambda n: (n.lineno, n.col_offset)) \
        if method is not None else []
    if not switches:
        return None
    last = switches[-1].func
    assert isinstance(last, ast.Attribute)
    attr = (dotted(last.value) or "").split(".", 1)[1]
    return (EVAL if last.attr == "eval" else TRAIN), f"{recv}.{attr}", {}


def _plain_class_method(fm: FunctionModel, name: str) -> bool:
    """The class of ``fm`` is no ``nn.Module`` and defines a method ``name`` itself (XLM's ``XNLI.eval()``)."""
    cls = getattr(fm, "cls", None)
    if cls is None or (cls.name, name) not in fm.file.methods:
        return False
    return not any((dotted(b) or "").split(".")[-1].endswith("Module") for b in cls.bases)


def _followed_backward(fm: FunctionModel, call: ast.Call, recv: str | None) -> bool:
    """A ``backward`` that is a local helper, followed as one: ``backward(loss, scaler)`` (a function of this file),
    ``self.precision.backward(loss)`` (a method of a plain class of this file, given the loss)."""
    if recv is not None and (recv == "self" or not call.args):
        return False
    return fm.file.resolve(call, fm) is not None


def _module_path(fm: FunctionModel, func: str) -> bool:
    """``torch.Generator``, ``nn.Linear``, ``Net``: a function or class of a module, not a model instance."""
    head, _, rest = func.partition(".")
    if rest and head in fm.file.imports.alias:
        return True
    last = func.split(".")[-1]
    return last in fm.file.class_names or (not rest and last in fm.file.imports.alias and last[:1].isupper())


def _backward(call: ast.Call, recv: str | None) -> tuple[str, str | None, dict]:
    if recv and recv.split(".")[-1] == "dist_autograd":  # gradients kept in the RPC context, not in .grad
        return BACKWARD, None, {"loss": call.args[1] if len(call.args) > 1 else None, "distributed": True}
    if call.args and (recv is None or _BACKWARD_DRIVERS.search(recv.split(".")[-1].lower())):
        return BACKWARD, None, {"loss": call.args[0]}
    func = call.func
    return BACKWARD, None, {"loss": func.value if isinstance(func, ast.Attribute) else None}


def _simple_kind(fm: FunctionModel, call: ast.Call, name: str, recv: str | None, role: str | None) -> str | None:
    grad_recv = bool(recv and (recv.endswith(".grad") or recv.endswith(".grad.data")))
    if name in ("zero_grad", "clear_grad", "clear_grads") or (grad_recv and name == "zero_"):
        return ZERO
    if grad_recv and name == "fill_" and call.args and const_value(call.args[0]) == 0:
        return ZERO
    if grad_recv and name in ("clamp_", "clip_"):
        return CLIP
    qual = fm.file.imports.qualname(call.func)  # ``from torch.nn.utils import clip_grad_norm_ as clip``
    if name in _CLIP_FUNCTIONS or qual.split(".")[-1] in _CLIP_FUNCTIONS:
        last = fm.file.imports.resolve(recv or "").split(".")[-1]
        if recv is None or last in {"utils", "clip_grad", "nn", "torch"} or _BACKWARD_DRIVERS.search(last.lower()):
            return CLIP  # ``accelerator.clip_grad_norm_`` / ``fabric.clip_gradients`` too (they unscale first)
    if name in ("clip_gradients", "adaptive_clip_gradients") and qual.startswith("trickbag"):
        return CLIP
    if role == R.SCALER and name in ("scale", "update"):
        return SCALE if name == "scale" else SCALER_UPDATE
    if name == "unscale_":
        return UNSCALE
    if name == "update_parameters" or (name == "update" and role == R.EMA and not _updates_with_scalars(call)):
        return EMA_UPDATE
    if isinstance(call.func, ast.Attribute) and name in ("eval", "train"):
        return _mode_kind(call, name, recv)
    return None


def _updates_with_scalars(call: ast.Call) -> bool:
    """``ema.update(loss.item(), "D_real", step)``: a running mean of numbers (LeCam's anchors, a smoothed loss for
    logging), not a weight average: an argument is a Python number read off a tensor (``.item()``, ``float(...)``)
    or a string key, or a tensor reduced whole to one number (``out.mean()``, ``torch.mean(out)``: the mean of the
    discriminator's outputs), or a name of a reward, loss or metric (``baseline.update(reward)``). A weight average
    takes the model, its parameters or a step count."""
    for arg in [*call.args, *(k.value for k in call.keywords)]:
        if (isinstance(arg, ast.Constant) and isinstance(arg.value, str)) or _whole_reduction(arg):
            return True
        if isinstance(arg, ast.Call) and (call_name(arg) in ("item", "tolist")
                                          or (isinstance(arg.func, ast.Name) and arg.func.id == "float")):
            return True
        if isinstance(arg, (ast.Name, ast.Attribute)) and set(name_tokens(dotted(arg) or "")) & _SCALAR_WORDS:
            return True  # ``baseline.update(reward)``: REINFORCE's moving-average baseline
    return False


_SCALAR_WORDS = {"reward", "rewards", "loss", "losses", "acc", "accuracy", "score", "scores", "metric", "returns"}


def _whole_reduction(node: ast.AST) -> bool:
    """``x.mean()`` / ``x.sum()`` (no dimension) or ``torch.mean(x)`` / ``torch.sum(x)``: a 0-d tensor, one number."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("mean", "sum")
            and not node.keywords):
        return False
    if isinstance(node.func.value, ast.Name) and node.func.value.id == "torch":
        return len(node.args) == 1 and not isinstance(node.args[0], ast.Starred)
    return not node.args


def chain_receiver(call: ast.Call) -> str | None:
    """The object at the root of a method chain: ``model`` for ``model.to(dev).train()``."""
    node = call.func.value if isinstance(call.func, ast.Attribute) else None
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        node = node.func.value
    return dotted(node) if node is not None else None


def _mode_kind(call: ast.Call, name: str, recv: str | None) -> str | None:
    if name == "eval":
        return EVAL if not call.args and not call.keywords else None
    if recv and "trainer" in recv.lower():
        return None
    arg = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "mode"), None)
    # ``.train(was_training)`` / ``.train(mode=prev)`` restores the saved mode: read it as train mode
    return EVAL if arg is not None and const_value(arg) is False else TRAIN


#: calls that make, fetch or wrap a model rather than run it: ``create_model(...)``, ``Net.from_pretrained(...)``,
#: ``accelerator.unwrap_model(model)``
CONSTRUCTOR = re.compile(r"^_?(create|build|make|get|load|init|initialize|unwrap|prepare|setup|wrap|instantiate|"
                         r"construct|convert|export|compile|freeze|unfreeze|to|copy|deepcopy|clone|register|from|save|"
                         r"log|push|upload|print|summary|count|describe|show)(_|$)|"
                         r"^from_|_from_")


def _constructs(fm: FunctionModel, func: str) -> bool:
    """``Model(envs)`` (a class: a capitalised name whose parameters no optimizer takes, unlike a GAN's
    ``G``), ``timm.create_model(...)``, ``X.from_pretrained(...)``: not a forward."""
    last = func.split(".")[-1].replace("[]", "")
    if last[:1].isupper() and len(last) > 2 and func not in fm.file.optimized():
        return True
    return bool(CONSTRUCTOR.search(last))


def _imported_function(fm: FunctionModel, call: ast.Call) -> bool:
    """``add_prompt_to_generator(example, ...)`` imported from a module of the same project where it is a plain
    function: named like a model, but not one."""
    if not isinstance(call.func, ast.Name):
        return False
    return isinstance(imported_definition(fm.file.tree, fm.file.path, call.func.id),
                      (ast.FunctionDef, ast.AsyncFunctionDef))


def _forward_or_call(fm: FunctionModel, call: ast.Call, name: str, recv: str | None,
                     role: str | None) -> list[tuple[str, str | None, dict]]:
    helper = fm.file.resolve(call, fm)
    if _averages_weights(fm, call, name, helper):
        first = dotted(call.args[0]) if call.args else None
        return [(EMA_UPDATE, first or recv, {})]
    func = dotted(call.func)
    if func and (call.args or call.keywords) and fm.role(func) in (R.MODEL, R.EMA) \
            and helper is None and not _module_path(fm, func) and not _constructs(fm, func) \
            and not _imported_function(fm, call) and not _applied_to_model(fm, call):
        return [(FORWARD, func, {})]
    if name in ("forward", "module") and role in (R.MODEL, R.EMA):
        return [(FORWARD, recv, {})]
    first = dotted(call.args[0]) if call.args else None
    if helper is None and first and "loss" in name_tokens(name) and fm.role(first) == R.MODEL:
        return [(FORWARD, first, {})]  # ``td_loss(agent, target, batch)``: an outside loss runs the model
    if helper is not None:
        args = {dotted(a) for a in list(call.args) + [k.value for k in call.keywords] if dotted(a)}
        return [(CALL, recv, {"helper": helper, "args": args})]
    if R.TRAIN_FUNCTION.match(name) and not (isinstance(call.func, ast.Attribute) and name == "train"):
        return [(TRAIN_CALL, recv, {})]
    return []


def _applied_to_model(fm: FunctionModel, call: ast.Call) -> bool:
    """``ema_helper.ema(score)``: a method of an averaging helper (its receiver named like one) given the model
    itself (a name the function runs, moves or loads weights into, or named like a model): it copies or applies
    the average to that model, it does not run the average on data."""
    if not (isinstance(call.func, ast.Attribute) and fm.role(dotted(call.func.value)) == R.EMA and call.args):
        return False
    used = {dotted(n.func.value) if isinstance(n.func, ast.Attribute) and n.func.attr in _MODEL_METHODS
            else dotted(n.func) for n in fm.nodes if isinstance(n, ast.Call)}
    return all((d := dotted(a)) and (d in used or fm.role(d) == R.MODEL) for a in call.args)


_MODEL_METHODS = {"load_state_dict", "parameters", "named_parameters", "state_dict", "eval", "train", "to", "cuda"}
_AVERAGE_WORDS = {"ema", "swa", "average", "averages", "averaging", "avg", "polyak"}
_UPDATE_WORDS = {"update", "updates", "step", "moving"}
_TRAINING_CALLS = {"backward", "manual_backward", "step", "zero_grad", "eval", "train"}


def _averages_weights(fm: FunctionModel, call: ast.Call, name: str, helper: FunctionModel | None) -> bool:
    """A free-standing weight-average update: ``update_ema(ema_model, model)``, ``swa_update(...)``,
    ``moving_average(ema, model, decay)`` (a name saying so, called with a model), or a local helper
    whose body blends one model's parameters into another's (``p_ema.mul_(d).add_(p, alpha=1 - d)``)."""
    words = set(name_tokens(name))
    named = bool(words & _AVERAGE_WORDS) and bool(words & _UPDATE_WORDS) and any(
        fm.role(dotted(a)) in (R.MODEL, R.EMA) for a in list(call.args) + [k.value for k in call.keywords])
    if helper is None:
        return named
    table = fm.file.memo("weight_averagers", dict)  # id(helper) -> blends / None: trains (computed once)
    if id(helper) not in table:
        body = [n for n in helper.nodes if isinstance(n, ast.Call)]
        table[id(helper)] = None if any(call_name(n) in _TRAINING_CALLS for n in body) \
            else _blends_parameters(helper, body)
    blends = table[id(helper)]
    return blends is not None and (named or blends)


def _blends_parameters(helper: FunctionModel, body: list[ast.Call]) -> bool:
    """``lerp_`` (or ``mul_`` + ``add_``) over the parameters of two models, no ``.grad`` in sight."""
    names = {call_name(n) for n in body}
    blends = bool(names & {"lerp_", "_foreach_lerp_"}) or {"mul_", "add_"} <= names \
        or {"_foreach_mul_", "_foreach_add_"} <= names
    sources = {dotted(n.func.value) for n in body if isinstance(n.func, ast.Attribute)
               and call_name(n) in ("parameters", "named_parameters", "state_dict", "buffers")} - {None}
    grads = any(isinstance(n, ast.Attribute) and n.attr == "grad" for n in helper.nodes)
    return blends and len(sources) >= 2 and not grads
