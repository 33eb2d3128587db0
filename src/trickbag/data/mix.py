"""Mixup, CutMix and a training-loop callable that picks one of them per batch."""

from __future__ import annotations

import functools
import math
import struct
import threading
from numbers import Real
from typing import Any, cast

import torch
from torch import Tensor

from trickbag.data.encoding import check_num_classes, check_smoothing, one_hot

__all__ = ["mixup", "cutmix", "MixupCutmix"]

# Speed notes (benchmarks/kernels.py, docs/benchmarks.md section 2).  On small batches a call is
# dominated by per-op overhead, not by bytes: every tensor op costs microseconds however small its
# tensor.  Hence the random numbers are drawn by refilling one cached 1-element tensor (not by
# allocating one per draw), the targets are written with one fill and two scatters (not built from
# a one-hot matrix by five [N, C] passes), and CutMix gathers the partners' boxes straight into the
# result.  Every shortcut gives the same numbers, bit for bit, from the same generator state as the
# plain tensor formulas (tests/data/test_mix.py checks them against those formulas).


# --------------------------------------------------------------------------- sampling
def _device_of(generator: torch.Generator | None) -> torch.device:
    return generator.device if generator is not None else torch.device("cpu")


class _Reader:
    """``.item(0)`` of a 1-element tensor off the CPU (on the CPU a NumPy view of it plays this part)."""

    __slots__ = ("tensor",)

    def __init__(self, tensor: Tensor) -> None:
        self.tensor = tensor

    def item(self, _index: int) -> float:
        return self.tensor.item()


_LOCAL = threading.local()  # per thread: {(device, dtype): (1-element tensor, reader)}


def _scalar_buffer(device: torch.device, dtype: torch.dtype) -> tuple[Tensor, Any]:
    try:
        cache = _LOCAL.buffers
    except AttributeError:
        cache = _LOCAL.buffers = {}
    buf = cache.get((device, dtype))
    if buf is None:
        with torch.inference_mode(False):  # a normal tensor: usable in and out of inference mode
            t = torch.empty(1, dtype=dtype, device=device)
        buf = cache[(device, dtype)] = (t, t.numpy() if t.device.type == "cpu" else _Reader(t))
    return buf


def _sigmoid(v: float) -> float:
    """``1 / (1 + exp(-v))`` in float64: what torch's CPU kernel computes for a 1-element tensor (its
    scalar path calls the C library's ``exp``, as ``math.exp`` does; tested bit for bit)."""
    try:
        return 1.0 / (1.0 + math.exp(-v))
    except OverflowError:  # exp(-v) = inf in C
        return 0.0


class _Draws:
    """Single random numbers from ``generator``, each exactly what ``torch.rand(1)`` / ``torch.randn(1)`` /
    ``torch.randint`` would return, at a fraction of their cost.

    Those factories allocate a 1-element tensor and fill it with ``uniform_`` / ``normal_`` /
    ``random_``.  Here one 1-element tensor per device and dtype is kept per thread and refilled
    in place by the same ops, so the generator advances exactly as before; on the CPU the value
    is read through a NumPy view of it (no second tensor op, as ``.item()`` would be).
    """

    __slots__ = ("generator", "device", "_cpu", "_t64", "_v64")

    def __init__(self, generator: torch.Generator | None) -> None:
        self.generator = generator
        self.device = _device_of(generator)
        self._cpu = self.device.type == "cpu"
        self._t64, self._v64 = _scalar_buffer(self.device, torch.float64)

    def rand(self) -> float:
        """``float(torch.rand(1, generator=g))`` (default dtype)."""
        t, v = _scalar_buffer(self.device, torch.get_default_dtype())
        t.uniform_(generator=self.generator)
        return v.item(0)

    def rand64(self) -> float:
        """``float(torch.rand(1, generator=g, dtype=torch.float64))``."""
        self._t64.uniform_(generator=self.generator)
        return self._v64.item(0)

    def randn64(self) -> float:
        """``float(torch.randn(1, generator=g, dtype=torch.float64))``."""
        self._t64.normal_(generator=self.generator)
        return self._v64.item(0)

    def randint(self, high: int) -> int:
        """``int(torch.randint(0, high, (1,), generator=g))``."""
        t, v = _scalar_buffer(self.device, torch.int64)
        t.random_(0, high, generator=self.generator)
        return v.item(0)

    def beta(self, a: float, b: float) -> float:
        """One ``Beta(a, b)`` draw, ``sigmoid(log Ga - log Gb)``: the λ of a batch (see :func:`_log_gamma`)."""
        diff = _log_gamma_one(a, self) - _log_gamma_one(b, self)
        if self._cpu:
            return _sigmoid(diff)
        self._t64.fill_(diff).sigmoid_()  # on the generator's device, as torch.sigmoid always ran it
        return self._v64.item(0)


