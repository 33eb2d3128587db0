"""Activation checkpointing of a model's repeated blocks: keep a block's input, recompute its activations in backward.

Chen et al. 2016, "Training deep nets with sublinear memory cost": a checkpointed block keeps only its inputs
for the backward pass and runs its forward a second time there, so the memory its activations took is freed at
the price of one more forward of that block.  The recompute is :func:`torch.utils.checkpoint.checkpoint`
(non-reentrant, ``preserve_rng_state=True``: dropout draws the same masks); what torch does not handle is a
block whose forward changes its buffers — a BatchNorm in train mode would count the batch twice
(``num_batches_tracked``, ``running_mean`` / ``running_var``), and a mask drawn from a generator of its own
(``DropPath(generator=)``) would be drawn anew.  Here every buffer of the block is put back, after the recompute,
to what it was before it, and the generators its modules and their forward hooks hold as attributes replay the
forward's draws, so the trained model is the same, buffers included.  (A generator reached otherwise, e.g. in a
closure, is not seen: pass the block's randomness through the global RNG or a module attribute.)

The block's class ``forward`` is replaced on the instance only: ``state_dict`` keys do not change (a checkpoint
loads with or without it), ``copy.deepcopy`` and ``torch.save(model)`` take the wrapping along, and
:func:`uncheckpoint_blocks` undoes it.
Without gradients (``torch.no_grad``, ``torch.inference_mode``: evaluation) a block runs its plain forward.
Under ``torch.compile`` the checkpointed blocks are traced (the compiled recompute does not update buffers
again), except a block holding generators of its own, which runs its checkpoint eagerly so its draws replay.
"""

from __future__ import annotations

import contextlib
import functools
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

__all__ = ["checkpoint_blocks", "describe_blocks", "find_blocks", "uncheckpoint_blocks"]

_Context = contextlib.AbstractContextManager[Any]


def _generators(block: nn.Module) -> list[torch.Generator]:
    """The ``torch.Generator`` objects that ``block``'s modules and their forward hooks hold as attributes (a
    ``DropPath(generator=)``, :func:`trickbag.nn.add_drop_path`'s hooks)."""
    found: dict[int, torch.Generator] = {}
    for m in block.modules():
        for holder in (m, *m._forward_pre_hooks.values(), *m._forward_hooks.values()):
            for v in getattr(getattr(holder, "__self__", holder), "__dict__", {}).values():
                if isinstance(v, torch.Generator):
                    found[id(v)] = v
    return list(found.values())


class _Recompute:
    """``checkpoint``'s two contexts for one call on ``block``.

    Around the forward: the states of the block's own generators are noted.  Around the recompute: those states
    are set again (the masks drawn are the forward's, as ``preserve_rng_state`` does for the global RNG), and
    after it the generators and every buffer of the block are put back as they were before it (same tensor
    objects, same values: a BatchNorm counts the batch once).
    """

    def __init__(self, block: nn.Module) -> None:
        self.block = block
        self.generators: list[torch.Generator] = []
        self.states: list[torch.Tensor] = []

    @contextlib.contextmanager
    def forward(self) -> Iterator[None]:
        self.generators = _generators(self.block)
        self.states = [g.get_state() for g in self.generators]
        yield

    @contextlib.contextmanager
    def recompute(self) -> Iterator[None]:
        block = self.block
        saved = [(m, name, b, b.clone()) for m in block.modules() for name, b in m._buffers.items() if b is not None]
        now = [g.get_state() for g in self.generators]
        for g, state in zip(self.generators, self.states):
            g.set_state(state)
        try:
            yield
        finally:
            for g, state in zip(self.generators, now):
                g.set_state(state)
            with torch.no_grad():
                for m, name, b, value in saved:
                    m._buffers[name] = b
                    b.copy_(value)


def _contexts(block: nn.Module) -> tuple[_Context, _Context]:
    """``checkpoint``'s ``context_fn``."""
    r = _Recompute(block)
    return r.forward(), r.recompute()


