"""Drop path (stochastic depth): drop whole residual branches per sample while training, scaled to keep the mean."""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Sequence
from typing import Any, Literal

import torch
from torch import Tensor, nn

__all__ = ["DropPath", "DropPathHooks", "add_drop_path", "depth_rates", "drop_path", "residual_blocks"]

Mode = Literal["row", "batch"]
Schedule = Literal["linear", "uniform"]


def _check(p: float, mode: str) -> None:
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= float(p) <= 1.0:
        raise ValueError(f"drop_path: p must be a number in [0, 1], got {p!r}")
    if mode not in ("row", "batch"):
        raise ValueError(f"drop_path: mode must be 'row' or 'batch', got {mode!r}")


def drop_path(
    x: Tensor, p: float, mode: Mode = "row", *, training: bool = True, generator: torch.Generator | None = None
) -> Tensor:
    """Zero ``x`` per sample (``"row"``) or as a whole (``"batch"``) with probability ``p``, the rest scaled by 1/(1-p).

    Stochastic depth, Huang et al. 2016, "Deep Networks with Stochastic Depth", applied to the output of a
    residual branch (``x + drop_path(f(x), p)``). The same semantics as :func:`torchvision.ops.stochastic_depth`
    (which draws from the global RNG), with the randomness from ``generator``: one Bernoulli draw of survival
    ``1 - p`` per sample (``"row"``: a ``[N, 1, ...]`` mask) or one for the batch (``"batch"``), in ``x``'s dtype,
    drawn on the generator's device and moved to ``x``'s. ``training=False`` or ``p=0`` returns ``x`` itself;
    ``p=1`` zeroes everything.

    Args:
        x: ``[N, ...]``, the output of a residual branch.
        p: drop probability in ``[0, 1]``.
        mode: ``"row"`` (each sample on its own) or ``"batch"`` (the whole batch at once).
        training: ``False`` is the identity (evaluation).
        generator: source of the mask (the global RNG when ``None``).

    Returns:
        A tensor of ``x``'s shape and dtype.

    >>> g = torch.Generator().manual_seed(3)
    >>> drop_path(torch.ones(4, 2), 0.5, generator=g)     # each row kept (x2) or dropped
    tensor([[2., 2.],
            [2., 2.],
            [0., 0.],
            [2., 2.]])
    >>> drop_path(torch.ones(2), 0.5, training=False)
    tensor([1., 1.])
    """
    _check(p, mode)
    if not training or p == 0.0:
        return x
    survival = 1.0 - float(p)
    size = [x.shape[0]] + [1] * (x.dim() - 1) if mode == "row" else [1] * x.dim()
    device = generator.device if generator is not None else x.device
    noise = torch.empty(size, dtype=x.dtype, device=device).bernoulli_(survival, generator=generator)
    if survival > 0.0:
        noise.div_(survival)
    return x * noise.to(x.device)


class DropPath(nn.Module):
    """:func:`drop_path` as a module (identity in ``eval()``), like :class:`torchvision.ops.StochasticDepth`.

    >>> branch = nn.Sequential(nn.Linear(4, 4), DropPath(0.2, generator=torch.Generator().manual_seed(0)))
    >>> x = torch.randn(3, 4)
    >>> torch.equal(branch.eval()(x), branch[0](x))
    True
    """

    def __init__(self, p: float, mode: Mode = "row", *, generator: torch.Generator | None = None) -> None:
        super().__init__()
        _check(p, mode)
        self.p, self.mode, self.generator = float(p), mode, generator

    def forward(self, x: Tensor) -> Tensor:
        return drop_path(x, self.p, self.mode, training=self.training, generator=self.generator)

    def extra_repr(self) -> str:
        return f"p={self.p}, mode={self.mode}"


def _known_blocks() -> dict[type, str]:
    """Residual block classes whose branch ends in a named child: the drop goes on that child's output."""
    from torchvision.models.resnet import BasicBlock, Bottleneck

    return {BasicBlock: "bn2", Bottleneck: "bn3"}


def _branch_end(module: nn.Module) -> str | None:
    for cls, child in _known_blocks().items():
        if isinstance(module, cls):
            return child
    return None


def residual_blocks(model: nn.Module, blocks: Sequence[str] | None = None) -> list[tuple[str, nn.Module]]:
    """``(name, module)`` of the residual blocks of ``model``, in ``model.named_modules()`` (definition) order.

    ``blocks=None``: torchvision's ResNet blocks (``BasicBlock``, ``Bottleneck``; their subclasses too).
    Otherwise the modules whose class name is in ``blocks`` (a block inside another block is not counted twice).

    >>> import torchvision
    >>> [n for n, _ in residual_blocks(torchvision.models.resnet18())][:3]
    ['layer1.0', 'layer1.1', 'layer2.0']
    """
    names = None if blocks is None else set(blocks)
    out: list[tuple[str, nn.Module]] = []
    for name, m in model.named_modules():
        hit = _branch_end(m) is not None if names is None else type(m).__name__ in names
        if hit and not any(name.startswith(prev + ".") for prev, _ in out):
            out.append((name, m))
    return out


