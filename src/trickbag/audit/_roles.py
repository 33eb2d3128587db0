"""What a name is in a training loop (optimizer, scheduler, scaler, EMA, model, loss function), from
the constructor assigned to it, its annotation, or the names people commonly use."""

from __future__ import annotations

import ast
import functools
import re

from trickbag.audit._ast import Imports, call_name, dotted, name_tokens

__all__ = [
    "OPTIMIZER",
    "SCHEDULER",
    "SCALER",
    "EMA",
    "MODEL",
    "LOSS",
    "role_by_name",
    "role_by_constructor",
    "innermost_call",
    "is_loss_value",
    "CE_LOSSES",
    "NLL_LOSSES",
    "LOSS_FUNCTIONS",
    "EVAL_NAME",
    "TRAIN_FUNCTION",
]

OPTIMIZER, SCHEDULER, SCALER, EMA, MODEL, LOSS = "optimizer", "scheduler", "scaler", "ema", "model", "loss"
NOT_AN_OBJECT = "data"  # a name assigned plain data (a dict, a string): no name-based role

_OPTIMIZER_CLASSES = {
    "SGD", "Adam", "AdamW", "Adamax", "Adagrad", "Adadelta", "RMSprop", "Rprop", "LBFGS", "NAdam", "RAdam",
    "SparseAdam", "ASGD", "Lion", "LAMB", "Lamb", "Adafactor", "SAM", "Muon", "Lookahead", "Ranger", "Adan",
    "ZeroRedundancyOptimizer", "FusedAdam", "FusedLAMB", "AdamW8bit", "Adam8bit", "Prodigy", "Shampoo",
}
_SCHEDULER_CLASSES = {"ReduceLROnPlateau", "CosineAnnealingWarmRestarts", "ChainedScheduler", "LRSchedule"}
_SCALER_CLASSES = {"GradScaler", "ShardedGradScaler"}
_EMA_CLASSES = {"EMA", "SWA", "ModelEma", "ModelEmaV2", "ModelEmaV3", "ExponentialMovingAverage",
                "AveragedModel", "EMAModel", "EmaModel"}
_MODEL_CALLS = {"Sequential", "ModuleList", "DistributedDataParallel", "DataParallel", "DDP", "FSDP",
                "FullyShardedDataParallel", "create_model", "build_model", "from_pretrained",
                "SmallCNN", "SignalCNN", "Linear", "Conv2d", "Conv1d", "LSTM", "GRU", "Transformer"}
CE_LOSSES = {"cross_entropy", "CrossEntropyLoss"}
NLL_LOSSES = {"nll_loss", "NLLLoss", "kl_div", "KLDivLoss"}
#: ``torch.nn.functional`` losses (and their ``nn.*Loss`` classes): a call of one computes a loss
LOSS_FUNCTIONS = CE_LOSSES | NLL_LOSSES | {
    "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits",
    "ctc_loss", "poisson_nll_loss", "gaussian_nll_loss", "cosine_embedding_loss", "margin_ranking_loss",
    "hinge_embedding_loss", "multilabel_margin_loss", "soft_margin_loss", "multilabel_soft_margin_loss",
    "multi_margin_loss", "triplet_margin_loss", "triplet_margin_with_distance_loss",
    "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss", "BCEWithLogitsLoss", "CTCLoss", "PoissonNLLLoss",
    "GaussianNLLLoss", "CosineEmbeddingLoss", "MarginRankingLoss", "HingeEmbeddingLoss", "MultiLabelMarginLoss",
    "SoftMarginLoss", "MultiLabelSoftMarginLoss", "MultiMarginLoss", "TripletMarginLoss",
    "TripletMarginWithDistanceLoss"}
_LOSS_CLASSES = LOSS_FUNCTIONS | {"FocalLoss", "SoftTargetCrossEntropy", "LabelSmoothingCrossEntropy"}