def _eager_checkpoint(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
    return checkpoint(type(self).forward, self, *args, use_reentrant=False,
                      context_fn=functools.partial(_contexts, self), **kwargs)


_compiler_skips = torch.compiler.disable(_eager_checkpoint)  # a compiled model runs it as it is, untraced


def _checkpointed_forward(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
    """The forward a checkpointed block gets (bound to it): its class's forward under ``checkpoint``."""
    if not torch.is_grad_enabled():
        return type(self).forward(self, *args, **kwargs)
    if not torch.compiler.is_compiling():
        return _eager_checkpoint(self, *args, **kwargs)
    if _generators(self):  # compiled, the recompute would draw from them anew: this block is left to eager mode
        return _compiler_skips(self, *args, **kwargs)
    # compiled: the recompute is functional and does not touch the buffers again
    return checkpoint(type(self).forward, self, *args, use_reentrant=False, **kwargs)


def _is_container(m: nn.Module) -> bool:
    return isinstance(m, (nn.Sequential, nn.ModuleList))


def _is_block(m: nn.Module) -> bool:
    """A layer of its own layers with parameters, and not itself a container of such blocks."""
    if not any(True for _ in m.children()) or not any(True for _ in m.parameters()):
        return False
    return not (_is_container(m) and any(_is_block(c) for c in m.children()))


def _collect(module: nn.Module, prefix: str, out: list[str]) -> None:
    for name, child in module.named_children():
        full = f"{prefix}{name}"
        if _is_container(module) and _is_block(child):
            out.append(full)
        else:
            _collect(child, f"{full}.", out)


def find_blocks(model: nn.Module) -> list[str]:
    """The names of ``model``'s repeated blocks, in order: each child of an ``nn.Sequential`` or ``nn.ModuleList``
    that has parameters and layers of its own (a torchvision ResNet's ``layer1.0`` ... ``layer4.1``, a
    ``Sequential(conv, bn, relu)`` stage); a container of such blocks is searched, not taken whole.

    >>> from torch import nn
    >>> stage = lambda c: nn.Sequential(nn.Conv2d(c, c, 3), nn.BatchNorm2d(c), nn.ReLU())
    >>> find_blocks(nn.Sequential(stage(3), nn.MaxPool2d(2), stage(3), nn.Flatten()))
    ['0', '2']
    >>> find_blocks(nn.Sequential(nn.Linear(4, 4), nn.ReLU()))  # plain layers only: nothing to checkpoint
    []
    """
    out: list[str] = []
    _collect(model, "", out)
    return out


def _by_class(model: nn.Module, classes: tuple[type[nn.Module], ...]) -> list[str]:
    out: list[str] = []

    def walk(module: nn.Module, prefix: str) -> None:
        for name, child in module.named_children():
            if isinstance(child, classes):
                out.append(f"{prefix}{name}")
            else:
                walk(child, f"{prefix}{name}.")

    walk(model, "")
    return out


def _selected(model: nn.Module, blocks: Iterable[str | type[nn.Module]] | None) -> list[str]:
    """The block names ``blocks`` asks for (``None``: :func:`find_blocks`), each checked to exist."""
    if blocks is None:
        return find_blocks(model)
    if isinstance(blocks, (str, type)):
        blocks = [blocks]
    wanted = list(blocks)
    classes = tuple(b for b in wanted if isinstance(b, type) and issubclass(b, nn.Module))
    names = [b for b in wanted if isinstance(b, str)]
    if len(classes) + len(names) != len(wanted):
        bad = next(b for b in wanted if not isinstance(b, str) and b not in classes)
        raise TypeError(f"blocks= takes module names (str) or nn.Module classes, got {bad!r}")
    modules = dict(model.named_modules())
    for n in names:
        if not n or n not in modules:
            raise ValueError(f"blocks= names {n!r}, which is not a submodule of {type(model).__name__}; "
                             f"its blocks: {find_blocks(model) or 'none found'}")
    found = set(names) | set(_by_class(model, classes))
    return [n for n in modules if n in found]  # in the model's order


class _CheckpointedForward:
    """The ``forward`` a checkpointed block holds: a plain object, so ``copy.deepcopy`` and ``pickle`` (a whole
    ``torch.save(model)``) take it along, bound to the copy."""

    def __init__(self, block: nn.Module) -> None:
        self.block = block

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _checkpointed_forward(self.block, *args, **kwargs)


def _is_checkpointed(m: nn.Module) -> bool:
    return isinstance(vars(m).get("forward"), _CheckpointedForward)


def _wrap(block: nn.Module, name: str) -> None:
    if _is_checkpointed(block):
        return
    if "forward" in vars(block):
        raise ValueError(f"block {name!r} ({type(block).__name__}) already has a forward of its own on the "
                         "instance; checkpoint_blocks wraps the class's forward only")
    block.forward = _CheckpointedForward(block)


def checkpoint_blocks(model: nn.Module, every: int = 1,
                      blocks: Iterable[str | type[nn.Module]] | None = None) -> list[str]:
    """Checkpoint one of every ``every`` blocks of ``model`` (the 1st, the ``every + 1``-th, ...) in place; return
    their names.

    ``blocks``: the candidates, as module names or ``nn.Module`` classes (``None``: :func:`find_blocks`).  The
    result is unchanged — gradients, dropout masks, BatchNorm running statistics — only the memory kept for
    backward shrinks and each checkpointed block runs its forward twice in a training step.  Calling it again
    on a checkpointed block changes nothing; :func:`uncheckpoint_blocks` undoes it.  ``ValueError`` when there
    is no block to checkpoint.

    >>> import torch
    >>> from torch import nn
    >>> stage = lambda: nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.ReLU())
    >>> net = nn.Sequential(stage(), stage(), stage(), nn.Linear(4, 2))
    >>> checkpoint_blocks(net, every=2)
    ['0', '2']
    >>> net(torch.randn(8, 4)).sum().backward()
    >>> int(net[0][1].num_batches_tracked)  # once, though the block ran twice
    1
    >>> uncheckpoint_blocks(net)
    ['0', '2']
    """
    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
        raise ValueError(f"every must be an int >= 1 (checkpoint one block in every), got {every!r}")
    names = _selected(model, blocks)
    if not names:
        what = "the blocks= given match no submodule" if blocks is not None else (
            "no nn.Sequential or nn.ModuleList in it holds a block (a child with parameters and layers of its own)")
        raise ValueError(f"{type(model).__name__} has nothing to checkpoint: {what}; pass blocks= (module names or "
                         "classes)")
    chosen = names[::every]
    modules = dict(model.named_modules())
    for n in chosen:
        _wrap(modules[n], n)
    return chosen


def uncheckpoint_blocks(model: nn.Module) -> list[str]:
    """Give the checkpointed blocks of ``model`` their plain forward back; return their names."""
    out = []
    for name, m in model.named_modules():
        if _is_checkpointed(m):
            del m.forward
            out.append(name)
    return out


def describe_blocks(model: nn.Module, names: list[str]) -> str:
    """``'Sequential x4: features.0, features.1, ...'``: the classes and names of the blocks ``names``, for a note.

    >>> from torch import nn
    >>> stage = lambda: nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    >>> describe_blocks(nn.Sequential(stage(), stage(), nn.Linear(4, 2)), ["0", "1"])
    'Sequential x2: 0, 1'
    """
    modules = dict(model.named_modules())
    kinds = Counter(type(modules[n]).__name__ for n in names)
    shown = ", ".join(names if len(names) <= 8 else [*names[:4], "...", *names[-2:]])
    return f"{', '.join(f'{k} x{v}' for k, v in kinds.items())}: {shown}"
