"""TB120 frozen-batchnorm-training: Frozen BatchNorm layers stay in train mode and keep updating their statistics.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from trickbag.audit._ast import call_name, const_value, dotted, name_tokens
from trickbag.audit._flow import BACKWARD, STEP, FileModel
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []

#: torchvision / timm constructors of networks with BatchNorm
_BN_ZOO = re.compile(r"^(resnet\d+|resnext\w+|wide_resnet\w+|vgg\d+_bn|densenet\d+|mobilenet\w*|efficientnet\w*|"
                     r"regnet\w+|inception_v3|googlenet|shufflenet\w*|mnasnet\w*|convnext\w*_bn)$")
_BN_WORDS = {"bn", "batchnorm", "batch_norm", "bns"}


def _has_batchnorm(file: FileModel, target: str) -> bool:
    """``target`` (``model.bn``, ``model``) is or holds BatchNorm, as far as the file shows: its name says so
    (``bn``), it is a torchvision / timm network that has it, or a class of the file built into it uses it."""
    last = target.split(".")[-1]
    if set(name_tokens(last)) & _BN_WORDS or last.lower().startswith("bn"):
        return True
    for n in file.nodes:
        if isinstance(n, ast.Assign) and any(dotted(t) == target for t in n.targets) and isinstance(n.value, ast.Call):
            inner = n.value
            while isinstance(inner.func, ast.Attribute) and inner.func.attr in ("to", "cuda") \
                    and isinstance(inner.func.value, ast.Call):
                inner = inner.func.value
            name = call_name(inner)
            if _BN_ZOO.match(name) or (name == "create_model" and inner.args
                                       and "resnet" in str(const_value(inner.args[0]) or "")):
                return True
            cls = file.classes.get(name)
            if cls is not None and any(isinstance(c, ast.Call) and "BatchNorm" in call_name(c) for c in ast.walk(cls)):
                return True
    return False


def _frozen(file: FileModel) -> Iterator[tuple[str, ast.AST]]:
    """(module expression, statement) for each freezing of a module's parameters: ``m.requires_grad_(False)``,
    ``m.apply(lambda x: x.requires_grad_(False))``, ``for p in m.parameters(): p.requires_grad = False`` (also over
    ``named_parameters()``, under an ``if`` on the name)."""
    for n in file.nodes:
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.args \
                and const_value(n.args[0]) is False and n.func.attr == "requires_grad_":
            if isinstance(n.func.value, ast.Call) or not dotted(n.func.value):
                continue
            yield dotted(n.func.value) or "", n
        elif isinstance(n, ast.Call) and call_name(n) == "apply" and isinstance(n.func, ast.Attribute) and n.args \
                and isinstance(n.args[0], ast.Lambda) and any(
                    isinstance(c, ast.Call) and call_name(c) == "requires_grad_" and c.args
                    and const_value(c.args[0]) is False for c in ast.walk(n.args[0])):
            if dotted(n.func.value):
                yield dotted(n.func.value) or "", n
        elif isinstance(n, ast.For) and isinstance(n.iter, ast.Call) \
                and call_name(n.iter) in ("parameters", "named_parameters") and isinstance(n.iter.func, ast.Attribute):
            owner = dotted(n.iter.func.value)
            for st in ast.walk(n):
                if isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Attribute) \
                        and st.targets[0].attr == "requires_grad" and const_value(st.value) is False and owner:
                    yield owner, st
                    break


def _switched_back(file: FileModel, target: str) -> bool:
    """The file puts ``target`` (or a part of it) in eval mode with no ``train()`` of it or of a module holding it
    later in that function (``model.bn.eval()``; ``model.eval()`` before a loop that never calls ``train()``)."""
    def holds(outer: str, inner: str) -> bool:
        return inner == outer or inner.startswith(outer + ".")

    for fm in file.functions:
        switches = sorted((getattr(n, "lineno", 0), n.func.attr, dotted(n.func.value) or "") for n in fm.nodes
                          if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and not n.args
                          and n.func.attr in ("eval", "train"))
        trains = [getattr(e.node, "lineno", 0) for e in fm.events if e.kind in (BACKWARD, STEP)] + [
            n.lineno for n in fm.nodes if isinstance(n, ast.Call) and call_name(n) == "fit"]
        for line, attr, recv in switches:
            if attr == "eval" and (holds(target, recv) or holds(recv, target)) and not any(
                    a == "train" and ln > line and holds(r, target) for ln, a, r in switches) \
                    and (not trains or line < max(trains)):  # not the eval() for predictions after training
                return True
    return False


@rule("TB120", "frozen-batchnorm-training", fix="put the frozen part in eval mode after every model.train(): "
      "model.backbone.eval() (or override train() to keep it there)")
def frozen_batchnorm_training(file: FileModel) -> Iterator[Hit]:
    """Frozen BatchNorm layers stay in train mode and keep updating their statistics.

    ``requires_grad = False`` stops the optimizer, not BatchNorm: in train mode every forward still normalises with
    the batch's statistics and overwrites ``running_mean`` / ``running_var`` with them.  A backbone "frozen" for
    linear evaluation or fine-tuning drifts to the new data's statistics, so the frozen features are not the
    pretrained ones, and its evaluation (which uses the running statistics) is off.

    Reported at the freezing statement (``m.requires_grad_(False)``, ``m.apply(lambda x: x.requires_grad_(False))``,
    ``for p in m.parameters(): p.requires_grad = False``) in a file that trains (a backward or an optimizer step, or
    a Lightning ``trainer.fit``, which puts the whole model in train mode), when the frozen module holds
    BatchNorm as far as the file shows (its name says ``bn``, a torchvision / timm network with BatchNorm, a class of
    the file that builds one) and nothing in the file puts it (or the part of it frozen) in eval mode and keeps it
    there: a whole-model ``model.eval()`` for validation followed by ``model.train()`` does not count.

    Wrong::

        model = torchvision.models.resnet50(weights="IMAGENET1K_V2")
        for name, p in model.named_parameters():
            if not name.startswith("fc."):
                p.requires_grad = False
        for epoch in range(epochs):
            model.train()
            for x, y in loader:
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()

    Right::

        model = torchvision.models.resnet50(weights="IMAGENET1K_V2")
        for name, p in model.named_parameters():
            if not name.startswith("fc."):
                p.requires_grad = False
        for epoch in range(epochs):
            model.eval()  # the frozen backbone keeps its statistics; only fc trains (it has no BatchNorm)
            for x, y in loader:
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
    """
    if not any(e.kind in (BACKWARD, STEP) for fm in file.functions for e in fm.events) and not any(
            isinstance(n, ast.Call) and call_name(n) == "fit" and isinstance(n.func, ast.Attribute)
            and "trainer" in (dotted(n.func.value) or "").lower() for n in file.nodes):
        return  # trains here: a backward / step, or a Lightning ``trainer.fit(model, ...)`` (which calls train())
    for target, node in _frozen(file):
        if target in ("self", "p", "param", "m") or not _has_batchnorm(file, target) or _switched_back(file, target):
            continue
        yield Hit(node, f"{target}'s parameters are frozen but its BatchNorm layers stay in train mode: their running "
                        f"statistics keep following the training batches; call {target}.eval() after model.train()")