_ROLE_WORDS = [
    (EMA, re.compile(r"^(ema|swa)(_?model|_?net)?s?$|^(model|net)_?(ema|swa)$|_ema$|^ema_|averaged_model|avg_model")),
    (SCALER, re.compile(r"scaler$|^scaler|grad_?scaler")),
    (SCHEDULER, re.compile(r"sched|^lr_?scheduler|^scheduler")),
    (
        OPTIMIZER,
        re.compile(r"^(opt|optim|optimizer|optimiser)(s|_?[a-z0-9]{1,3}|_\w+)?$|_(opt|optim|optimizer|optimiser)s?$"),
    ),
    (
        MODEL,
        re.compile(
            r"^(model|net|network|encoder|decoder|backbone|classifier|generator|discriminator|"
            r"critic|student|unet|vae|transformer|cnn|resnet|mlp|ddp_model)(_?[a-z0-9]+)?$|"
            r"_(model|net|network|encoder|decoder|backbone|classifier|generator|discriminator|critic)$|"
            r"^net_?[gd]$|^[gd]_?net$|^model_?[gd]$|^net[a-z0-9]?$"
        ),
    ),
]
_NOT_OPTIMIZER = {"option", "options", "optional", "optimal", "opts_file", "optimize"}

#: evaluation-function names (``evaluate``, ``validate_one_epoch``, ``run_eval``, ``test`` ...)
EVAL_NAME = re.compile(
    r"^(eval|evaluate|evaluation|valid|validate|validation|val|test|testing)"
    r"(_(epoch|one_epoch|loop|model|step|fn|func|loader|all|once|net|batch|run|set|data))?$|"
    r"^(run|do|perform|compute)_(eval|evaluation|validation|validate|test|val)\w*$|"
    r"^(predict|prediction|predictions|inference|infer|check_accuracy|compute_accuracy|get_accuracy|"
    r"calc_accuracy|calculate_accuracy|evaluate_accuracy|accuracy|compute_metrics|test_accuracy)(_\w+)?$|"
    r"_(eval|evaluate|evaluation|validate|validation|accuracy|inference)$")
#: helper names that train (their body is not visible): ``train_one_epoch``, ``train_step``, ``fit_epoch``
TRAIN_FUNCTION = re.compile(r"^_?train(_one)?(_epoch|_step|_loop|_batch|_iter|_iteration)?s?$|^(fit|run)_(one_)?epoch$")


#: words that make a name something *about* a model/optimizer (``model_state``, ``opt_level``), not one
_NOT_AN_OBJECT = {"state", "states", "dict", "path", "paths", "name", "names", "cfg", "config", "conf", "args",
                  "kwargs", "dir", "file", "type", "params", "parameters", "output", "outputs", "ckpt",
                  "checkpoint", "weights", "sd", "info", "fn", "func", "class", "id", "size", "list", "registry",
                  "version", "str", "url", "level", "hparams", "spec", "factory", "builder", "summary", "stats",
                  "results", "collect", "collector", "hook", "hooks", "logger", "saver"}


@functools.lru_cache(maxsize=65536)
def role_by_name(name: str | None) -> str | None:
    """The role suggested by the last component of a dotted name (``self.opt_g`` -> optimizer); cached."""
    if not name:
        return None
    last = name.split(".")[-1].replace("[]", "").lower()
    if last in _NOT_OPTIMIZER or last in {"self", "cls"} or set(name_tokens(last)) & _NOT_AN_OBJECT:
        return None
    for role, pattern in _ROLE_WORDS:
        if pattern.search(last):
            return role
    return None


def innermost_call(value: ast.AST) -> ast.Call | None:
    """``Net().to(dev).train()`` -> the ``Net()`` call; ``torch.compile(Net())`` stays the outer call."""
    node = value
    while (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Call)
        and node.func.attr
        in {
            "to",
            "cuda",
            "cpu",
            "train",
            "eval",
            "float",
            "half",
            "double",
            "bfloat16",
            "requires_grad_",
            "share_memory",
            "to_empty",
        }
    ):
        node = node.func.value
    return node if isinstance(node, ast.Call) else None


def role_by_constructor(value: ast.AST | None, imports: Imports, module_classes: set[str]) -> str | None:
    """The role of whatever ``value`` constructs (``torch.optim.SGD(...)`` -> optimizer).  Kept on the node for the
    file's tables (the flow model and several rules ask it of the same calls)."""
    if value is None:
        return None
    cached = value.__dict__.get("_tb_role")
    if cached is not None and cached[0] is imports and cached[1] is module_classes:
        return cached[2]
    role = _role_by_constructor(value, imports, module_classes)
    value.__dict__["_tb_role"] = (imports, module_classes, role)
    return role