def _log_gamma(shape: float, n: int, generator: torch.Generator | None) -> Tensor:
    """Draw ``log G`` for ``n`` samples ``G ~ Gamma(shape, 1)`` in float64, using only ``generator``.

    Marsaglia & Tsang (2000), "A simple method for generating gamma variables",
    with their boost ``Gamma(a) = Gamma(a + 1)·U^(1/a)`` for ``a < 1`` done in
    log space so tiny shapes (``a = 0.1``) neither underflow nor give ``0/0``.
    ``torch.distributions`` cannot take a generator, hence this sampler.
    """
    device = _device_of(generator)
    a = shape + 1.0 if shape < 1.0 else shape
    d = a - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    out = torch.empty(n, dtype=torch.float64, device=device)
    todo = torch.arange(n, device=device)
    while todo.numel() > 0:
        m = todo.numel()
        z = torch.randn(m, generator=generator, dtype=torch.float64, device=device)
        u = torch.rand(m, generator=generator, dtype=torch.float64, device=device)
        v = (1.0 + c * z) ** 3
        pos = v > 0
        log_v = torch.log(torch.where(pos, v, torch.ones_like(v)))
        ok = pos & (torch.log(u) < 0.5 * z * z + d - d * v + d * log_v)
        out[todo[ok]] = math.log(d) + log_v[ok]
        todo = todo[~ok]
    if shape < 1.0:
        u = torch.rand(n, generator=generator, dtype=torch.float64, device=device)
        out = out + torch.log(u) / shape
    return out


def _log_gamma_one(shape: float, draws: _Draws) -> float:
    """One draw of :func:`_log_gamma` (same random numbers in the same order, same acceptance test) in Python floats."""
    a = shape + 1.0 if shape < 1.0 else shape
    d = a - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    t, v, g, log = draws._t64, draws._v64, draws.generator, math.log
    while True:
        t.normal_(generator=g)
        z = v.item(0)
        t.uniform_(generator=g)
        u = v.item(0)
        cube = (1.0 + c * z) ** 3
        if cube > 0:
            log_v = log(cube)
            if (log(u) if u > 0 else -math.inf) < 0.5 * z * z + d - d * cube + d * log_v:
                break
    out = log(d) + log_v
    if shape < 1.0:
        t.uniform_(generator=g)
        u = v.item(0)
        out += (log(u) if u > 0 else -math.inf) / shape
    return out


def sample_beta(a: float, b: float, n: int, generator: torch.Generator | None) -> Tensor:
    """Draw ``n`` samples of ``Beta(a, b)`` as float64, as ``Ga / (Ga + Gb)`` computed in log space."""
    return torch.sigmoid(_log_gamma(a, n, generator) - _log_gamma(b, n, generator))


# --------------------------------------------------------------------------- checks
def _check_alpha(name: str, alpha: object, *, allow_zero: bool) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, Real):
        raise TypeError(f"{name} must be a float, got {alpha!r} ({type(alpha).__name__})")
    alpha = float(alpha)
    if not math.isfinite(alpha) or alpha < 0 or (alpha == 0 and not allow_zero):
        allowed = ">= 0 (0 disables it)" if allow_zero else "> 0 (or pass lam= explicitly)"
        raise ValueError(f"{name} must be {allowed}, got {alpha}")
    return alpha


