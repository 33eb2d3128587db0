"""Shared pieces of the trick tests: tiny recipes, a plug-in made of callables, build helpers, naive references."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from trickbag.plugin.events import Event
from trickbag.plugin.interface import Plugin
from trickbag.recipe import load_recipe
from trickbag.train.build import build
from trickbag.train.parts import model_for


def tiny_base(epochs: int) -> list[str]:
    """Fake data (4 classes, [1, 8, 8], ~69 training samples in batches of 16), a narrow BN CNN."""
    return [
        "data.name=fake", "data.num_samples=96", "data.batch_size=16", f"train.epochs={epochs}",
        "train.device=cpu", "log.tensorboard=false", "run.progress=false", "run.plots=false",
        "schedule.warmup_epochs=0", "model.kwargs={width: 8}", "optim.lr=0.1",
    ]


class Hook(Plugin):
    """A plug-in made of the given ``on_<event>`` callables."""

    def __init__(self, **handlers):
        self._events = set(handlers)
        for event, fn in handlers.items():
            setattr(self, "on_" + event, fn)

    def handles(self, event: Event) -> bool:
        return event.value in self._events


def build_tiny(base: list[str], *overrides: str, hook: Plugin | None = None):
    """Build the digits recipe with ``base`` + ``overrides``; returns (trainer, ctx, recipe)."""
    recipe = load_recipe("digits", [*base, *overrides])
    trainer, ctx = build(recipe)
    if hook is not None:
        trainer.add_plugin(hook)
    return trainer, ctx, recipe


def tiny_run(*overrides: str, hook: Plugin | None = None, epochs: int = 1):
    """:func:`build_tiny` on :func:`tiny_base` of ``epochs``; returns (trainer, ctx, recipe)."""
    return build_tiny(tiny_base(epochs), *overrides, hook=hook)


def group_of(optimizer):
    """id(param) -> its param group."""
    return {id(p): g for g in optimizer.param_groups for p in g["params"]}


def plugin_of(trainer, cls):
    """The trainer's plug-in of class ``cls``."""
    return next(p for p in trainer.plugins if isinstance(p, cls))


