"""TB403 torch-load-unsafe: ``torch.load`` unpickles a file that may come from someone else.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from trickbag.audit._ast import call_name, const_value, dotted, name_tokens, opposite_branches, walk
from trickbag.audit._eval_facts import bound_args, file_trains
from trickbag.audit._flow import BACKWARD, STEP, FileModel, FunctionModel
from trickbag.audit._project import OLD_TORCH, option_texts, project_releases_models, project_saves_checkpoints
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []



_OUTSIDE = {"args", "argv", "opt", "opts", "flags", "input", "url", "urls", "download", "hub", "hf_hub_download",
            "cached_path", "urlopen", "requests", "environ", "getenv"}


def _from_outside(node: ast.AST | None) -> bool:
    """A path that comes from outside the program: a command-line argument (``args.ckpt``, ``sys.argv[1]``),
    ``input()``, an environment variable, a download or a URL."""
    if node is None:
        return False
    for n in walk(node):
        if isinstance(n, ast.Name) and n.id in _OUTSIDE:
            return True
        if isinstance(n, ast.Attribute) and n.attr in _OUTSIDE:
            return True
        if isinstance(n, ast.Call) and any(w in call_name(n).lower() for w in ("download", "urlopen", "input")):
            return True
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.startswith(("http://", "https://")):
            return True
    return False


def _names(node: ast.AST | None) -> set[str]:
    return {n.id for n in walk(node) if isinstance(n, ast.Name)} if node is not None else set()


def _parameters_around(file: FileModel) -> dict[int, set[str]]:
    """id(call) -> the parameters of the function the call is in: a path a function receives comes from its
    caller (``load(checkpoint_path)`` in a library's API is the user's file)."""
    out: dict[int, set[str]] = {}
    for fm in file.functions:
        args = getattr(fm.node, "args", None)
        if not isinstance(args, ast.arguments):
            continue
        names = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs} - {"self", "cls"}
        for n in fm.nodes:
            if isinstance(n, ast.Call):
                out[id(n)] = names
    return out


def _own_file(node: ast.AST | None) -> bool:
    """A path the program names itself: a literal (``"weights/resnet101.pt"``), or built from one
    (``f"{run_dir}/last.pt"``, ``os.path.join(cache_dir, "labels.cache")``, ``run_dir / "last.pt"``)."""
    if node is None or _from_outside(node):
        return False
    return any(isinstance(n, ast.Constant) and isinstance(n.value, str) for n in walk(node))


def _literal_constant(file: FileModel, path: ast.AST | None) -> bool:
    """A name the module body binds only to a path it names itself (``MODEL_PATH = '../data/checkpoints/model.pt'``
    at the top of a script)."""
    if not isinstance(path, ast.Name):
        return False
    values = [a.value for a in file.module.assigns if path.id in a.names]
    return bool(values) and all(v is not None and _own_file(v) for v in values)


_SAVES = {"save", "save_checkpoint", "save_model", "save_state", "save_network", "save_networks"}
_FOLDER = re.compile(r"^[\w.-]+/")
_PATH_MODULES = {"os", "os.path", "osp", "path", "pathlib", "Path", "str"}


def _roots(fm: FunctionModel, node: ast.AST | None, depth: int = 0) -> set[str]:
    """Where a path is made from: the dotted names in it (``args.checkpoint_path``, ``opt.save_dir``) and the
    leading folder of each literal (``"saved_models/%s/G_%d.pth"`` -> ``saved_models/``), following the names
    assigned in the same function (two levels)."""
    if node is None:
        return set()
    if isinstance(node, ast.Attribute):
        d = dotted(node)
        return {d} if d else _roots(fm, node.value, depth)
    if isinstance(node, ast.Constant):
        m = _FOLDER.match(node.value) if isinstance(node.value, str) else None
        return {m.group(0)} if m else set()
    if isinstance(node, ast.Name):
        if depth >= 2:
            return set()
        values = [a.value for a in fm.assigns if a.names == [node.id] and a.op is None and a.value is not None]
        return {r for v in values for r in _roots(fm, v, depth + 1)}
    if isinstance(node, ast.Call):
        parts = [*node.args, *(k.value for k in node.keywords)]
        if isinstance(node.func, ast.Attribute) and dotted(node.func.value) not in _PATH_MODULES:
            parts.append(node.func.value)
        return {r for p in parts for r in _roots(fm, p, depth)}
    return {r for c in ast.iter_child_nodes(node) for r in _roots(fm, c, depth)}


def _save_paths(fm: FunctionModel) -> list[ast.AST]:
    """The path arguments of a function's saves: ``torch.save(obj, PATH)``, ``save_checkpoint(PATH, obj)`` ..."""
    out: list[ast.AST] = []
    for n in fm.nodes:
        if isinstance(n, ast.Call) and call_name(n) in _SAVES:
            args = n.args[1:2] if fm.file.imports.qualname(n.func) == "torch.save" else n.args
            out += list(args) + [k.value for k in n.keywords if k.arg in ("f", "path", "filepath", "filename")]
    return out


def _own_save(fm: FunctionModel | None, path: ast.AST | None) -> str:
    """Why the loaded file is probably the program's own checkpoint, or '': its path is made from the same
    folder or argument as a path the same function (or module body) saves to."""
    if path is None or fm is None:
        return ""
    shared = _roots(fm, path) & {r for p in _save_paths(fm) for r in _roots(fm, p)}
    if shared:
        return f" (uncertain: the path is made from {sorted(shared)[0]!r}, where this code saves its own checkpoints)"
    return ""


_JOINS = {"join", "format", "Path", "str", "joinpath", "abspath", "realpath", "expanduser", "normpath",
          "fspath", "as_posix"}
_TRIVIAL = re.compile(r"^[\W_]*$|^(wb|rb|w|r|a)$")