def _check_prob(name: str, p: object) -> float:
    if isinstance(p, bool) or not isinstance(p, Real):
        raise TypeError(f"{name} must be a float in [0, 1], got {p!r} ({type(p).__name__})")
    if not 0.0 <= float(p) <= 1.0:
        raise ValueError(f"{name} must be a float in [0, 1], got {p}")
    return float(p)


def _check_lam(lam: object) -> float:
    if isinstance(lam, Tensor) and lam.numel() == 1:
        lam = lam.item()
    if isinstance(lam, bool) or not isinstance(lam, Real):
        raise TypeError(f"lam must be a float in [0, 1] or None, got {lam!r} ({type(lam).__name__})")
    if not 0.0 <= float(lam) <= 1.0:
        raise ValueError(f"lam must be a float in [0, 1], got {lam}")
    return float(lam)


def _check_batch(x: object, min_dim: int, fn: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}: x must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() < min_dim:
        raise ValueError(
            f"{fn}: x must have a batch dimension first and at least {min_dim} dims, got shape {tuple(x.shape)}"
        )
    if x.shape[0] == 0:
        raise ValueError(f"{fn}: x has an empty batch (shape {tuple(x.shape)})")
    return x


def _check_inplace(inplace: object, fn: str) -> bool:
    if not isinstance(inplace, bool):
        raise TypeError(f"{fn}: inplace must be True or False, got {inplace!r} ({type(inplace).__name__})")
    return inplace


def _check_targets(
    y: object, n: int, num_classes: int, device: torch.device, fn: str
) -> tuple[Tensor | None, Tensor | None]:
    """Validate ``y``: integer labels ``[N]`` -> ``(labels as int64, None)``; soft targets ``[N, C]`` -> ``(None, y)``.

    The targets are written on ``device`` (the batch's).  On the CPU the scatter that writes them
    checks the label range (see :func:`_targets`); elsewhere it is checked here, first.
    """
    if not isinstance(y, Tensor):
        raise TypeError(f"{fn}: y must be a torch.Tensor, got {type(y).__name__}")
    if y.dtype == torch.int64 and y.dim() == 1 and y.shape[0] == n and device.type == "cpu":
        return y, None  # the common case, in four attribute reads
    if y.is_floating_point():
        if y.dim() != 2 or y.shape != (n, num_classes):
            raise ValueError(
                f"{fn}: soft targets y must have shape [N, num_classes] = [{n}, {num_classes}], got {tuple(y.shape)}"
            )
        return None, y
    if y.dim() != 1 or y.shape[0] != n:
        raise ValueError(f"{fn}: integer labels y must have shape [N] = [{n}], got {tuple(y.shape)}")
    if y.dtype == torch.bool or y.is_complex():
        one_hot(y, num_classes)  # raises its TypeError naming the dtype
    if device.type != "cpu":  # an out-of-range index would be a device-side assert there: check first
        error = _label_range_error(y, num_classes)
        if error is not None:
            raise error
    return y.long(), None


def _label_range_error(labels: Tensor, num_classes: int) -> ValueError | None:
    lo, hi = (t.item() for t in torch.aminmax(labels))
    if lo < 0 or hi >= num_classes:  # the check and message of one_hot
        return ValueError(f"labels must be in [0, num_classes={num_classes}), found label {lo if lo < 0 else hi}")
    return None


# --------------------------------------------------------------------------- targets
_F32 = struct.Struct("f")


def _f32(v: float) -> float:
    """``v`` rounded to the nearest float32 (as a Python float)."""
    return _F32.unpack(_F32.pack(v))[0]


@functools.lru_cache(maxsize=64)
def _smoothing_coefficients(smoothing: float, num_classes: int) -> tuple[float, float, float]:
    """``(fl(1-ε), fl(ε/C), smooth(1))``: the float32 factors of ``t·(1-ε) + ε/C`` as torch rounds them."""
    scale, offset = _f32(1.0 - smoothing), _f32(smoothing / num_classes)
    return scale, offset, _f32(scale + offset)