class _Hook:
    """Forward hook of one block: the drop on the branch's output, for the module it was put on only.

    A deep copy of the model (EMA, SWA) shares the hook, which does nothing there: the averaged copies are not
    regularised, and do not draw from the generator.
    """

    def __init__(self, owner: nn.Module, p: float, mode: Mode, generator: torch.Generator | None,
                 residual: bool, name: str) -> None:
        self.owner = weakref.ref(owner)
        self.p, self.mode, self.generator, self.residual, self.name = p, mode, generator, residual, name

    def __deepcopy__(self, memo: dict[int, Any]) -> _Hook:
        return self

    def __call__(self, module: nn.Module, args: tuple[Any, ...], output: Any) -> Any:
        if module is not self.owner() or not module.training or self.p == 0.0:
            return None
        if not self.residual:
            return drop_path(output, self.p, self.mode, generator=self.generator)
        x = args[0] if args else None
        if not isinstance(x, Tensor) or not isinstance(output, Tensor) or x.shape != output.shape:
            got = list(output.shape) if isinstance(output, Tensor) else type(output).__name__
            want = list(x.shape) if isinstance(x, Tensor) else type(x).__name__
            raise ValueError(f"drop_path: block {self.name!r} ({type(module).__name__}) returns {got} for an input "
                             f"{want}; a named block must return input + branch(input), of the input's shape")
        return x + drop_path(output - x, self.p, self.mode, generator=self.generator)


@dataclasses.dataclass
class DropPathHooks:
    """What :func:`add_drop_path` installed: the drop rate of each block by module name, and how to take it off."""

    rates: dict[str, float]
    handles: list[Any]

    def remove(self) -> None:
        """Take the drops off the model."""
        for h in self.handles:
            h.remove()
        self.handles = []


def depth_rates(rate: float, n: int, schedule: Schedule = "linear") -> list[float]:
    """Drop rate of each of ``n`` blocks: ``"linear"``: block ``i`` gets ``rate * i / (n - 1)`` (0 for the first,
    ``rate`` for the last; ``torch.linspace(0, rate, n)`` as timm and torchvision's ConvNeXt); ``"uniform"``: ``rate``.

    >>> depth_rates(0.3, 4)
    [0.0, 0.1, 0.2, 0.3]
    """
    if schedule not in ("linear", "uniform"):
        raise ValueError(f"drop_path: schedule must be 'linear' or 'uniform', got {schedule!r}")
    if schedule == "uniform" or n == 1:
        return [float(rate)] * n
    return [float(rate) * i / (n - 1) for i in range(n)]


def add_drop_path(
    model: nn.Module,
    rate: float,
    *,
    mode: Mode = "row",
    schedule: Schedule = "linear",
    blocks: Sequence[str] | None = None,
    generator: torch.Generator | None = None,
) -> DropPathHooks:
    """Drop the residual branches of ``model``'s blocks while it trains (forward hooks; state-dict keys unchanged).

    Stochastic depth (Huang et al. 2016) from outside the model: for torchvision's ``BasicBlock`` /
    ``Bottleneck`` the drop goes on the output of the branch's last BatchNorm (``bn2`` / ``bn3``), before the
    shortcut is added (where timm's ResNet puts it); for the classes named in ``blocks`` the block must return
    ``x + f(x)`` and returns ``x + drop_path(out - x)`` instead. Block ``i`` of ``n`` (definition order) drops with
    :func:`depth_rates` ``(rate, n, schedule)[i]``, every sample on its own (``"row"``) or the batch at once. In
    ``eval()`` the model is unchanged; deep copies of it (EMA, SWA) are never dropped.

    >>> import torchvision
    >>> net = torchvision.models.resnet18(num_classes=3)
    >>> hooks = add_drop_path(net, 0.2, generator=torch.Generator().manual_seed(0))
    >>> round(hooks.rates["layer4.1"], 3), len(hooks.rates)
    (0.2, 8)
    >>> hooks.remove()
    """
    _check(rate, mode)
    found = residual_blocks(model, blocks)
    if not found:
        what = "torchvision BasicBlock / Bottleneck" if blocks is None else f"class {sorted(set(blocks))}"
        raise ValueError(f"drop_path: {type(model).__name__} has no residual blocks ({what}) to drop")
    rates = depth_rates(rate, len(found), schedule)
    out = DropPathHooks({}, [])
    for (name, block), p in zip(found, rates):
        end = _branch_end(block)
        target = getattr(block, end) if end is not None else block
        hook = _Hook(target, p, mode, generator, residual=end is None, name=name)
        out.handles.append(target.register_forward_hook(hook))
        out.rates[name] = p
    return out