def snapshot(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def fresh_model(recipe, ctx, state):
    """A new model of the recipe holding ``state``, in eval mode."""
    model = model_for(recipe, ctx.data)
    model.load_state_dict(state)
    return model.eval()


def naive_eval(model, dataset):
    """Mean cross-entropy and accuracy over the whole dataset, in one float64 pass."""
    x = torch.stack([dataset[i][0] for i in range(len(dataset))])
    y = torch.stack([torch.as_tensor(dataset[i][1]) for i in range(len(dataset))])
    with torch.no_grad():
        out = model.eval()(x).double()
    return float(F.cross_entropy(out, y)), float((out.argmax(1) == y).double().mean())


#: a tiny run: fake data (4 classes, [1, 8, 8], about 69 training samples), one epoch, nothing written
BASE = [
    "data.name=fake", "data.num_samples=96", "data.batch_size=16", "train.epochs=1", "train.device=cpu",
    "log.tensorboard=false", "run.progress=false", "run.plots=false", "schedule.warmup_epochs=0",
]
C = 4  # classes of the fake data source

#: plain SGD at a constant LR: an update is exactly w -= lr * grad
PLAIN_SGD = ["optim.momentum=0", "optim.nesterov=false", "optim.weight_decay=0", "schedule.name=constant"]


def build_run(*overrides, first=None, last=None):
    """(trainer, ctx) for the fake-data recipe; ``first`` runs before every trick, ``last`` after them."""
    trainer, ctx = build(load_recipe("digits", [*BASE, *overrides]))
    if first is not None:
        trainer.plugins.insert(0, first)
    if last is not None:
        trainer.plugins.append(last)
    trainer._build_dispatch()
    return trainer, ctx


def batches_around(*overrides):
    """Train one epoch; return ([(x_before, y_before, x_after, y_after, model_input)] per batch, trainer, ctx):
    the batch before every trick, after all of them, and what the model was given."""
    before, after, seen = [], [], []
    first = Hook(batch_start=lambda s: before.append((s.batch[0].clone(), s.batch[1].clone())))
    last = Hook(batch_start=lambda s: after.append((s.batch[0].clone(), s.batch[1].clone())))
    trainer, ctx = build_run(*overrides, first=first, last=last)
    handle = trainer.model.register_forward_pre_hook(lambda m, a: seen.append(a[0].clone()) if m.training else None)
    state = trainer.fit()
    handle.remove()
    assert len(before) == len(after) == len(seen) == len(ctx.train_loader) > 1
    assert all(math.isfinite(row["train/loss"]) for row in state.history)
    return [(*b, *a, s) for b, a, s in zip(before, after, seen)], trainer, ctx


def grads_of(state):
    """The gradients of the optimizer's parameters (None where a parameter has none), cloned."""
    return [p.grad.detach().clone() if p.grad is not None else None
            for g in state.optimizer.param_groups for p in g["params"]]


def naive_norm(grads):
    """The global L2 norm of ``grads``, in float64."""
    return math.sqrt(sum(float((g.double() ** 2).sum()) for g in grads if g is not None))


def record_losses(state, out):
    """LOSS-time record (first pass only): output, targets, inputs and the loss that is back-propagated."""
    if not state.closure_pass:
        out.append((state.output.detach().clone(), state.batch[1].clone(), state.batch[0].clone(),
                    state.loss.detach().clone()))


def onehot(y, k=C):
    return F.one_hot(y, k).float()


def mixup_reference(x0, y0, x1, k=C):
    """Recover each sample's partner j and lam from x1[i] = lam * x0[i] + (1 - lam) * x0[j]; return the
    soft targets lam * onehot(y_i) + (1 - lam) * onehot(y_j) [N, k] and the list of lam of mixed samples."""
    n = x0.shape[0]
    flat0, flat1 = x0.reshape(n, -1).double(), x1.reshape(n, -1).double()
    targets, lams = [], []
    for i in range(n):
        if torch.allclose(flat1[i], flat0[i], atol=1e-6, rtol=0):  # unmixed, or its own partner
            targets.append(onehot(y0[i], k))
            continue
        best = None
        for j in range(n):
            if j == i:
                continue
            d = flat0[i] - flat0[j]
            r = flat1[i] - flat0[j]
            lam = float((r @ d) / (d @ d))
            resid = float((r - lam * d).norm())
            if best is None or resid < best[0]:
                best = (resid, j, lam)
        resid, j, lam = best
        assert resid < 1e-4, "each mixed sample is a convex combination of two samples of the batch"
        lams.append(lam)
        targets.append(lam * onehot(y0[i], k) + (1 - lam) * onehot(y0[j], k))
    return torch.stack(targets), lams


def naive_focal(out, q, gamma, factor=None):
    """Per-sample softmax focal loss -sum_c factor_c q_c (1 - p_c)^gamma log p_c (float64)."""
    p = torch.softmax(out.double(), 1)
    terms = -q.double() * (1 - p) ** gamma * torch.log(p)
    if factor is not None:
        terms = terms * factor.double()
    return terms.sum(1)


def naive_kd(student, teacher, temperature):
    """T^2 * KL(softmax(t / T) || softmax(s / T)), mean over samples (Hinton et al. 2015)."""
    p_t = torch.softmax(teacher.double() / temperature, 1)
    log_q = torch.log_softmax(student.double() / temperature, 1)
    return (p_t * (torch.log(p_t) - log_q)).sum(1).mean() * temperature**2


TEACHER_MODULE = '''
import torch

def teacher(classes=4):
    torch.manual_seed(123)
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, classes), torch.nn.Dropout(0.5))

def wrong_classes():
    return teacher(classes=5)

def not_a_module():
    return 3
'''


def write_teacher_module(tmp_path, monkeypatch, name="tb_teachers"):
    """An importable module with teacher functions; returns its name."""
    (tmp_path / f"{name}.py").write_text(TEACHER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name