def _increment(off: float, first: float, second: float, both: float) -> float | None:
    """A float32 ``v`` with ``fl(off + v) = second`` and ``fl(first + v) = both``, if one is found."""
    for v in (_f32(second - off), _f32(both - first)):
        if _f32(off + v) == second and _f32(first + v) == both:
            return v
    return None


def _targets(
    labels: Tensor | None,
    soft: Tensor | None,
    perm: Tensor | None,
    lam: float,
    num_classes: int,
    smoothing: float,
    device: torch.device,
) -> Tensor:
    """``smooth(λ·t + (1-λ)·t[perm])`` with ``t = onehot(labels)`` or ``soft``; ``perm=None``: ``smooth(t)``.

    The reference computation is ``t[perm].lerp_(t, λ)`` followed, when ``smoothing > 0``, by
    ``· (1-ε) + ε/C``, in float32 for labels (in the dtype of ``soft`` otherwise).  For one-hot
    ``t`` a cell takes one of four values, so for labels the ``[N, C]`` result is written directly
    with those values computed as the tensor ops round them in float32: ``lerp(0, 1, w) = w`` and
    ``lerp(1, 0, w) = fl(1 - w)`` for ``w = fl(λ)`` (both branches of lerp's formula give these,
    the products being exact), ``lerp(1, 1, w) = 1``, then ``smooth(v) = fl(fl(v·fl(1-ε)) + fl(ε/C))``
    (float64 arithmetic rounded once to float32 is exact here: 53 >= 2·24 + 2 bits).  The result is
    the reference's bit for bit (tested), in one fill and two scatters instead of five [N, C] passes.
    """
    if soft is not None:
        t = soft.to(device)
        if perm is not None:
            t = torch.index_select(t, 0, perm).lerp_(t, lam)
        if smoothing > 0:
            t = t * (1.0 - smoothing) + smoothing / num_classes
        return t
    labels = cast(Tensor, labels)  # no soft targets: labels were given (checked by the caller)
    if labels.device != device:
        labels = labels.to(device)
    try:
        return _label_targets(labels, perm, lam, num_classes, smoothing, device)
    except RuntimeError:  # scatter_ rejects an index outside [0, C): report it as one_hot does
        error = _label_range_error(labels, num_classes)
        if error is None:
            raise
        raise error from None


def _label_targets(
    labels: Tensor, perm: Tensor | None, lam: float, num_classes: int, smoothing: float, device: torch.device
) -> Tensor:
    n = labels.shape[0]
    scale, off, both = _smoothing_coefficients(smoothing, num_classes)  # off = smooth(0), both = smooth(1)
    out = torch.full((n, num_classes), off, dtype=torch.float32, device=device)
    rows = labels.view(n, 1)
    if perm is None:
        return out.scatter_(1, rows, both)
    w = _f32(lam)
    own, partner = _f32(_f32(w * scale) + off), _f32(_f32(_f32(1.0 - w) * scale) + off)
    partner_rows = torch.index_select(rows, 0, perm)
    # A row whose partner has the same label holds lerp(1, 1, w) = 1, i.e. `both`, in that cell.  Write
    # one value plainly and add a constant v at the other's cells, v chosen so that fl(off + v) and
    # fl(first value + v) are exactly the two values wanted (always possible without smoothing, mostly
    # with); otherwise write the cells through a per-row choice (two more ops).
    v = _increment(off, own, partner, both)
    if v is not None:
        out.scatter_(1, rows, own)
        return out.scatter_(1, partner_rows, v, reduce="add")
    v = _increment(off, partner, own, both)
    if v is not None:
        out.scatter_(1, partner_rows, partner)
        return out.scatter_(1, rows, v, reduce="add")
    out.scatter_(1, partner_rows, partner)
    values = torch.where(rows == partner_rows, both, own)
    return out.scatter_(1, rows, values if values.dtype == torch.float32 else values.float())


