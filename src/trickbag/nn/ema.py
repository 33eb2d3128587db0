"""Exponential moving average (EMA) of a model's weights, updated after each optimizer step."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

import torch
from torch import Tensor, nn

from trickbag.nn._weights import LiveLists, TensorLists, copy_tensors, on_device_of, shadow_copy, swapped_tensors
from trickbag.nn.loading import unwrap

__all__ = ["EMA"]

BufferMode = Literal["copy", "average"]
_BUFFER_MODES = ("copy", "average")


class EMA:
    """Keep an exponential moving average of a model's weights: ``ema = decay * ema + (1 - decay) * w``.

    Source: Polyak & Juditsky 1992 (iterate averaging); the exponential form with decay
    warm-up follows TensorFlow's ``ExponentialMovingAverage`` and timm's ``ModelEmaV2``.
    Evaluate with the averaged weights (``ema.module``, or ``with ema.swapped(model):``);
    they are usually better than the raw weights late in training.

    **Update.** Call :meth:`update` once after every ``optimizer.step()``.  Every
    ``every``-th call averages; the others only count.  An averaging update is one
    ``torch._foreach_lerp_`` over all floating parameters (no Python loop over
    parameters in the math); the tensor lists are built once and cached.

    **Decay warm-up** (on by default, as in the recipes' ``tricks.ema.warmup``). With ``n`` the
    number of averaging updates already done (0 for the first):

    - ``warmup=True`` (default): ``d_n = min(decay, (1 + n) / (10 + n))`` (TensorFlow's
      ``num_updates`` rule: early averages forget the random initialisation quickly; without it a
      0.999 average is still 90 % the random start after 100 updates, and evaluates near chance);
    - ``warmup=False``: ``d_n = decay`` (the plain exponential average of every update);
    - ``warmup=W`` (int > 0): ``d_n = decay * (1 - exp(-n / W))`` (YOLOv5's ``ModelEMA``,
      time constant ``W`` averaging updates; the first update copies the weights).

    **Which tensors.** Every floating parameter is averaged, *whether or not it has*
    ``requires_grad``: a frozen parameter is treated exactly like a trainable one (so it
    equals the live value while it stays frozen, and is averaged from the moment it is
    unfrozen).  Non-floating parameters are copied.  Buffers: ``"copy"`` copies them from
    the live model (BatchNorm running statistics are already averages), ``"average"``
    averages floating buffers too; integer buffers (``num_batches_tracked``) are always copied.

    **Wrappers.** DDP / DataParallel (``.module``) and ``torch.compile`` (``._orig_mod``)
    are unwrapped, both at construction and in :meth:`update`.  A model sharded with FSDP2
    (``fully_shard``) gets a sharded shadow: each process averages its own shards (nothing is
    gathered; ``ema.module`` then holds the weights but has no ``forward``: evaluate with
    :meth:`swapped`), and ``state_dict()`` holds ``DTensor``\\ s.  The live model's tensor
    lists are cached per module object; replacing a submodule after construction is not
    seen (create a new EMA).

    Args:
        model: the live model; it is deep-copied (``ema.module``: eval mode,
            ``requires_grad=False``).
        decay: ``d`` in ``[0, 1]``; 0.999 to 0.9999 are usual (time constant ``1/(1-d)`` updates).
        warmup: ``True`` (default), ``False`` or an int ``W > 0`` (see above).
        every: average on every ``every``-th call of :meth:`update` (``decay`` is per averaging update).
        buffers: ``"copy"`` or ``"average"``.
        device: keep ``ema.module`` on this device (e.g. ``"cpu"`` to save accelerator memory);
            ``None`` keeps the model's device.

    >>> model = torch.nn.Linear(2, 1)
    >>> ema = EMA(model, decay=0.5, warmup=False)
    >>> with torch.no_grad():
    ...     _ = model.weight.add_(2.0)
    >>> ema.update(model)
    >>> torch.allclose(ema.module.weight, model.weight - 1.0)     # 0.5 * old + 0.5 * new
    True
    >>> with ema.swapped(model):
    ...     torch.equal(model.weight, ema.module.weight)
    True
    >>> ema.num_updates
    1
    """

    def __init__(
        self,
        model: nn.Module,
        decay: float = 0.9999,
        *,
        warmup: bool | int = True,
        every: int = 1,
        buffers: BufferMode = "copy",
        device: torch.device | str | None = None,
    ) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        if isinstance(decay, bool) or not isinstance(decay, (int, float)) or not 0.0 <= decay <= 1.0:
            raise ValueError(f"decay must be a float in [0, 1], got {decay!r}")
        if not isinstance(warmup, (bool, int)) or (not isinstance(warmup, bool) and warmup <= 0):
            raise ValueError(f"warmup must be False, True or an int number of updates > 0, got {warmup!r}")
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"every must be an int >= 1, got {every!r}")
        if buffers not in _BUFFER_MODES:
            raise ValueError(f"buffers must be one of {_BUFFER_MODES}, got {buffers!r}")

        self.decay = float(decay)
        self.warmup = warmup
        self.every = every
        self.buffers = buffers
        self.num_updates = 0  # calls of update()
        self.num_averages = 0  # averaging updates done

        source = unwrap(model)
        self.module: nn.Module = shadow_copy(source)
        if device is not None:
            self.module.to(device)
        self.module.eval()
        self.module.requires_grad_(False)
        for p in self.module.parameters():
            p.grad = None
        self._ema = TensorLists(self.module)
        self._live = LiveLists(self._ema, "EMA")
        self._lists_for(source)

    # -- internals -------------------------------------------------------------------------

    def _lists_for(self, model: nn.Module) -> TensorLists:
        """Cached tensor lists of the (unwrapped) live model, checked against the EMA copy once."""
        return self._live.get(model)

    @staticmethod
    def _on_device_of(tensors: list[Tensor], like: list[Tensor]) -> list[Tensor]:
        """``tensors`` moved to the device of ``like`` (only when ``device=`` put them apart)."""
        return on_device_of(tensors, like)

    def decay_at(self, n: int) -> float:
        """Decay used by the averaging update that follows ``n`` earlier averaging updates.

        >>> EMA(torch.nn.Linear(1, 1), decay=0.999, warmup=True).decay_at(0)
        0.1
        """
        if self.warmup is True:
            return min(self.decay, (1.0 + n) / (10.0 + n))
        if self.warmup is not False:
            return self.decay * (1.0 - math.exp(-n / self.warmup))
        return self.decay

    # -- public API ------------------------------------------------------------------------

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        """Count one optimizer step; on every ``every``-th call, average ``model`` into ``ema.module``."""
        self.num_updates += 1
        if self.num_updates % self.every:
            return
        live, ema = self._lists_for(model), self._ema
        d = self.decay_at(self.num_averages)
        if ema.float_params:
            torch._foreach_lerp_(ema.float_params, self._on_device_of(live.float_params, ema.float_params), 1.0 - d)
        if ema.other_params:
            torch._foreach_copy_(ema.other_params, self._on_device_of(live.other_params, ema.other_params))
        if ema.float_buffers:
            src = self._on_device_of(live.float_buffers, ema.float_buffers)
            if self.buffers == "average":
                torch._foreach_lerp_(ema.float_buffers, src, 1.0 - d)
            else:
                torch._foreach_copy_(ema.float_buffers, src)
        if ema.other_buffers:
            torch._foreach_copy_(ema.other_buffers, self._on_device_of(live.other_buffers, ema.other_buffers))
        self.num_averages += 1

    @torch.no_grad()
    def copy_to(self, model: nn.Module) -> None:
        """Copy the averaged parameters and buffers into ``model`` in place (``Tensor.copy_``)."""
        copy_tensors(self._lists_for(model).all(), self._ema.all())

    @contextmanager
    def swapped(self, model: nn.Module) -> Iterator[nn.Module]:
        """Context manager: ``model`` holds the averaged weights inside, its own weights after.

        The raw parameters and buffers are cloned, the averaged ones copied in place
        (so optimizers and hooks keep pointing at the same tensors), and the raw ones copied
        back on exit, even when the block raises.  Yields ``model``.
        """
        with swapped_tensors(self._lists_for(model).all(), self._ema.all()):
            yield model

    def state_dict(self) -> dict[str, Any]:
        """Averaged weights (``"module"``), counters, and the settings they were made with."""
        return {
            "module": self.module.state_dict(),
            "num_updates": self.num_updates,
            "num_averages": self.num_averages,
            "decay": self.decay,
            "warmup": self.warmup,
            "every": self.every,
            "buffers": self.buffers,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore weights and counters saved by :meth:`state_dict` (settings stay as constructed)."""
        missing = [k for k in ("module", "num_updates", "num_averages") if k not in state_dict]
        if missing:
            raise ValueError(f"EMA state_dict lacks {missing}; expected the output of EMA.state_dict()")
        self.module.load_state_dict(state_dict["module"])
        self.num_updates = int(state_dict["num_updates"])
        self.num_averages = int(state_dict["num_averages"])

    def __repr__(self) -> str:
        return (
            f"EMA(decay={self.decay}, warmup={self.warmup}, every={self.every}, buffers={self.buffers!r}, "
            f"num_updates={self.num_updates})"
        )
