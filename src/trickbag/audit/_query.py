"""Questions the loop rules ask of the flow model: which loop trains, what runs before the step,
whether a loss was divided, which train/eval switch is in force at a forward."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from trickbag.audit import _roles as R
from trickbag.audit._ast import call_name, const_value, dotted, has_binop, name_tokens, names_in, walk
from trickbag.audit._flow import BACKWARD, CALL, EVAL, STEP, TRAIN, TRAIN_CALL, Event, FileModel, FunctionModel, Loop

__all__ = ["stepish", "has_kind", "train_loop", "at_level", "loops_of", "scaled_loss", "mode_events", "same_model",
           "is_eval_function", "is_valish", "is_data_loop", "loss_names", "short_name", "feeds_backward",
           "POSITION_KEY", "checkpoint_position"]

#: checkpoint keys that say where the run stopped
POSITION_KEY = re.compile(r"epoch|step|iter", re.IGNORECASE)
_CHECKPOINT_NAME = re.compile(r"ckpt|checkpoint|state|resume|snapshot|saved", re.IGNORECASE)


def checkpoint_position(fm: FunctionModel, value: ast.AST) -> str | None:
    """The key when ``value`` is ``ckpt['epoch']`` / ``ckpt.get('epoch')`` of a loaded checkpoint (a name assigned
    from ``torch.load(...)``, or named like one)."""
    if isinstance(value, ast.Call) and call_name(value) == "get" and isinstance(value.func, ast.Attribute) \
            and value.args and isinstance(value.args[0], ast.Constant):
        holder, key = value.func.value, value.args[0].value
    elif isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Constant):
        holder, key = value.value, value.slice.value
    else:
        return None
    if not (isinstance(key, str) and POSITION_KEY.search(key) and isinstance(holder, ast.Name)):
        return None
    loaded = any(a.names == [holder.id] and isinstance(a.value, ast.Call) and call_name(a.value) == "load"
                 for a in fm.assigns)
    return key if loaded or _CHECKPOINT_NAME.search(holder.id) else None


def loops_of(file: FileModel) -> Iterator[tuple[FunctionModel, Loop]]:
    for fm in file.functions:
        for loop in fm.loops:
            yield fm, loop


def stepish(ev: Event) -> bool:
    """An optimizer step, a local helper that steps, or a call of a ``train_one_epoch``-like function."""
    return ev.kind in (STEP, TRAIN_CALL) or (ev.kind == CALL and STEP in ev.kinds())


def has_kind(loop: Loop, kind: str) -> bool:
    return any(kind in e.kinds() for e in loop.events)


def train_loop(ev: Event) -> Loop | None:
    """The innermost loop around ``ev`` that runs a backward pass (None: not in a training loop)."""
    for lp in reversed(ev.loops):
        if has_kind(lp, BACKWARD):
            return lp
    return None


def at_level(ev: Event, loop: Loop) -> bool:
    """True when no loop between ``loop`` and ``ev`` steps on its own (``ev`` is per-iteration of ``loop``)."""
    inner = ev.loops[ev.loops.index(loop) + 1:]
    return not any(any(stepish(x) for x in lp.events) for lp in inner)


# --------------------------------------------------------------------------- loss scaling
_SCALING_METHODS = {"div", "div_", "mul", "mul_", "true_divide", "divide", "multiply"}
_DIV_OPS = (ast.Div, ast.Mult, ast.FloorDiv)


def scaled_loss(fm: FunctionModel, expr: ast.AST | None, before: int, counter: set[str],
                depth: int = 0) -> bool | None:
    """Was the loss ``expr`` divided (or multiplied) before ``before``?  True / False (an unscaled
    loss value), None when unknown (a helper computes it, a parameter, ...)."""
    if expr is None or depth > 4:
        return None
    if isinstance(expr, ast.Call) and call_name(expr) in ("scale", "scale_loss") and expr.args:
        return scaled_loss(fm, expr.args[0], before, counter, depth)  # the scaler wrapper is transparent
    if has_binop(expr, _DIV_OPS) or _mentions_counter(expr, counter):
        return True
    if any(isinstance(n, ast.Call) and call_name(n) in _SCALING_METHODS for n in walk(expr)):
        return True
    helper = fm.file.resolve(expr, fm) if isinstance(expr, ast.Call) else None
    if helper is not None:
        return _helper_scaled(helper, counter)
    name = dotted(expr)
    if name is None:
        if isinstance(expr, ast.BinOp):
            sides = [scaled_loss(fm, s, before, counter, depth + 1) for s in (expr.left, expr.right)]
            return True if True in sides else (False if False in sides else None)
        return False if R.is_loss_value(expr, fm.role) else None
    return _scaled_name(fm, name, before, counter, depth)


def _scaled_name(fm: FunctionModel, name: str, before: int, counter: set[str], depth: int) -> bool | None:
    for n in fm.nodes:  # ``with amp.scale_loss(loss, optimizer) as scaled_loss:``: apex's wrapper is transparent
        if isinstance(n, (ast.With, ast.AsyncWith)):
            for item in n.items:
                e = item.context_expr
                if dotted(item.optional_vars) == name and isinstance(e, ast.Call) and call_name(e) == "scale_loss" \
                        and e.args:
                    return scaled_loss(fm, e.args[0], before, counter, depth + 1)
    assigns = fm.last_assignments(name, before)
    if not assigns:
        return _scaled_output_loss(fm, name, before, counter)
    if _scaled_in_place(fm, name, min(getattr(a.node, "lineno", 0) for a in assigns)):
        return True
    verdicts: list[bool | None] = []
    for a in assigns:
        if a.op is not None and isinstance(a.op, _DIV_OPS):
            return True
        if a.value is None:
            verdicts.append(None)
            continue
        v = scaled_loss(fm, a.value, a.order, counter, depth + 1)
        if v is None and isinstance(a.value, (ast.Call, ast.Attribute, ast.Subscript)) \
                and (depth == 0 or "loss" in name_tokens(name)) and fm.file.resolve_any(a.value, fm) is None:
            v = False
        verdicts.append(v)
    if True in verdicts:
        return True
    return False if verdicts and all(v is False for v in verdicts) else None


def _scaled_in_place(fm: FunctionModel, name: str, after: int) -> bool:
    """``loss.div_(k)`` (or ``mul_``) as a statement after ``name`` was last set (line ``after``)."""
    return any(isinstance(n, ast.Expr) and isinstance(n.value, ast.Call) and call_name(n.value) in ("div_", "mul_")
               and isinstance(n.value.func, ast.Attribute) and dotted(n.value.func.value) == name
               and n.lineno > after for n in fm.nodes)


def _scaled_output_loss(fm: FunctionModel, name: str, before: int, counter: set[str]) -> bool | None:
    """``out.loss`` of a local ``out = model(**batch)``: unscaled unless ``out`` was divided itself."""
    base, _, attr = name.rpartition(".")
    assigns = fm.last_assignments(base, before) if attr == "loss" and base else []
    if not assigns or any(a.value is None for a in assigns):
        return None
    return any(
        (a.op is not None and isinstance(a.op, _DIV_OPS))
        or (a.value is not None  # checked above
            and (has_binop(a.value, _DIV_OPS) or _mentions_counter(a.value, counter)))
        for a in assigns
    )


def _helper_scaled(helper: FunctionModel, counter: set[str]) -> bool | None:
    """Does a local helper that computes the loss divide it?  (None: it returns something else.)"""
    returns = [n.value for n in helper.nodes if isinstance(n, ast.Return) and n.value is not None]
    if not returns:
        return None
    if any(has_binop(r, _DIV_OPS) or _mentions_counter(r, counter) for r in returns) or \
            any(_mentions_counter(n, counter) for n in helper.nodes if isinstance(n, ast.Name)):
        return True
    return False if all(R.is_loss_value(r, helper.role) for r in returns) else None


def _mentions_counter(expr: ast.AST, counter: set[str]) -> bool:
    names = names_in(expr)
    return bool(names & counter) or any("accum" in n.lower() for n in names)


# --------------------------------------------------------------------------- train / eval
def mode_events(fm: FunctionModel, events: list[Event]) -> list[tuple[Event, str]]:
    """(event, 'eval' / 'train') for every switch of mode among ``events`` (helpers included)."""
    out = []
    chosen = fm.file.memo(f"mode_choices:{id(fm)}", lambda: _mode_choices(fm))
    for e in events:
        if e.kind == EVAL and id(e.node) in chosen:
            continue  # ``model.train() if is_train else model.eval()``: the branch that trains switches to train
        if e.kind in (EVAL, TRAIN):
            out.append((e, e.kind))
        elif e.kind == TRAIN_CALL:
            out.append((e, TRAIN))
        elif e.kind == CALL:
            kinds = e.kinds()
            if TRAIN in kinds or TRAIN_CALL in kinds:
                out.append((e, TRAIN))
            elif EVAL in kinds:
                out.append((e, EVAL))
    return out


def _mode_choices(fm: FunctionModel) -> set[int]:
    """ids of the ``eval()`` calls in a conditional expression whose other branch calls ``train()``
    (``model = model.train() if is_train else model.eval()``: one function for both loops, the mode chosen by
    the loop it runs)."""
    out: set[int] = set()
    for n in fm.nodes:
        if not isinstance(n, ast.IfExp):
            continue
        sides = [[(c, c.func.attr) for c in ast.walk(b) if isinstance(c, ast.Call)
                  and isinstance(c.func, ast.Attribute)] for b in (n.body, n.orelse)]
        names = [{attr for _, attr in side} for side in sides]
        if {"train", "eval"} <= names[0] | names[1] and names[0] != names[1]:
            out |= {id(c) for side in sides for c, attr in side if attr == "eval"}
    return out


def same_model(mode: Event, fwd: Event) -> bool:
    """Does the train/eval switch ``mode`` act on the model that ``fwd`` runs?"""
    target = fwd.recv or ""
    if mode.kind in (CALL, TRAIN_CALL):
        if mode.kind == TRAIN_CALL:
            return True
        summary = mode.fm.file.summary(mode.extra["helper"])
        args = mode.extra.get("args", set())
        switched = _bound_switches(mode.extra["helper"], mode.node, summary.mode_recvs)
        return target in args or target in switched or short_name(target) in {short_name(a) for a in args} \
            or (target.startswith("self.") and (mode.recv or "") == "self"
                and _self_switch(target, summary.mode_recvs)) \
            or "self" in summary.mode_recvs
    a = mode.recv or ""
    if not a:
        return False
    if not target or a == target:
        return True
    if a == "self":
        return target.startswith("self.")
    base = a[:-2] if a.endswith("[]") else a  # ``[model[k].eval() for k in model]`` switches every part of model
    if target.startswith((base + ".", base + "[")):
        return True  # ``model.eval()`` puts its submodules in eval mode too (``model.encoder(x)``)
    return short_name(a) == short_name(target)


def _self_switch(target: str, recvs: set[str]) -> bool:
    """A method of the object (``self.visualize_results()``) switches ``target`` unless the switches it makes name
    other attributes only (``self.G.eval()`` there leaves ``self.D`` as it was)."""
    own = {r for r in recvs if r.startswith("self.")}
    if not own or len(own) != len(recvs):
        return True
    return any(target == r or target.startswith((r + ".", r + "[")) or short_name(r) == short_name(target) for r in own)


def _bound_switches(helper, call: ast.AST, recvs: set[str]) -> set[str]:
    """The models a helper's mode switches act on, seen from a call: a switched parameter is the argument the call
    binds to it (``evaluate(eval_model, loader)`` switches ``eval_model``, not a ``model`` of the caller)."""
    args = getattr(helper.node, "args", None)
    if not isinstance(call, ast.Call) or not isinstance(args, ast.arguments):
        return set(recvs)
    params = [a.arg for a in args.posonlyargs + args.args]
    if helper.cls is not None and isinstance(call.func, ast.Attribute) and params:
        params = params[1:]
    bound = {p: a for p, a in zip(params, call.args) if not isinstance(a, ast.Starred)}
    bound.update({k.arg: k.value for k in call.keywords if k.arg})
    out = set()
    for r in recvs:
        head, _, rest = (r or "").partition(".")
        if head in bound:
            d = dotted(bound[head])
            if d:
                out.add(f"{d}.{rest}" if rest else d)
        elif head not in params:
            out.add(r)
    return out


def short_name(name: str) -> str:
    parts = [p for p in name.split(".") if p not in ("module", "self", "_orig_mod")]
    return parts[-1] if parts else name


_LIGHTNING_BASES = {"LightningModule", "LightningDataModule"}


def is_eval_function(fm: FunctionModel) -> bool:
    """A function that evaluates: decorated with no_grad/inference_mode or named like ``evaluate``
    (Lightning's ``validation_step`` & co. are run by Lightning under both and are skipped)."""
    if fm.cls is not None:
        bases = {(dotted(b) or "").split(".")[-1] for b in fm.cls.bases}
        methods = {n.name for n in fm.cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        hooks = "training_step" in methods and not fm.call_sites()  # a hand-written trainer calls its own steps
        if bases & _LIGHTNING_BASES or hooks or "forward" in methods or any(b.endswith("Module") for b in bases):
            return False  # Lightning hooks, and an nn.Module's own predict()/inference() methods
    if fm.grad_disabled:
        return True
    return bool(R.EVAL_NAME.match(fm.name)) and not any(feeds_backward(site) for site in fm.call_sites())


def _flows_into_backward(site: Event) -> bool:
    """What the call returns reaches a later backward of the function through assignments and list appends
    (``y_hat = maml.predict(x)``; ``losses.append(crit(y_hat, y))``; ``torch.stack(losses).mean().backward()``)."""
    fm = site.fm
    later = [b for b in fm.kind_events(BACKWARD) if b.order > site.order]
    if not later:
        return False
    names = {n for a in fm.assigns if a.value is not None and a.order >= site.order
             and any(x is site.node for x in walk(a.value)) for n in a.names}
    for _ in range(4):
        grown = names | {n for a in fm.assigns if a.value is not None and a.order > site.order
                         and names_in(a.value) & names for n in a.names}
        if grown == names:
            break
        names = grown
    return bool(names) and any(names_in(b.extra.get("loss") or ast.Constant(None)) & names for b in later)


def feeds_backward(site: Event, depth: int = 0) -> bool:
    """The call runs before a backward of the same pass, on its path (``loss = crit(self.infer(x), y);
    loss.backward()``): the function is part of the training step, whatever its name.  Through a function that
    returns what it computed (``outputs.update(self.predict_poses(...))`` in ``process_batch()``, whose
    ``losses`` the training step back-propagates), two calls deep.  Computed once per call site and depth (rules
    ask it of every function's call sites)."""
    cache: dict[tuple[int, int], bool] = site.fm.file.memo("feeds_backward", dict)
    key = (id(site), depth)
    if key not in cache:
        cache[key] = _feeds_backward(site, depth)
    return cache[key]


def _feeds_backward(site: Event, depth: int) -> bool:
    if _flows_into_backward(site):
        return True
    guards = {id(g.node) for g in site.guards}
    if any(b.loops == site.loops and b.order > site.order and not b.exclusive(site)
           and guards <= {id(g.node) for g in b.guards} for b in site.fm.kind_events(BACKWARD)):
        return True
    returns = any(isinstance(n, ast.Return) and n.value is not None for n in site.fm.nodes)
    return depth < 2 and returns and not site.fm.kind_events(BACKWARD) \
        and any(feeds_backward(s, depth + 1) for s in site.fm.call_sites())


VALISH = {"val", "valid", "validation", "test", "testing", "eval", "evaluation", "dev", "holdout", "heldout"}


def is_valish(loop: Loop) -> bool:
    """A loop over a validation/test set (``for x, y in val_loader``, ``tqdm(test_dl)``)."""
    it = loop.iter
    if it is None:
        return False
    words: set[str] = set()
    for n in walk(it):
        if isinstance(n, (ast.Name, ast.Attribute)):
            words.update(name_tokens(dotted(n) or (n.attr if isinstance(n, ast.Attribute) else "")))
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            words.update(name_tokens(n.value))
    return bool(words & VALISH)


_DATA = {"loader", "loaders", "dataloader", "dataloaders", "dl", "data", "dataset", "ds", "batches", "iterator",
         "split", "images", "samples", "inputs", "examples", "records"}


def is_data_loop(loop: Loop) -> bool:
    """A loop over a data set (``for x, y in loader``, ``enumerate(tqdm(dataloader))``)."""
    it = loop.iter
    words: set[str] = set()
    for n in walk(it) if it is not None else ():
        if isinstance(n, (ast.Name, ast.Attribute)):
            words.update(name_tokens(dotted(n) or (n.attr if isinstance(n, ast.Attribute) else "")))
    return bool(words & _DATA)


def loss_names(fm: FunctionModel) -> set[str]:
    """Names that hold a loss tensor with its graph: backward targets and loss-valued assignments (not
    a running sum spelled out: ``meters["loss"] = meters["loss"] + loss`` is an accumulator, whose
    ``"loss"`` key must not make it a loss)."""
    out: set[str] = set()
    for e in fm.kind_events(BACKWARD):
        loss = e.extra.get("loss")
        while isinstance(loss, ast.Call) and call_name(loss) == "scale" and loss.args:
            loss = loss.args[0]
        if name := dotted(loss):
            out.add(name)
    for a in fm.assigns:
        if (
            a.value is not None
            and a.op is None
            and len(a.names) == 1
            and R.is_loss_value(a.value, fm.role)
            and not _running_sum(a)
            and not _declared_not_loss(a.value)
            or a.value is not None
            and a.op is None
            and len(a.names) == 1
            and _model_output_loss(fm, a.value, a.order)
        ):
            out.add(a.names[0])
    return out | _loss_terms(fm, out) | _sibling_losses(fm, out)


def _sibling_losses(fm: FunctionModel, losses: set[str]) -> set[str]:
    """Loss terms returned beside a loss by one call: ``refine_loss`` in ``loss, refine_loss = self.completion(x)``
    when ``loss`` is back-propagated (a name with the word loss; the terms of the returned total, on its graph)."""
    out: set[str] = set()
    for a in fm.assigns:
        if a.op is None and len(a.names) > 1 and isinstance(a.value, ast.Call) and set(a.names) & losses:
            out |= {n for n in a.names if n not in losses and "loss" in name_tokens(n.split(".")[-1])}
    return out


def _declared_not_loss(value: ast.AST) -> bool:
    """``loss_func(output, non_loss_data=True)``: the call is told to return something other than the loss."""
    return isinstance(value, ast.Call) and any(
        k.arg and "non_loss" in k.arg and const_value(k.value) is True for k in value.keywords)


_LOSS_FN_WORDS = {"loss", "criterion", "crit", "mse", "bce", "ce", "nll", "kl", "l1", "l2", "huber", "smooth"}


def _loss_terms(fm: FunctionModel, losses: set[str]) -> set[str]:
    """Terms of a loss: ``MSE`` in ``loss = MSE + ce(...)`` when ``MSE = mse_fn(pred, y)`` (a call of a loss
    function, by its name) -- part of the graph the loss backpropagates."""
    terms: set[str] = set()
    for a in fm.assigns:
        if a.value is None or a.op is not None or len(a.names) != 1 or a.names[0] not in losses:
            continue
        for n in walk(a.value):
            if isinstance(n, ast.Name) and n.id not in losses and any(
                    b.value is not None and isinstance(b.value, ast.Call) and b.names == [n.id]
                    and set(name_tokens((dotted(b.value.func) or "").split(".")[-1])) & _LOSS_FN_WORDS
                    for b in fm.assigns):
                terms.add(n.id)
    return terms


def _model_output_loss(fm: FunctionModel, value: ast.AST, before: int) -> bool:
    """``out["loss_box"]`` of ``out = model(batch)``: a loss term of a model's output dict."""
    if not (isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Constant)
            and isinstance(value.slice.value, str) and "loss" in name_tokens(value.slice.value)):
        return False
    base = dotted(value.value)
    assigns = fm.last_assignments(base, before) if base else []
    return bool(assigns) and all(isinstance(a.value, ast.Call) and a.op is None and dotted(a.value.func)
                                 and fm.role(dotted(a.value.func)) == R.MODEL for a in assigns)


def _running_sum(a) -> bool:
    """``acc = acc + value`` (``acc`` a name, attribute or subscript)."""
    v = a.value
    return isinstance(v, ast.BinOp) and isinstance(v.op, ast.Add) and dotted(v.left) == a.names[0]
