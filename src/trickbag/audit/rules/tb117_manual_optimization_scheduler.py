"""TB117 manual-optimization-scheduler: A LightningModule with manual optimization builds a scheduler it never steps.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from trickbag.audit._ast import call_name, const_value, dotted
from trickbag.audit._flow import FileModel
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []

#: torch's LR schedulers and the Hugging Face schedule factories
_SCHEDULER = re.compile(r"^(StepLR|MultiStepLR|ExponentialLR|CosineAnnealingLR|CosineAnnealingWarmRestarts|OneCycleLR|"
                        r"CyclicLR|LambdaLR|MultiplicativeLR|LinearLR|ConstantLR|PolynomialLR|SequentialLR|ChainedScheduler|"
                        r"ReduceLROnPlateau|get_\w*schedule\w*)$")
#: a name a stepped scheduler goes by (``sch.step()``, ``self.scheduler_g.step()``, ``lr_sched.step()``)
_SCHEDULER_NAME = re.compile(r"sch|lr", re.IGNORECASE)


@rule("TB117", "manual-optimization-scheduler", fix="step it yourself in training_step: sch = self.lr_schedulers(); "
      "sch.step() (per batch, or when self.trainer.is_last_batch for a per-epoch schedule)")
def manual_optimization_scheduler(file: FileModel) -> Iterator[Hit]:
    """A LightningModule with manual optimization builds a scheduler it never steps.

    With ``self.automatic_optimization = False`` Lightning calls neither ``optimizer.step()`` nor
    ``lr_scheduler.step()``: the module does both. Its documentation says so ("you must call
    ``lr_scheduler.step()`` yourself"), yet a scheduler returned from ``configure_optimizers`` looks handled, and
    the learning rate then stays at its first value for the whole run: warm-up never ends, decay never starts.

    Reported at the scheduler's construction, in a class that turns automatic optimization off (the attribute
    set to ``False``, or a property returning ``False``) and builds a torch LR scheduler (or a Hugging Face
    ``get_*_schedule*``), when nothing in the class steps a scheduler: no ``.step()`` on a name that says
    scheduler or LR (``sch.step()``, ``self.scheduler_g.step()``) and no ``self.lr_schedulers()`` call (the way
    a manual-optimization module fetches them to step).

    Wrong::

        class GAN(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.automatic_optimization = False

            def configure_optimizers(self):
                opt = torch.optim.Adam(self.parameters(), lr=2e-4)
                return [opt], [torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.999)]

            def training_step(self, batch, batch_idx):
                opt = self.optimizers()
                opt.zero_grad()
                self.manual_backward(self.loss(batch))
                opt.step()

    Right::

        class GAN(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.automatic_optimization = False

            def configure_optimizers(self):
                opt = torch.optim.Adam(self.parameters(), lr=2e-4)
                return [opt], [torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.999)]

            def training_step(self, batch, batch_idx):
                opt = self.optimizers()
                opt.zero_grad()
                self.manual_backward(self.loss(batch))
                opt.step()
                if self.trainer.is_last_batch:
                    self.lr_schedulers().step()
    """
    if not any(_names_manual(n) for n in file.nodes):  # no class of this file can turn automatic optimization off
        return
    for cls in (n for n in file.nodes if isinstance(n, ast.ClassDef)):
        if not _manual(cls):
            continue
        built = [n for n in ast.walk(cls) if isinstance(n, ast.Call) and _SCHEDULER.match(call_name(n) or "")]
        if built and not _steps_a_scheduler(cls):
            yield Hit(built[0], f"{cls.name} optimizes manually (automatic_optimization is False), so Lightning "
                                f"never steps this {call_name(built[0])}, and nothing in the class does: the learning "
                                "rate stays at its first value")


def _names_manual(node: ast.AST) -> bool:
    """The node names ``automatic_optimization`` (an attribute, a name or a function): without one in the file no
    class of it can turn automatic optimization off, and the per-class walks are skipped."""
    return ((isinstance(node, ast.Attribute) and node.attr == "automatic_optimization")
            or (isinstance(node, ast.Name) and node.id == "automatic_optimization")
            or (isinstance(node, ast.FunctionDef) and node.name == "automatic_optimization"))


def _manual(cls: ast.ClassDef) -> bool:
    """``self.automatic_optimization = False`` somewhere in the class, or a property of that name returning False."""
    for node in ast.walk(cls):
        if isinstance(node, ast.Assign) and const_value(node.value) is False and any(
                (dotted(t) or "").endswith("automatic_optimization") for t in node.targets):
            return True
        if isinstance(node, ast.FunctionDef) and node.name == "automatic_optimization" and any(
                isinstance(r, ast.Return) and r.value is not None and const_value(r.value) is False
                for r in ast.walk(node)):
            return True
    return False


def _steps_a_scheduler(cls: ast.ClassDef) -> bool:
    for node in ast.walk(cls):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        if node.func.attr == "lr_schedulers":
            return True
        if node.func.attr == "step" and _SCHEDULER_NAME.search(dotted(node.func.value) or ""):
            return True
    return False