def _assigned_values(fm: FunctionModel, name: str, line: int | None = None) -> list[ast.AST]:
    """The values plainly assigned to ``name`` in the function: ``name = v``, and ``a, name = x, v``; with ``line``
    (where the name is read), the last such assignment above that line when there is one outside any branch
    (``fname = ... 'lstm_' ...; load(fname); fname = ... 'output_' ...; load(fname)``)."""
    if line is not None:
        above = [a for a in fm.assigns if a.op is None and a.value is not None and a.names == [name]
                 and getattr(a.node, "lineno", line + 1) < line]
        if above and all(a.names == [name] for a in fm.assigns if name in a.names):
            at = {id(a): int(getattr(a.node, "lineno", 0)) for a in above}
            last = max(above, key=lambda a: at[id(a)])
            branch = min((n for n in fm.nodes if isinstance(n, ast.If) and n.lineno <= at[id(last)]
                          <= (n.end_lineno or 0) < line), key=lambda n: (n.end_lineno or 0) - n.lineno, default=None)
            if branch is None:
                return [last.value] if last.value is not None else []
            return [a.value for a in above if a.value is not None
                    and branch.lineno <= at[id(a)] <= (branch.end_lineno or 0)]
    out = []
    for a in fm.assigns:
        if a.op is not None or a.value is None or name not in a.names:
            continue
        if a.names == [name]:
            out.append(a.value)
        elif isinstance(a.value, (ast.Tuple, ast.List)) and len(a.value.elts) == len(a.names):
            out.append(a.value.elts[a.names.index(name)])
    return out


def _pieces(fm: FunctionModel, node: ast.AST | None, depth: int = 0, slots: bool = False) -> frozenset[str]:
    """What a path is made of, following the names assigned in the function (or module body): dotted names
    (``self.processed_folder``, ``args.checkpoints``), words of its literals (``'checkpoint.pth'``) and the calls
    that make it (``utils.getFileName()``); separators are left out."""
    if node is None or depth > 3:
        return frozenset()
    if isinstance(node, ast.Constant):
        return frozenset({node.value}) if isinstance(node.value, str) and not _TRIVIAL.match(node.value) \
            else frozenset()
    if isinstance(node, ast.Name):
        values = _assigned_values(fm, node.id, getattr(node, "lineno", None))
        local = bool(values) or any(node.id in a.names for a in fm.assigns)
        if not values and fm is not fm.file.module:
            values = _assigned_values(fm.file.module, node.id)
        if not values:  # a parameter (or a local bound another way) stands for a value of this call only
            params = getattr(fm.node, "args", None)
            own = local or (isinstance(params, ast.arguments) and node.id in {
                a.arg for a in params.posonlyargs + params.args + params.kwonlyargs})
            return frozenset({f"\0{getattr(fm.node, 'name', '')}\0{node.id}" if own else node.id})
        return frozenset().union(*(_pieces(fm, v, depth + 1, slots) for v in values))
    if isinstance(node, ast.Attribute):
        return frozenset({dotted(node) or node.attr})
    if slots and isinstance(node, ast.Call) and call_name(node) in ("format", "str", "int", "zfill"):
        # the variable slot of a file name (``'{}.pth'.format(epoch)``, ``'lstm_' + str(epoch)``): only the template
        return _pieces(fm, node.func.value, depth, slots) if isinstance(node.func, ast.Attribute) \
            and call_name(node) == "format" else frozenset()
    if slots and isinstance(node, ast.FormattedValue):
        return frozenset()
    if slots and isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant):
        return _pieces(fm, node.left, depth, slots)
    if isinstance(node, ast.Call):
        parts = [*node.args, *(k.value for k in node.keywords)]
        out = frozenset().union(*(_pieces(fm, p, depth, slots) for p in parts)) if parts else frozenset()
        if call_name(node) not in _JOINS:  # a value made by a call (``utils.getFileName()``), not a join of parts
            out |= {f"{dotted(node.func) or call_name(node)}()"}
        elif isinstance(node.func, ast.Attribute) and dotted(node.func.value) not in _PATH_MODULES:
            out |= _pieces(fm, node.func.value, depth, slots)
        return out
    return frozenset().union(*(_pieces(fm, c, depth, slots) for c in ast.iter_child_nodes(node)))


_PATHISH = re.compile(r"path|dir|file|ckpt|checkpoint|folder|out|name|fn|^f$|^p$")


def _state_object(fm: FunctionModel, name: str) -> bool:
    """``name`` holds what is saved, not where: a dict, a ``state_dict()``, a loaded checkpoint."""
    return any(isinstance(a.value, (ast.Dict, ast.DictComp)) or (isinstance(a.value, ast.Call) and (
        "state_dict" in call_name(a.value) or call_name(a.value) in ("load", "dict", "deepcopy")))
        for a in fm.assigns if a.names == [name] and a.value is not None)


def _converter(fm: FunctionModel, save: ast.Call) -> bool:
    """``x = torch.load(f); ...; torch.save(x, s or f)``: a tool that rewrites the file it is given (yolov7's
    ``strip_optimizer``), not a save of the program's own results."""
    obj = save.args[0] if save.args else None
    return isinstance(obj, ast.Name) and any(
        isinstance(a.value, ast.Call) and fm.file.imports.qualname(a.value.func) == "torch.load"
        for a in fm.assigns if a.names == [obj.id])


_CONFIG_READS = {"json.load()", "yaml.load()", "yaml.safe_load()", "toml.load()", "parse_args()",
                 "parse_known_args()", "OmegaConf.load()"}


def _outside_pieces(pieces: frozenset[str]) -> bool:
    """The path is made from a command-line argument, an environment variable or a user's config file
    (``args.ckpt``, ``self.args.checkpoints``, ``json.load(f)['checkpoint_path']``)."""
    return any(p in _CONFIG_READS or bool(set(p.split(".")) & _OUTSIDE) for p in pieces)