def _get_perm(perm: object, n: int, generator: torch.Generator | None, device: torch.device, fn: str) -> Tensor:
    if perm is None:
        perm = torch.randperm(n, generator=generator, device=_device_of(generator))
        return perm if perm.device == device else perm.to(device)
    if not isinstance(perm, Tensor) or perm.is_floating_point() or perm.dtype == torch.bool:
        raise TypeError(f"{fn}: perm must be an integer tensor of shape [N], got {perm!r}")
    if perm.shape != (n,):
        raise ValueError(f"{fn}: perm must have shape [N] = [{n}], got {tuple(perm.shape)}")
    if int(perm.min()) < 0 or int(perm.max()) >= n:
        raise ValueError(f"{fn}: perm values must be in [0, N={n}), got min {int(perm.min())}, max {int(perm.max())}")
    return perm.to(device=device, dtype=torch.long)


# --------------------------------------------------------------------------- mixup
def mixup(
    x: Tensor,
    y: Tensor,
    alpha: float = 0.2,
    *,
    num_classes: int,
    lam: float | None = None,
    perm: Tensor | None = None,
    generator: torch.Generator | None = None,
    inplace: bool = False,
) -> tuple[Tensor, Tensor]:
    """Blend each sample with a partner from the same batch: ``λ·x + (1-λ)·x[perm]``, targets alike.

    Zhang et al. 2018, "mixup: Beyond Empirical Risk Minimization".  One
    ``λ ~ Beta(α, α)`` per batch and ``perm = randperm(N)``, both drawn from
    ``generator`` unless given.  The same ``λ`` mixes inputs and targets:
    ``y_soft = λ·onehot(y) + (1-λ)·onehot(y)[perm]``.  Train with a soft-target
    loss, e.g. ``F.cross_entropy(logits, y_soft)``.  ``x`` is not modified unless
    ``inplace=True``.

    Args:
        x: floating-point batch ``[N, *]``.
        y: integer labels ``[N]`` or soft targets ``[N, C]``.
        alpha: Beta concentration ``α > 0``; ignored when ``lam`` is given.
        num_classes: ``C``.
        lam: fixed mixing weight in ``[0, 1]`` instead of sampling it.
        perm: partner index per sample, integer ``[N]``, instead of ``randperm``.
        generator: source of randomness for ``λ`` and ``perm``.
        inplace: write the mixed batch into ``x`` and return ``x`` itself (timm's ``Mixup``
            contract); same values and random draws as the default, one batch-sized
            temporary (the partners) instead of a new result.  ``x`` must not require grad.

    Returns:
        ``(x_mixed [N, *] same dtype as x, y_soft [N, C])``; ``y_soft`` is float32
        for integer ``y`` and keeps the dtype of soft ``y``.

    >>> x = torch.tensor([[1.0], [0.0]]); y = torch.tensor([0, 1])
    >>> xm, ym = mixup(x, y, num_classes=2, lam=0.7, perm=torch.tensor([1, 0]))
    >>> xm.flatten().tolist(), ym[0].tolist()
    ([0.7, 0.3], [0.7, 0.3])
    >>> xm2, _ = mixup(x, y, num_classes=2, lam=0.7, perm=torch.tensor([1, 0]), inplace=True)
    >>> xm2 is x, torch.equal(x, xm)
    (True, True)
    """
    x = _check_batch(x, 1, "mixup")
    if not x.is_floating_point():
        raise TypeError(f"mixup: x must be floating point (blending needs it), got dtype {x.dtype}; convert it first")
    inplace = _check_inplace(inplace, "mixup")
    num_classes = check_num_classes(num_classes)
    labels, soft = _check_targets(y, x.shape[0], num_classes, x.device, "mixup")
    if lam is None:
        alpha = _check_alpha("alpha", alpha, allow_zero=False)
    else:
        lam = _check_lam(lam)
    return _mixup(x, labels, soft, alpha, lam, perm, _Draws(generator), inplace, num_classes, 0.0)


