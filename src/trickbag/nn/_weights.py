"""Private helpers shared by the weight averagers (:class:`~trickbag.nn.EMA`, :class:`~trickbag.nn.SWA`):
flat tensor lists of a module, and copying an averaged copy's tensors into a live model and back."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor, nn

from trickbag.nn.loading import unwrap


class TensorLists:
    """Flat tensor lists of one module, in ``named_parameters()`` / ``named_buffers()`` order."""

    def __init__(self, module: nn.Module) -> None:
        params: list[tuple[str, Tensor]] = list(module.named_parameters())
        buffers = list(module.named_buffers())
        self.names = [n for n, _ in params] + [n for n, _ in buffers]
        self.shapes = [tuple(t.shape) for _, t in params] + [tuple(t.shape) for _, t in buffers]
        with torch.no_grad():  # FSDP2: this process's shards (views: in-place changes reach the parameters)
            params = [(n, _local(p)) for n, p in params]
        self.float_params: list[Tensor] = [p for _, p in params if p.is_floating_point()]
        self.other_params: list[Tensor] = [p for _, p in params if not p.is_floating_point()]
        self.float_buffers = [b for _, b in buffers if b.is_floating_point()]
        self.other_buffers = [b for _, b in buffers if not b.is_floating_point()]

    def all(self) -> list[Tensor]:
        return self.float_params + self.other_params + self.float_buffers + self.other_buffers


class LiveLists:
    """The (unwrapped) live model's :class:`TensorLists`, cached per module object and checked once
    against the averaged copy's lists ``reference`` (same names and shapes)."""

    def __init__(self, reference: TensorLists, owner: str) -> None:
        self.reference, self.owner = reference, owner
        self.lists: TensorLists | None = None
        self.module: nn.Module | None = None

    def get(self, model: nn.Module) -> TensorLists:
        model = unwrap(model)
        if model is not self.module or self.lists is None:
            live = TensorLists(model)
            if live.names != self.reference.names or live.shapes != self.reference.shapes:
                diff = sorted(set(live.names).symmetric_difference(self.reference.names))[:5]
                raise ValueError(
                    f"model does not have the same parameters/buffers as the one the {self.owner} was built from "
                    f"(differing names, first few: {diff or 'same names, different shapes'})"
                )
            self.lists, self.module = live, model
        return self.lists


def on_device_of(tensors: list[Tensor], like: list[Tensor]) -> list[Tensor]:
    """``tensors`` moved to the device of ``like`` (only when the two lists live apart)."""
    if tensors and like and tensors[0].device != like[0].device:
        return [t.to(like[0].device) for t in tensors]
    return tensors


@torch.no_grad()
def copy_tensors(dst: list[Tensor], src: list[Tensor]) -> None:
    """``dst[i].copy_(src[i])`` for every pair, in place (one ``_foreach_copy_``)."""
    if dst:
        torch._foreach_copy_(dst, on_device_of(src, dst))


@contextmanager
def swapped_tensors(dst: list[Tensor], src: list[Tensor]) -> Iterator[None]:
    """Inside the block ``dst`` holds the values of ``src`` (copied in place); on exit, even on an error,
    ``dst`` gets its own values back bit for bit (they were cloned before the copy)."""
    with torch.no_grad():
        saved = [t.detach().clone() for t in dst]
    copy_tensors(dst, src)
    try:
        yield
    finally:
        copy_tensors(dst, saved)


def _local(t: Tensor) -> Tensor:
    """The shard of a ``DTensor`` this process holds (the same storage); any other tensor itself."""
    return t.to_local() if type(t).__name__ == "DTensor" else t  # type: ignore[attr-defined]


def _sharded(module: nn.Module) -> bool:
    """Whether ``module`` went through FSDP2's ``fully_shard`` (its parameters are ``DTensor``\\ s)."""
    return any(type(p).__name__ == "DTensor" for p in module.parameters())


def shadow_copy(module: nn.Module) -> nn.Module:
    """A copy of ``module``'s weights to average into: ``copy.deepcopy`` of a plain model; for an FSDP2 model
    (which refuses ``deepcopy``) a tree of plain modules holding a clone of each parameter and buffer under the
    same name: the shards of this process only, placed as the live ones (so averaging and swapping stay local),
    with the same ``state_dict`` keys. It has no ``forward``: evaluate the average by swapping it into the model.
    """
    if not _sharded(module):
        return copy.deepcopy(module)
    root = nn.Module()

    def owner(name: str) -> tuple[nn.Module, str]:
        *path, leaf = name.split(".")
        m = root
        for part in path:
            if part not in m._modules:
                m.add_module(part, nn.Module())
            m = m._modules[part]  # type: ignore[assignment]
        return m, leaf

    with torch.no_grad():
        for name, p in module.named_parameters():
            m, leaf = owner(name)
            m.register_parameter(leaf, nn.Parameter(p.detach().clone(), requires_grad=False))
        for name, b in module.named_buffers():
            m, leaf = owner(name)
            m.register_buffer(leaf, b.detach().clone())
    return root