def _file_saves(file: FileModel, slots: bool = False) -> list[frozenset[str]]:
    """The pieces of every path this file saves to (``torch.save(obj, path)``, ``torch.save(obj, f)`` inside
    ``with open(path, "wb") as f``, ``save_checkpoint(path, ...)``)."""
    out = []
    for fm in file.functions:
        converters = [n for n in fm.nodes if isinstance(n, ast.Call) and _converter(fm, n)]
        if converters:
            continue
        for p in _save_paths(fm):
            if isinstance(p, ast.Name) and (not _PATHISH.search(p.id.lower()) or _state_object(fm, p.id)):
                continue  # ``save_model_checkpoint(fabric, model, path)``: the model is not a path
            if pieces := _pieces(fm, p, slots=slots):
                out.append(pieces)
        for n in fm.nodes:
            if isinstance(n, (ast.With, ast.AsyncWith)):
                for item in n.items:
                    e, var = item.context_expr, dotted(item.optional_vars)
                    if var and isinstance(e, ast.Call) and call_name(e) == "open" and e.args and any(
                            isinstance(c, ast.Call) and call_name(c) in _SAVES
                            and any(dotted(a) == var for a in c.args) for st in n.body for c in walk(st)):
                        if pieces := _pieces(fm, e.args[0], slots=slots):
                            out.append(pieces)
    return out


def _returned_by_own_save(fm: FunctionModel, path: ast.AST) -> bool:
    """``f = preprocess(...)`` then ``torch.load(f)``, where ``preprocess`` (a function of this file) returns a
    name it also saves to (``torch.save(data, f); return f``)."""
    if not isinstance(path, ast.Name):
        return False
    for a in fm.assigns:
        if a.names == [path.id] and isinstance(a.value, ast.Call):
            helper = fm.file.resolve(a.value, fm)
            if helper is None:
                continue
            returned = {r.value.id for r in helper.nodes if isinstance(r, ast.Return) and isinstance(r.value, ast.Name)}
            saved = {p.id for p in _save_paths(helper) if isinstance(p, ast.Name)}
            if returned & saved:
                return True
    return False


def _trained_before(fm: FunctionModel, node: ast.AST) -> bool:
    """The function runs backward() / optimizer.step() before this load: a reload of the best weights this run
    saved (``model.load_state_dict(torch.load(best_model_path))`` at the end of ``train()``); or an object built
    with the same path (``framework = SentenceRE(..., ckpt=ckpt)``) was trained by a ``train*`` / ``fit*`` method
    before it (``framework.train_model()``): the path is where that training saved."""
    line = getattr(node, "lineno", 0)
    if any(getattr(e.node, "lineno", 1 << 30) < line for e in fm.kind_events(BACKWARD, STEP)):
        return True
    path = node.args[0] if isinstance(node, ast.Call) and node.args else None
    if not isinstance(path, ast.Name):
        return False
    given = {n for a in fm.assigns if isinstance(a.value, ast.Call) and getattr(a.node, "lineno", line) < line
             and any(_names(v) == {path.id} for v in [*a.value.args, *(k.value for k in a.value.keywords)])
             for n in a.names}
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and dotted(n.func.value) in given
               and re.match(r"(train|fit)", n.func.attr) and n.lineno < line for n in fm.nodes)


_STATE_KEYS = re.compile(r"optim|iteration|epoch|global_step|scheduler")


def _resumes(fm: FunctionModel, node: ast.AST) -> bool:
    """The loaded object restores an optimizer's state or the step count (``optimizer.load_state_dict(ckpt[
    'optimizer'])``, ``iteration = ckpt['iteration']``): a resume from the program's own training checkpoint."""
    holders = {n for a in fm.assigns if a.value is node for n in a.names}
    trains_here = bool(fm.kind_events(BACKWARD, STEP))
    if not holders or not file_trains(fm.file) or (not trains_here and any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "eval" and not n.args
            for n in fm.nodes)):  # also builds a model for inference: a pretrained file may be loaded there
        return False
    for n in fm.nodes:
        key = const_value(n.slice) if isinstance(n, ast.Subscript) else None
        if isinstance(n, ast.Subscript) and dotted(n.value) in holders and isinstance(key, str) \
                and _STATE_KEYS.search(key):
            return True
    return False


def _plain_method(fm: FunctionModel) -> bool:
    """A method called on an instance (not a ``classmethod`` / ``staticmethod``: ``Model.load(path)`` builds a
    new object from a caller's file, the library API of a package)."""
    return fm.cls is not None and isinstance(fm.node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not any(
        dotted(d) in ("classmethod", "staticmethod") for d in fm.node.decorator_list)


def _paired_save(fm: FunctionModel, path: ast.AST) -> bool:
    """``def load(self, path): ...torch.load(path)`` beside ``def save(self, path): torch.save(..., path)`` in the
    same class: the object reloads the weights it wrote itself (an RL agent's save/load pair)."""
    if not _plain_method(fm) or not _from_parameters(fm, path):
        return False
    pieces = _unscoped(_pieces(fm, path))
    if not pieces or _outside_pieces(pieces):
        return False
    for other in fm.file.functions:
        if other is fm or other.cls is not fm.cls or not _plain_method(other):
            continue
        if any(_from_parameters(other, p) and _unscoped(_pieces(other, p)) == pieces for p in _save_paths(other)):
            return True
    return False


def _from_parameters(fm: FunctionModel, path: ast.AST) -> bool:
    """Every name in the path is a parameter of the function (``path``, ``model_path + id``), none a local such
    as the ``f`` of ``with fs.open(path) as f``."""
    args = getattr(fm.node, "args", None)
    params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs} if isinstance(args, ast.arguments) \
        else set()
    names = _names(path)
    return bool(names) and names <= params