def _mixup(
    x: Tensor, labels: Tensor | None, soft: Tensor | None, alpha: float, lam: float | None, perm: Tensor | None,
    draws: _Draws, inplace: bool, num_classes: int, smoothing: float,
) -> tuple[Tensor, Tensor]:
    """:func:`mixup` on checked arguments, with label smoothing folded into the targets (for :class:`MixupCutmix`)."""
    if lam is None:
        lam = draws.beta(alpha, alpha)
    perm = _get_perm(perm, x.shape[0], draws.generator, x.device, "mixup")
    # λ·x + (1-λ)·x[perm] as one gathered copy blended with torch.lerp (two passes over the batch,
    # one batch-sized allocation); index_select gathers rows several times faster than x[perm]
    partners = torch.index_select(x, 0, perm)
    x_mixed = torch.lerp(partners, x, lam, out=x) if inplace else partners.lerp_(x, lam)
    return x_mixed, _targets(labels, soft, perm, lam, num_classes, smoothing, x.device)


# --------------------------------------------------------------------------- cutmix
def _cutmix_box(
    spatial: tuple[int, ...], lam: float, center: object, draws: _Draws
) -> tuple[tuple[slice, ...], float, int]:
    """Box of volume ``(1-λ)·prod(spatial)`` centred at ``center`` (random if None), clipped to the image.

    Returns the slices per spatial dim, ``λ`` recomputed from the clipped box, and the box's volume.
    """
    d = len(spatial)
    if center is None:
        center = tuple(draws.randint(s) for s in spatial)
    else:
        if isinstance(center, int):
            center = (center,)
        if (
            not isinstance(center, (tuple, list))
            or len(center) != d
            or any(isinstance(c, bool) or not isinstance(c, int) for c in center)
        ):
            raise TypeError(f"cutmix: center must be a tuple of {d} ints (one per spatial dim), got {center!r}")
        for c, s in zip(center, spatial):
            if not 0 <= c < s:
                raise ValueError(f"cutmix: center {tuple(center)} is outside the spatial shape {spatial}")
    ratio = (1.0 - lam) ** (1.0 / d)
    slices = []
    area = 1
    for c, s in zip(center, spatial):
        cut = int(round(s * ratio))
        lo = min(max(c - cut // 2, 0), s)
        hi = min(max(c - cut // 2 + cut, 0), s)
        slices.append(slice(lo, hi))
        area *= hi - lo
    return tuple(slices), 1.0 - area / math.prod(spatial), area


def cutmix(
    x: Tensor,
    y: Tensor,
    alpha: float = 1.0,
    *,
    num_classes: int,
    lam: float | None = None,
    perm: Tensor | None = None,
    center: tuple[int, ...] | None = None,
    generator: torch.Generator | None = None,
    inplace: bool = False,
) -> tuple[Tensor, Tensor]:
    """Paste a box cut from a partner sample into each sample; mix targets by the pasted area.

    Yun et al. 2019, "CutMix: Regularization Strategy to Train Strong Classifiers
    with Localizable Features".  One ``λ ~ Beta(α, α)`` and one box per batch:
    the box has volume ``(1-λ)`` of the image (side ``√(1-λ)·H``, ``√(1-λ)·W``
    for images, ``(1-λ)·L`` for sequences), its centre is uniform over the
    pixels, and it is clipped at the border.  ``λ`` is then **recomputed** from
    the box actually pasted, ``λ = 1 - box_area / (H·W)``, so the targets
    ``λ·onehot(y) + (1-λ)·onehot(y)[perm]`` match the pixels.  Returns a new
    tensor; ``x`` is not modified unless ``inplace=True``.

    Args:
        x: batch ``[N, C, H, W]`` or ``[N, C, L]``, any dtype.
        y: integer labels ``[N]`` or soft targets ``[N, num_classes]``.
        alpha: Beta concentration ``α > 0``; ignored when ``lam`` is given.
        num_classes: number of classes.
        lam: requested mixing weight in ``[0, 1]`` instead of sampling it.
        perm: partner index per sample, integer ``[N]``, instead of ``randperm``.
        center: box centre ``(row, col)`` (or ``(pos,)`` for ``[N, C, L]``) instead of a random one.
        generator: source of randomness for ``λ``, ``perm`` and the centre.
        inplace: paste the boxes into ``x`` and return ``x`` itself (timm's ``Mixup`` contract):
            only the boxes are copied, not the whole batch; same values and random draws as the
            default.  ``x`` must not require grad.

    Returns:
        ``(x_mixed, y_soft [N, num_classes])``.

    >>> x = torch.zeros(2, 1, 4, 4); x[1] = 1.0
    >>> xm, ym = cutmix(x, torch.tensor([0, 1]), num_classes=2, lam=0.75,
    ...                 perm=torch.tensor([1, 0]), center=(0, 0))
    >>> xm[0, 0]          # the 2x2 box at the top-left corner is clipped to 1x1
    tensor([[1., 0., 0., 0.],
            [0., 0., 0., 0.],
            [0., 0., 0., 0.],
            [0., 0., 0., 0.]])
    >>> ym[0].tolist()    # λ recomputed from the pasted area: 1 - 1/16
    [0.9375, 0.0625]
    """
    x = _check_batch(x, 3, "cutmix")
    if x.dim() not in (3, 4):
        raise ValueError(f"cutmix: x must be [N, C, H, W] or [N, C, L], got shape {tuple(x.shape)}")
    inplace = _check_inplace(inplace, "cutmix")
    num_classes = check_num_classes(num_classes)
    labels, soft = _check_targets(y, x.shape[0], num_classes, x.device, "cutmix")
    if lam is None:
        alpha = _check_alpha("alpha", alpha, allow_zero=False)
    else:
        lam = _check_lam(lam)
    return _cutmix(x, labels, soft, alpha, lam, perm, center, _Draws(generator), inplace, num_classes, 0.0)


def _cutmix(
    x: Tensor, labels: Tensor | None, soft: Tensor | None, alpha: float, lam: float | None, perm: Tensor | None,
    center: object, draws: _Draws, inplace: bool, num_classes: int, smoothing: float,
) -> tuple[Tensor, Tensor]:
    """:func:`cutmix` on checked arguments, with label smoothing folded into the targets (for :class:`MixupCutmix`)."""
    if lam is None:
        lam = draws.beta(alpha, alpha)
    perm = _get_perm(perm, x.shape[0], draws.generator, x.device, "cutmix")
    box, lam, area = _cutmix_box(tuple(x.shape[2:]), lam, center, draws)
    if area == 0:
        x_mixed = x if inplace else x.clone()
    elif inplace:  # gather the partners' boxes before any is overwritten, then paste them
        x_mixed = x
        index = (slice(None), slice(None), *box)
        region = x[index]
        region.copy_(torch.index_select(region, 0, perm))
    else:  # gather the partners' boxes straight into the copy's (no temporary; any indices, repeats allowed)
        x_mixed = x.clone()
        index = (slice(None), slice(None), *box)
        torch.index_select(x[index], 0, perm, out=x_mixed[index])
    return x_mixed, _targets(labels, soft, perm, lam, num_classes, smoothing, x.device)


# --------------------------------------------------------------------------- callable
class MixupCutmix:
    """Per batch, with probability ``prob`` apply mixup or CutMix; always return soft, smoothed targets.

    A simpler form of timm's ``Mixup``: one ``λ`` and one partner permutation
    per batch (works for any batch size, odd ones included).  When both alphas
    are positive, CutMix is chosen with probability ``switch_prob``, else mixup;
    an alpha of 0 disables that method.  Label smoothing is applied exactly
    once, after mixing: ``y_soft = (1-ε)·mixed_onehot + ε/C``; a batch left
    unmixed gets ``(1-ε)·onehot + ε/C``.  Randomness (apply, switch, ``λ``,
    permutation, box) comes from ``generator``.

    Args:
        mixup_alpha: Beta ``α`` for mixup (Zhang et al. 2018); 0 disables mixup.
        cutmix_alpha: Beta ``α`` for CutMix (Yun et al. 2019); 0 disables CutMix.
        prob: probability that a batch is mixed at all.
        switch_prob: probability of CutMix rather than mixup when both are enabled.
        num_classes: number of classes ``C``.
        smoothing: label smoothing ``ε`` in ``[0, 1)``.
        generator: ``torch.Generator`` for all random choices (global RNG if None).
        inplace: mix into the caller's ``x`` and return it (as timm's ``Mixup`` does) instead of
            a new tensor; same values and random draws.  CutMix then copies only the box.

    Call with ``(x [N, C, H, W] or [N, C, L], y [N] int or [N, C] soft)``;
    returns ``(x_mixed, y_soft [N, C])``.  Mixup needs floating-point ``x``.

    >>> mix = MixupCutmix(num_classes=3, smoothing=0.0, generator=torch.Generator().manual_seed(0))
    >>> xm, ym = mix(torch.rand(5, 3, 8, 8), torch.tensor([0, 1, 2, 0, 1]))
    >>> xm.shape, ym.shape, torch.allclose(ym.sum(1), torch.ones(5))
    (torch.Size([5, 3, 8, 8]), torch.Size([5, 3]), True)
    """

    def __init__(
        self,
        mixup_alpha: float = 0.8,
        cutmix_alpha: float = 1.0,
        prob: float = 1.0,
        switch_prob: float = 0.5,
        *,
        num_classes: int,
        smoothing: float = 0.1,
        generator: torch.Generator | None = None,
        inplace: bool = False,
    ) -> None:
        self.mixup_alpha = _check_alpha("mixup_alpha", mixup_alpha, allow_zero=True)
        self.cutmix_alpha = _check_alpha("cutmix_alpha", cutmix_alpha, allow_zero=True)
        self.prob = _check_prob("prob", prob)
        self.switch_prob = _check_prob("switch_prob", switch_prob)
        self.num_classes = check_num_classes(num_classes)
        self.smoothing = check_smoothing(smoothing)
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
        self.generator = generator
        self.inplace = _check_inplace(inplace, "MixupCutmix")

    def __call__(self, x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        """Mix one batch: ``(x, y) -> (x_mixed, y_soft)``; see the class docstring."""
        x = _check_batch(x, 3, "MixupCutmix")
        c, mixup_alpha, cutmix_alpha = self.num_classes, self.mixup_alpha, self.cutmix_alpha
        draws = _Draws(self.generator)
        if (mixup_alpha > 0 or cutmix_alpha > 0) and draws.rand() < self.prob:
            if mixup_alpha > 0 and cutmix_alpha > 0:
                use_cutmix = draws.rand() < self.switch_prob
            else:
                use_cutmix = cutmix_alpha > 0
            if use_cutmix:
                if x.dim() not in (3, 4):
                    raise ValueError(f"cutmix: x must be [N, C, H, W] or [N, C, L], got shape {tuple(x.shape)}")
                labels, soft = _check_targets(y, x.shape[0], c, x.device, "cutmix")
                return _cutmix(x, labels, soft, cutmix_alpha, None, None, None, draws, self.inplace, c, self.smoothing)
            if not x.is_floating_point():
                raise TypeError(
                    f"mixup: x must be floating point (blending needs it), got dtype {x.dtype}; convert it first"
                )
            labels, soft = _check_targets(y, x.shape[0], c, x.device, "mixup")
            return _mixup(x, labels, soft, mixup_alpha, None, None, draws, self.inplace, c, self.smoothing)
        labels, soft = _check_targets(y, x.shape[0], c, x.device, "MixupCutmix")
        return x, _targets(labels, soft, None, 1.0, c, self.smoothing, x.device)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(mixup_alpha={self.mixup_alpha}, cutmix_alpha={self.cutmix_alpha}, "
            f"prob={self.prob}, switch_prob={self.switch_prob}, num_classes={self.num_classes}, "
            f"smoothing={self.smoothing}" + (", inplace=True)" if self.inplace else ")")
        )