def _role_by_constructor(value: ast.AST, imports: Imports, module_classes: set[str]) -> str | None:
    if isinstance(value, ast.IfExp):
        return role_by_constructor(value.body, imports, module_classes) or \
            role_by_constructor(value.orelse, imports, module_classes)
    call = innermost_call(value)
    if call is None:
        return None
    qual = imports.qualname(call.func)
    last = qual.split(".")[-1] if qual else ""
    if last == "compile" and call.args:  # torch.compile(model) is a model, torch.compile(fn) is not
        inner = call.args[0]
        return role_by_constructor(inner, imports, module_classes) if isinstance(inner, ast.Call) \
            else (MODEL if role_by_name(dotted(inner)) == MODEL else None)
    return _role_of_class(last, qual, module_classes)


#: what ``X.from_pretrained(...)`` builds when ``X`` is not a model: tokenizers, processors, configs, pipelines
_NOT_MODEL_PRETRAINED = re.compile(r"Tokenizer|Processor|Config|Extractor|Pipeline|Scheduler|ImageProcessor|"
                                   r"tokenizer|processor|config|pipeline|pipe\b")


def _role_of_class(last: str, qual: str, module_classes: set[str]) -> str | None:
    low = last.lower()
    if last in ("from_pretrained", "from_config", "from_single_file") \
            and _NOT_MODEL_PRETRAINED.search(qual.rpartition(".")[0]):
        return NOT_AN_OBJECT
    if last in _SCALER_CLASSES:
        return SCALER
    if last in _EMA_CLASSES:
        return EMA
    if last in _SCHEDULER_CLASSES or "lr_scheduler" in qual or last.endswith("LR") or "schedule" in low \
            or "Scheduler" in last:
        return SCHEDULER
    if last in _OPTIMIZER_CLASSES or (".optim." in f".{qual}." and last[:1].isupper()) \
            or re.search(r"(create|build|get|make)_optimi[sz]er", low) or last.endswith("Optimizer"):
        return OPTIMIZER
    if last in _LOSS_CLASSES or last.endswith("Loss"):
        return LOSS
    if last in _MODEL_CALLS or last in module_classes or qual.startswith(("torchvision.models", "timm.")):
        return MODEL
    return None


def annotation_role(annotation: ast.AST | None) -> str | None:
    """The role of an annotated argument (``optimizer: torch.optim.Optimizer``)."""
    name = dotted(annotation) or ""
    last = name.split(".")[-1]
    if last in {"Optimizer"} or last in _OPTIMIZER_CLASSES:
        return OPTIMIZER
    if last in {"LRScheduler", "_LRScheduler"} or last in _SCHEDULER_CLASSES:
        return SCHEDULER
    if last in _SCALER_CLASSES:
        return SCALER
    if last in {"Module"}:
        return MODEL
    return None


_LOSS_WORDS = {"loss", "criterion", "cross", "entropy", "nll", "mse", "bce", "focal", "l1", "kl", "div", "huber"}


def is_loss_value(node: ast.AST, role_of) -> bool:
    """True for an expression that computes a loss: ``criterion(out, y)``, ``F.cross_entropy(...)``,
    ``outputs.loss``, ``loss_a + 0.1 * loss_b`` (``role_of`` maps a dotted name to its role).
    Iterative: a 1000-term sum does not reach the recursion limit."""
    todo = [node]
    while todo:
        n = todo.pop()
        if isinstance(n, ast.BinOp):
            todo += [n.right, n.left]
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in {"mean", "sum"}:
            todo.append(n.func.value)
        elif _loss_leaf(n, role_of):
            return True
    return False


def _loss_leaf(node: ast.AST, role_of) -> bool:
    if isinstance(node, ast.Attribute) and node.attr == "loss":
        return True
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value == "loss":
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Call):  # nn.BCELoss()(out, y)
        inner = call_name(node.func)
        return inner in _LOSS_CLASSES or inner.endswith("Loss")
    if isinstance(node, ast.Call):
        name = dotted(node.func) or ""
        if role_of(name) == LOSS:
            return True
        tokens = name_tokens(name.split(".")[-1])
        if tokens and tokens[-1] in _NOT_LOSS_HEADS:
            return False  # ``loss_count(...)``, ``loss_weight(...)``: a count or a weight for the loss, not a loss
        return bool(set(tokens) & {"loss", "criterion", "crit"}) or name.split(".")[-1] in LOSS_FUNCTIONS \
            or name.split(".")[-1].endswith("_loss")
    return False


#: last words of a function name that make it return something about a loss, not a loss
_NOT_LOSS_HEADS = {"count", "counts", "num", "number", "size", "sizes", "weight", "weights", "mask", "masks",
                   "scale", "scales", "ratio", "names", "keys", "history", "dict", "config", "type", "types"}