def _passed_to_a_save(fm: FunctionModel, path: ast.AST) -> bool:
    """``evaluate(model, opt, model_save_dir)`` loads its path parameter, and the function calling it passes the
    same name to a function of this file that saves to it (``train(model, ..., model_save_dir)``)."""
    if not isinstance(path, ast.Name) or not _from_parameters(fm, path) \
            or not isinstance(fm.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    for site in fm.call_sites():
        call = site.node
        if not isinstance(call, ast.Call):
            continue
        arg = next((dotted(a) for p, a in bound_args(fm, call) if p == path.id), None)
        if not arg:
            continue
        for n in site.fm.nodes:
            if not isinstance(n, ast.Call) or n is call:
                continue
            helper = fm.file.resolve(n, site.fm)
            if helper is None or helper is fm or not isinstance(helper.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            saved = {p.id for p in _save_paths(helper) if isinstance(p, ast.Name)}
            if any(p in saved and dotted(a) == arg for p, a in bound_args(helper, n)):
                return True
    return False


def _caller_saves_there(fm: FunctionModel, path: ast.AST) -> bool:
    """``inference_all(out, model, os.path.join(out, name), loaders)``: the path parameter is loaded, and every
    call of the function in this file passes a path made from the folder or argument the calling function saves
    its own checkpoints to (``torch.save(model.state_dict(), os.path.join(out, name))`` in the training loop)."""
    if not isinstance(path, ast.Name) or not _from_parameters(fm, path):
        return False
    sites = [s for s in fm.call_sites() if isinstance(s.node, ast.Call)]
    return bool(sites) and all(
        any(p == path.id and bool(_own_save(site.fm, a)) for p, a in bound_args(fm, site.node))  # type: ignore[arg-type]  # a Call (filtered)
        for site in sites)


_LISTINGS = {"walk", "glob", "iglob", "listdir", "scandir", "rglob", "iterdir"}


def _walked_own_folder(fm: FunctionModel, path: ast.AST) -> bool:
    """The path is made from the loop variables of ``for root, _, files in os.walk("checkpoints")`` (or
    ``glob.glob("runs/*.pt")``): files found in a folder the program names itself."""
    names = _names(path)
    for a in fm.assigns:  # ``model_path = os.path.join(root, name)``
        if a.op is None and a.value is not None and set(a.names) & names:
            names |= _names(a.value)
    for n in fm.nodes:
        if isinstance(n, (ast.For, ast.AsyncFor)) and isinstance(n.iter, ast.Call) \
                and call_name(n.iter) in _LISTINGS and _names(n.target) & names:
            args = [*n.iter.args, *(k.value for k in n.iter.keywords)]
            if args and all(isinstance(x, ast.Constant) and isinstance(x.value, str) for x in args[:1]) \
                    and not _from_outside(n.iter):
                return True
    return False


def _restores_optimizer(fm: FunctionModel, node: ast.AST) -> bool:
    """The loaded object is an optimizer state (``full_osd = torch.load(p)`` handed to
    ``FSDP.scatter_full_optim_state_dict(full_osd, model)`` or ``optimizer.load_state_dict(...)``): a file only a
    training run writes, a resume of the program's own training."""
    holders = {n for a in fm.assigns if a.value is node for n in a.names}
    for n in fm.nodes:
        if isinstance(n, ast.Call) and holders & {dotted(x) for x in n.args} and _same_branch(fm, node, n):
            name = (dotted(n.func) or call_name(n)).lower()
            owner = set(name_tokens(name.rpartition(".")[0].split(".")[-1]))  # ``self.opt_enc.load_state_dict``
            if ("optim" in name or owner & {"opt", "optim", "optimizer", "optimiser"}) \
                    and ("load_state_dict" in name or "optim_state_dict" in name):
                return True
    return False


def _same_branch(fm: FunctionModel, a: ast.AST, b: ast.AST) -> bool:
    """``a`` and ``b`` are not in opposite branches of one ``if`` of the function."""
    return not opposite_branches(fm.nodes, a, b)


def _restores_own_class_state(fm: FunctionModel, node: ast.AST) -> bool:
    """The loaded object goes to ``obj.load_state_dict(...)`` where ``obj`` is built in this function from a class
    of this file whose own ``load_state_dict`` restores an optimizer (``trainer = CQL(...)``;
    ``trainer.load_state_dict(torch.load(path))``, CQL's state holding its optimizers and step count): the
    training state of this program's own trainer object, which only its own runs write."""
    holders = {n for a in fm.assigns if a.value is node for n in a.names}
    for n in fm.nodes:
        if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "load_state_dict"
                and n.args and (n.args[0] is node or dotted(n.args[0]) in holders)):
            continue
        recv = dotted(n.func.value)
        made = [a.value for a in fm.assigns if recv and a.names == [recv] and isinstance(a.value, ast.Call)]
        classes = {c.func.id for c in made if isinstance(c.func, ast.Name)}
        for cls in (c for c in fm.file.nodes if isinstance(c, ast.ClassDef) and c.name in classes):
            loads = [f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "load_state_dict"]
            if any(isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr == "load_state_dict"
                   and "optim" in (dotted(c.func.value) or "").lower() for f in loads for c in walk(f)):
                return True
    return False


def _builds_optimizer(fm: FunctionModel) -> bool:
    """The function makes an optimizer (``torch.optim.Adam(...)``, ``get_optimizer_and_scheduler(args, model)``):
    it sets up training, whose loop may live in another module."""
    return any(isinstance(n, ast.Call) and (fm.file.imports.qualname(n.func).startswith("torch.optim.")
                                            or ("optimizer" in call_name(n).lower()
                                                and not call_name(n).endswith("state_dict")))
               for n in fm.nodes)


_EVAL_FLAGS = re.compile(r"^(eval|evaluate|eval_only|test|test_only|inference|predict)$")


def _released_there(fm: FunctionModel, path: ast.AST | None) -> bool:
    """The function treats the resumed file as one that may come from elsewhere: the same option may be a URL
    (``args.resume.startswith('https')``, ``load_state_dict_from_url(args.resume)``), or an evaluation-only flag
    (``args.eval``) decides what is restored: a released checkpoint evaluated without training."""
    key = dotted(path) if path is not None else None
    for n in fm.nodes:
        if isinstance(n, ast.Call) and key and any(dotted(a) == key for a in n.args) \
                and ("url" in call_name(n).lower() or "hub" in (dotted(n.func) or "")):
            return True
        if isinstance(n, ast.Call) and call_name(n) == "startswith" and isinstance(n.func, ast.Attribute) \
                and key and dotted(n.func.value) == key:
            return True
        if isinstance(n, ast.Attribute) and _EVAL_FLAGS.match(n.attr) and isinstance(n.ctx, ast.Load) \
                and isinstance(n.value, ast.Name) \
                and (n.value.id in ("args", "opt") or _parsed_options(fm, n.value.id)):
            return True
    return False


def _none_test(test: ast.AST) -> bool:
    """``x is None`` / ``not x``: the ``else`` branch runs when ``x`` is given."""
    return (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Is)
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None) \
        or (isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not))


def _under_resume_test(fm: FunctionModel, node: ast.AST) -> bool:
    """The load runs only under ``if ...resume...:`` (``if self.args.resume:``, ``if args.restart_dir:``)."""
    for n in fm.nodes:
        if isinstance(n, ast.If) and re.search(r"resume|restart", ast.unparse(n.test).lower()):
            # ``if args.resume is None: ... else: torch.load(args.resume)``: the else branch resumes
            branch = n.orelse if _none_test(n.test) else n.body
            if any(c is node for st in branch for c in walk(st)):
                return True
    return False


def _own_reason(file: FileModel, fm: FunctionModel | None, node: ast.Call, path: ast.AST | None) -> str:
    """Why the loaded file is probably the program's own, or '' (see :func:`torch_load_unsafe`)."""
    if fm is None or path is None:
        return ""
    why = _own_save(fm, path)
    if why:
        return why
    if _paired_save(fm, path):
        return " (uncertain: a method of a class whose save method writes the same path: the object's own file)"
    if _passed_to_a_save(fm, path):
        return " (uncertain: its caller passes the same path to a function of this file that saves to it)"
    if _caller_saves_there(fm, path):
        return " (uncertain: its callers pass a path made from where they save their own checkpoints)"
    if _walked_own_folder(fm, path):
        return " (uncertain: a file found in a folder the program names itself)"
    if _restores_optimizer(fm, node) and not _released_there(fm, path):
        return " (uncertain: restores an optimizer state, which only a training run writes: a resume)"
    if _restores_own_class_state(fm, node):
        return (" (uncertain: restores the state of a trainer class of this file, optimizers included, which only "
                "its own runs write: a resume)")
    if _under_resume_test(fm, node) and (file_trains(file) or _builds_optimizer(fm)) \
            and not _released_there(fm, path):
        return " (uncertain: loaded under a resume test in a file that trains: the program's own checkpoint)"
    pieces = _pieces(fm, path)
    outside = _outside_pieces(pieces)
    if outside and _resumes(fm, node) and _under_resume_test(fm, node):
        return " (uncertain: a --resume that restores the optimizer state or step count the program saved)"
    if pieces and not outside and any(pieces <= saved for saved in file.memo("tb403_saves",
                                                                             lambda: _file_saves(file))):
        return " (uncertain: the path is made like a path this file saves to: the program's own file)"
    if _same_path_as_a_save(file, fm, path):
        return (" (uncertain: a function of this file saves to the same path, file name included: the program's own "
                "file)")
    if _class_file_name(fm, path):
        return (" (uncertain: a sibling method of the same class saves under the same file name: the object's own "
                "file)")
    if _cached_here(fm, node, path):
        return " (uncertain: loaded only when it exists, else computed and saved to it: the program's own cache)"
    if _returned_by_own_save(fm, path):
        return " (uncertain: the path is returned by a function of this file that saves to it: the program's own file)"
    if _trained_before(fm, node):
        return " (uncertain: reloads weights after training in the same function: the program's own checkpoint)"
    if not outside and _resumes(fm, node):
        return " (uncertain: a resume that restores the optimizer state or step count the program saved)"
    if pieces and _unscoped(pieces) in file.memo("tb403_own_loads", lambda: _own_loads(file)):
        return " (uncertain: the same path as the checkpoint this file reloads after training)"
    return ""


def _own_path_reason(file: FileModel, fm: FunctionModel | None, node: ast.Call, path: ast.AST | None) -> str:
    """Why a path given from outside still names the program's own file, from the path alone (a save to the same
    path, file name included, or a cache loaded when it exists and else built and saved there), or ''.  Unlike
    :func:`_own_reason` it does not go by what the load restores: a ``--checkpoint`` that restores an optimizer may
    still be a released file."""
    if fm is None or path is None:
        return ""
    if _same_path_as_a_save(file, fm, path):
        return (" (uncertain: a function of this file saves to the same path, file name included: the program's own "
                "file)")
    if _cached_here(fm, node, path):
        return " (uncertain: loaded only when it exists, else computed and saved to it: the program's own cache)"
    return ""


#: words that say a file comes from someone else (a released, downloaded or pretrained model)
_RELEASED = re.compile(r"pre[-_ ]?train|download|releas|official|zoo|\bhub\b|url|https?:|imagenet|provided|published|"
                       r"third[-_ ]?party|external|huggingface|google drive", re.IGNORECASE)


def _released_words(file: FileModel, fm: FunctionModel, path: ast.AST) -> bool:
    """The path's names and literals, or the help and default of the command-line option it comes from (found in
    the project's ``add_argument`` calls), say the file is pretrained, downloaded or released."""
    pieces = _pieces(fm, path)
    texts = [p.rsplit("\0", 1)[-1] for p in pieces]
    for p in pieces:
        last = p.rsplit("\0", 1)[-1].split(".")[-1]
        if last.isidentifier():
            texts.extend(option_texts(file.path, last))
    return any(_RELEASED.search(t) for t in texts)


def _own_kind_from_outside(file: FileModel, fm: FunctionModel | None, path: ast.AST | None) -> str:
    """A path from the command line or a config in a project that writes its own checkpoints with ``torch.save``
    and says nowhere that this one is pretrained, downloaded or released: most likely a file the project made
    (a ``play.py -m`` of what ``train.py`` saved), or ''."""
    if fm is None or path is None or not project_saves_checkpoints(file.path) or _downloads(fm) \
            or project_releases_models(file.path) or _released_words(file, fm, path):
        return ""
    return (" (uncertain: a path from the command line or a config, in a project that saves its own checkpoints with "
            "torch.save and whose README does not publish trained models; neither its name nor its option's help or "
            "default says pretrained, downloaded or released)")


_PARSERS = {"parse_args", "parse_known_args", "safe_load", "OmegaConf.load", "json.load", "yaml.load",
            "parse_args_into_dataclasses", "get_args", "get_config", "parse_opt", "docopt"}


def _parsed_options(fm: FunctionModel, name: str) -> bool:
    """``name`` is bound to parsed command-line options or a loaded config (``a = parser.parse_args()``,
    ``opt, _ = parser.parse_known_args()``, ``cfg = yaml.safe_load(f)``)."""
    for a in fm.assigns:
        if name in a.names and isinstance(a.value, ast.Call):
            if call_name(a.value) in _PARSERS or (dotted(a.value.func) or "") in _PARSERS:
                return True
    return False


def _walked_outside(fm: FunctionModel, path: ast.AST) -> bool:
    """The path is made from the loop variables of ``for root, _, files in os.walk(sys.argv[1])`` (or a
    ``glob`` of an argument): files found in a folder given from outside."""
    names = _names(path)
    for a in fm.assigns:
        if a.op is None and a.value is not None and set(a.names) & names:
            names |= _names(a.value)
    return any(isinstance(n, (ast.For, ast.AsyncFor)) and _names(n.target) & names and _from_outside(n.iter)
               for n in fm.nodes)


_COUNTER = re.compile(r"rank|index|epoch|step|iter|seed|^num|^n_|_id$|^id$", re.IGNORECASE)


_CONFIG_ROOTS = {"cfg", "config", "conf", "configs", "hparams", "hps", "hp", "cli_args", "FLAGS"}
_ENTRY_RUNNERS = {"CLI", "Fire", "run", "command", "main"}


def _entry_point(fm: FunctionModel) -> bool:
    """The function's parameters are the program's command line: ``CLI(main)`` (jsonargparse), ``fire.Fire(main)``,
    ``typer.run(main)``, or a ``@click.option`` / ``@app.command()`` decorator."""
    name = getattr(fm.node, "name", None)
    if not name or fm.cls is not None:
        return False
    if any(call_name(d if not isinstance(d, ast.Call) else d) in ("option", "argument", "command")
           for d in getattr(fm.node, "decorator_list", [])):
        return True
    return any(isinstance(n, ast.Call) and call_name(n) in _ENTRY_RUNNERS and n.args
               and isinstance(n.args[0], ast.Name) and n.args[0].id == name for n in fm.file.nodes)


def _downloads(fm: FunctionModel) -> bool:
    """The function downloads something (``download_url(url, root)``, ``hf_hub_download(...)``, ``urlopen``)."""
    words = ("download", "urlopen", "urlretrieve")
    return any(isinstance(n, ast.Call) and any(w in call_name(n).lower() for w in words) for n in fm.nodes)


def _shown_outside(fm: FunctionModel | None, path: ast.AST | None, depth: int = 0) -> bool:
    """Positive evidence that the loaded file comes from outside the program: the path is (or is built from, through
    the names assigned in the function and module body) a command-line argument (``args.ckpt``, ``sys.argv``,
    ``opt.weights``, a parameter of a ``CLI(main)`` / ``fire.Fire(main)`` entry point, a parameter whose callers in
    this file pass one), an environment variable, a config value (``cfg.MODEL.weights``), ``input()``, a URL or
    a download (``hf_hub_download``, ``cached_path``, a function that downloads before it loads).  A counter
    formatted into the file name (``args.process_index``, ``opt.epoch``) says which of the program's files, not
    where it comes from."""
    if path is None:
        return False
    if _from_outside(path):
        return True
    if fm is None:
        return False
    pieces = frozenset(p for p in _pieces(fm, path) if not _COUNTER.search(p.split(".")[-1]))
    if _walked_outside(fm, path) or _downloads(fm):
        return True
    roots = {p.split(".")[0] for p in pieces if "." in p and "\0" not in p}
    if roots & _CONFIG_ROOTS or any(p.startswith(("self.cfg.", "self.config.", "self.opt.", "self.args."))
                                    for p in pieces):
        return True
    params = {p.rsplit("\0", 1)[-1] for p in pieces if p.startswith("\0")}
    if params and _entry_point(fm):
        return True
    if params and depth < 2:  # a parameter: what the callers in this file pass for it
        for site in fm.call_sites():
            if isinstance(site.node, ast.Call) and isinstance(fm.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if any(p in params and _shown_outside(site.fm, a, depth + 1) for p, a in bound_args(fm, site.node)):
                    return True
    if any(_parsed_options(scope, root) for root in roots for scope in (fm, fm.file.module)):
        return True
    if {p.rsplit("\0", 1)[-1] for p in pieces if p.startswith("\0")} & {"url", "urls", "model_url", "weights_url"}:
        return True  # ``def load_state_dict_from_url(url): torch.load(cache_url(url))``
    return _outside_pieces(pieces) or any(
        p.endswith("()") and any(w in p.lower() for w in ("download", "hub", "cached_path", "urlopen", "input",
                                                           "cache_url", "fetch"))
        for p in pieces)


_FILE_NAME = re.compile(r"\.(pt|pth|pkl|pickle|ckpt|bin|tar|th|h5|npy|npz|cache|weights|state|dat|sav)$",
                        re.IGNORECASE)


def _file_name_piece(piece: str) -> bool:
    """A piece that names a file: a literal ending in a checkpoint extension (``'%s_net_%s.pth'``,
    ``'model.pt'``) or a constant (``self.MODEL_NAME``, ``CKPT_FILE``)."""
    if "\0" in piece or piece.endswith("()"):
        return False
    last = piece.split(".")[-1]
    return bool(_FILE_NAME.search(piece)) or (last.isupper() and len(last) > 1)


def _same_path_as_a_save(file: FileModel, fm: FunctionModel, path: ast.AST) -> bool:
    """The path is made exactly like a path a function of this file saves to, with a file name the program
    writes (SPADE's ``load_network`` / ``save_network``: ``join(opt.checkpoints_dir, opt.name, '%s_net_%s.pth' %
    (epoch, label))`` in both): the program reads back what it wrote, even when the folder is an argument."""
    pieces = _unscoped(_pieces(fm, path))
    if not any(_file_name_piece(p) for p in pieces):
        return False
    saves = file.memo("tb403_saves", lambda: _file_saves(file))
    if pieces in {_unscoped(saved) for saved in saves}:
        return True
    # the same template in the same folder, the slot filled by another counter or local (``'lstm_' + str(epoch) +
    # '.dat'`` saved, ``'lstm_' + str(args.load_epoch) + '.dat'`` loaded; ``'{}.pth'.format(epoch)`` / ``...(pth)``)
    fixed = _template(_pieces(fm, path, slots=True))
    templates = file.memo("tb403_save_templates", lambda: [_template(t) for t in _file_saves(file, slots=True)])
    return any(_file_name_piece(p) for p in fixed) and fixed in templates


def _template(pieces: frozenset[str]) -> frozenset[str]:
    """The pieces without the variable parts of a file name: locals and parameters, and counters (``epoch``,
    ``args.load_epoch``, ``step``); the literals and the folder attributes stay."""
    out = set()
    for p in pieces:
        last = p.split(".")[-1]
        if "\0" in p or (not _FILE_NAME.search(p) and last.isidentifier() and _COUNTER.search(last)):
            continue
        out.add(p)
    return frozenset(out)


def _class_file_name(fm: FunctionModel, path: ast.AST) -> bool:
    """A method loads a file whose name (a constant or a literal with an extension) a sibling method of the same
    class also saves under (kospeech's ``Checkpoint.load(path)`` reading ``join(path, self.MODEL_NAME)``, which
    ``Checkpoint.save()`` writes)."""
    if not _plain_method(fm):
        return False
    names = {p for p in _unscoped(_pieces(fm, path)) if _file_name_piece(p)}
    if not names:
        return False
    for other in fm.file.functions:
        if other is fm or other.cls is not fm.cls:
            continue
        if any(names & _unscoped(_pieces(other, p)) for p in _save_paths(other)):
            return True
    return False


_EXISTS = {"exists", "isfile", "is_file"}


def _cached_here(fm: FunctionModel, node: ast.AST, path: ast.AST) -> bool:
    """``if os.path.exists(f): x = torch.load(f) else: ...torch.save(x, f)`` (or the else branch hands ``f`` to a
    function of this file that saves to it): a cache the program writes itself."""
    if not isinstance(path, ast.Name):
        return False
    for n in fm.nodes:
        if not isinstance(n, ast.If) or not any(c is node for st in n.body for c in walk(st)):
            continue
        test = [c for c in walk(n.test) if isinstance(c, ast.Call) and call_name(c) in _EXISTS
                and any(isinstance(a, ast.Name) and a.id == path.id for a in c.args)]
        if not test:
            continue
        rest = [c for st in [*n.orelse, *fm.node.body] for c in walk(st) if isinstance(c, ast.Call)] \
            if isinstance(fm.node, (ast.FunctionDef, ast.AsyncFunctionDef)) else \
            [c for st in n.orelse for c in walk(st) if isinstance(c, ast.Call)]
        for c in rest:
            if call_name(c) in _SAVES and any(isinstance(a, ast.Name) and a.id == path.id for a in c.args[1:2]):
                return True
            helper = fm.file.resolve(c, fm)
            if helper is None or not isinstance(helper.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            saved = {p.id for p in _save_paths(helper) if isinstance(p, ast.Name)}
            if any(p in saved and isinstance(a, ast.Name) and a.id == path.id for p, a in bound_args(helper, c)):
                return True
    return False


def _unscoped(pieces: frozenset[str]) -> frozenset[str]:
    """The pieces with parameters named alike in two functions taken as one (``train(self, setting)`` and
    ``predict(self, setting)`` of one class build the same checkpoint path from the same setting)."""
    return frozenset(p.rsplit("\0", 1)[-1] for p in pieces)


def _own_loads(file: FileModel) -> set[frozenset[str]]:
    out = set()
    for fm in file.functions:
        for n in fm.nodes:
            if isinstance(n, ast.Call) and file.imports.qualname(n.func) == "torch.load" and n.args \
                    and _trained_before(fm, n):
                if pieces := _pieces(fm, n.args[0]):
                    out.add(_unscoped(pieces))
    return out


@rule("TB403", "torch-load-unsafe", fix="torch.load(path, map_location=..., weights_only=True)", severity="warning")
def torch_load_unsafe(file: FileModel) -> Iterator[Hit]:
    """``torch.load`` unpickles a file that may come from someone else.

    A checkpoint is a pickle: loading a downloaded file with ``weights_only=False`` runs whatever code
    it contains.  ``weights_only=True`` loads tensors and plain containers only; it is the default from
    torch 2.6.  Reported by default only where the code shows the risk: no ``weights_only`` in a project
    whose packaging files (pyproject.toml, requirements*.txt, setup.py ...) allow a torch older than 2.6,
    on a path the code shows to come from outside the program, and ``weights_only=False`` on such a path.
    Outside means a command-line argument (``args.ckpt``, ``sys.argv``), a value of a user's config file, an
    environment variable, ``input()``, a download or a URL, directly or through the names the function and
    module assign; any other path (a function parameter, an attribute, a path the program builds) is a
    low-confidence finding saying that nothing shows the path comes from outside.  The other
    calls are low-confidence advisories (``--all``): without a version pin a fresh install is current
    torch, and an explicit ``weights_only=False`` on the program's own checkpoint is the user's stated
    choice: so is one on a path given from outside that a function of the file also saves to (file name included)
    or that is a cache (loaded when it exists, else built and saved there; ``--dataset DIR`` holding the
    ``DIR.pt`` the program wrote).  A path made from the same folder or argument as a path the same function saves to
    (``"saved_models/%s/G_%d.pth"`` both loaded and saved, ``scan_checkpoint(args.checkpoint_path)`` beside
    ``torch.save(..., f"{args.checkpoint_path}/g_...")``) is the program's own checkpoint: low confidence, with
    that reason.  Also low: a path made of the same pieces as a path this file saves to elsewhere (a dataset
    class loading the processed ``.pt`` its own ``download()`` wrote, a weight file the script reloads and saves
    under one name) and a resume that restores the optimizer state or step count in a file that trains (not one
    that also builds the model for inference), both unless the path comes from the command line, an environment
    variable or a user's config file (``args.ckpt``, ``json.load(f)["checkpoint_path"]``); a reload of the best
    weights after training in the same function (or the path an object was built with, loaded after its
    ``train*`` / ``fit*`` method ran: ``SentenceRE(..., ckpt=ckpt)``, ``framework.train_model()``), and the same
    path reloaded elsewhere in the file.  A tool that
    loads a file and saves it back (``strip_optimizer``) is not a save of the program's own results.  A path
    returned by a function of this file that saves to it (``f = preprocess(...)``, ``torch.save(data, f); return
    f``) is the program's own file, and so is the path a method loads when a sibling method of the same
    class saves to a path made the same way (``def save(self, path)`` / ``def load(self, path)``; not a
    ``classmethod`` loader, a package's API for a caller's file).  A resume under ``if ...resume...:`` that
    restores the optimizer state or step count is low even when ``--ckpt`` may name the file.  In
    ``torch.load(net.state_dict(), "model.pth")`` (a save mistyped as a load) the path is the second argument.
    Also low: a path parameter whose caller passes the same name to a function of the file that saves to it
    (``train(..., model_save_dir)`` and ``evaluate(..., model_save_dir)``), a file found by ``os.walk`` / ``glob``
    in a folder the program names itself, and an optimizer state handed to ``optimizer.load_state_dict`` or
    ``scatter_full_optim_state_dict`` (a resume); a path made exactly like a path a function of this file
    saves to, file name included (``'%s_net_%s.pth'``), even in a folder given on the command line, also when another
    counter or local fills the name's slot (``'lstm_' + str(epoch) + '.dat'`` saved, ``... str(args.load_epoch) ...``
    loaded; ``'{}.pth'.format(epoch)`` / ``.format(pth)``), a name reassigned between loads read at each load; a file a
    method loads under a file name (a constant such as ``self.MODEL_NAME``, or a literal with a checkpoint
    extension) that a sibling method of the same class saves under; a file loaded only when it exists and
    otherwise computed and saved to it (a cache, ``if os.path.exists(f): torch.load(f) else: torch.save(x, f)``);
    and a module-level constant bound to a path the program names itself (``MODEL_PATH = '../ckpt/model.pt'``).
    Also low: a load handed to ``obj.load_state_dict`` where ``obj`` is made from a class of the file whose
    ``load_state_dict`` restores optimizers (a trainer object's whole training state: a resume of the program's own
    run), and a load under ``if ...resume...:`` (or ``restart``) in a file that trains or a function that builds an
    optimizer, unless the function also takes that option
    as a URL (``args.resume.startswith('https')``, ``load_state_dict_from_url``) or has an evaluation-only flag
    (``args.eval``): there a released checkpoint may be what is passed.  Also low: a loading function whose every
    call in the file passes a path made from where the calling function saves its own checkpoints
    (``inference_all(model, os.path.join(out, name))`` after ``torch.save(..., os.path.join(out, name))``); a
    whole file loaded into an optimizer named so (``self.opt_enc.load_state_dict(state)``).  A checkpoint that
    carries an optimizer state among its entries is no evidence: released checkpoints often do.
    Also low: a path from the command line or a user's config in a project that writes its own checkpoints with
    ``torch.save`` and whose README or docs publish no trained model (no link to a ``.pth`` / ``.ckpt`` file, to
    Google Drive, the Hugging Face hub, release assets or Zenodo; no "pretrained models", "model zoo", "download the
    checkpoints"), when neither the path's names nor its option's help or default (the project's ``add_argument``)
    say pretrained, downloaded or released: a ``play.py -m`` reading what the project's ``train.py`` saved.
    The torch version is read from requirements files, pyproject.toml, setup.py, setup.cfg and
    environment.yml (conda pins ``pytorch=1.7.1`` too).  A ``functools.partial(torch.load, ...)`` is reported
    where the partial is made.

    Wrong::

        state = torch.load(args.checkpoint, map_location="cpu", weights_only=False)

    Right::

        state = torch.load(args.checkpoint, map_location="cpu", weights_only=True)
    """
    params = _parameters_around(file)
    owners = {id(n): fm for fm in file.functions for n in fm.nodes if isinstance(n, ast.Call)}
    for node in file.nodes:
        if not isinstance(node, ast.Call):
            continue
        what = file.imports.qualname(node.func)
        path = node.args[0] if node.args else None
        if what in ("functools.partial", "functools.partialmethod") and node.args \
                and file.imports.qualname(node.args[0]) == "torch.load":
            what, path = "partial(torch.load)", node.args[1] if len(node.args) > 1 else None
        elif what != "torch.load":
            continue
        kw = {k.arg: k.value for k in node.keywords}
        if None in kw:
            continue
        path = path if path is not None else kw.get("f")
        if isinstance(path, ast.Call) and "state_dict" in call_name(path) and len(node.args) > 1:
            path = node.args[1]  # ``torch.load(net.state_dict(), "./model/net.pth")``: a save mistyped as a load
        if "weights_only" not in kw:
            sure = "high" if file.torch_support == OLD_TORCH and not _own_file(path) \
                and not _literal_constant(file, path) else "low"
            why = _own_reason(file, owners.get(id(node)), node, path) if sure == "high" else ""
            if sure == "high" and not why and not _shown_outside(owners.get(id(node)), path):
                why = (" (uncertain: nothing shows the path comes from outside the program: not a command-line "
                       "argument, config value, environment variable, URL or download)")
            elif sure == "high" and not why:
                why = _own_kind_from_outside(file, owners.get(id(node)), path)
            yield Hit(node, f"{what} without weights_only=True unpickles (and can run) arbitrary code on torch < 2.6"
                            f"{why}", confidence="low" if why else sure)
        elif const_value(kw["weights_only"]) is False:
            given = _shown_outside(owners.get(id(node)), path)
            own = _own_path_reason(file, owners.get(id(node)), node, path) if given else ""
            sure = "high" if given and not own else "low"
            unsure = own or ("" if given else (" (uncertain: nothing shows the path comes from outside the program: "
                                               "not a command-line argument, config value, environment variable, URL "
                                               "or download)" if _names(path) & params.get(id(node), set()) else ""))
            yield Hit(node, f"{what}(weights_only=False) unpickles (and can run) arbitrary code"
                            f"{' from a path given from outside' if sure == 'high' else ''}; "
                            f"load a state_dict with weights_only=True{unsure}", confidence=sure)
