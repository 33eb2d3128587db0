"""Mixup, CutMix and a training-loop callable that picks one of them per batch."""

from __future__ import annotations

import math
from numbers import Real

import torch
from torch import Tensor

from trickbag.data.encoding import _check_num_classes, _check_smoothing, one_hot

__all__ = ["mixup", "cutmix", "MixupCutmix"]


# --------------------------------------------------------------------------- sampling
def _device_of(generator: torch.Generator | None) -> torch.device:
    return generator.device if generator is not None else torch.device("cpu")


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
    if n == 1:  # one λ per batch: the same draws in the same order, in Python floats (a tenth of the ops)
        return torch.tensor([_log_gamma_one(shape, d, c, generator, device)], dtype=torch.float64, device=device)
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


def _log_gamma_one(shape: float, d: float, c: float, generator: torch.Generator | None, device: torch.device) -> float:
    """One draw of :func:`_log_gamma` (same random numbers, same acceptance test) without tensor arithmetic."""

    def draw(fn):  # one float64 number from generator, as the vectorised sampler draws it
        return float(fn(1, generator=generator, dtype=torch.float64, device=device))

    def log(u: float) -> float:
        return math.log(u) if u > 0 else -math.inf

    while True:
        z, u = draw(torch.randn), draw(torch.rand)
        v = (1.0 + c * z) ** 3
        if v > 0:
            log_v = math.log(v)
            if log(u) < 0.5 * z * z + d - d * v + d * log_v:
                break
    out = math.log(d) + log_v
    if shape < 1.0:
        out += log(draw(torch.rand)) / shape
    return out


def _sample_beta(a: float, b: float, n: int, generator: torch.Generator | None) -> Tensor:
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
        raise ValueError(f"{fn}: x must have a batch dimension first and at least {min_dim} dims, got shape {tuple(x.shape)}")
    if x.shape[0] == 0:
        raise ValueError(f"{fn}: x has an empty batch (shape {tuple(x.shape)})")
    return x


def _targets(y: object, n: int, num_classes: int, fn: str) -> Tensor:
    """Integer labels ``[N]`` -> one-hot float32 ``[N, C]``; soft targets ``[N, C]`` are returned as is."""
    if not isinstance(y, Tensor):
        raise TypeError(f"{fn}: y must be a torch.Tensor, got {type(y).__name__}")
    if y.is_floating_point():
        if y.dim() != 2 or y.shape != (n, num_classes):
            raise ValueError(
                f"{fn}: soft targets y must have shape [N, num_classes] = [{n}, {num_classes}], got {tuple(y.shape)}"
            )
        return y
    if y.dim() != 1 or y.shape[0] != n:
        raise ValueError(f"{fn}: integer labels y must have shape [N] = [{n}], got {tuple(y.shape)}")
    return one_hot(y, num_classes)


def _get_perm(perm: object, n: int, generator: torch.Generator | None, device: torch.device, fn: str) -> Tensor:
    if perm is None:
        return torch.randperm(n, generator=generator, device=_device_of(generator)).to(device)
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
) -> tuple[Tensor, Tensor]:
    """Blend each sample with a partner from the same batch: ``λ·x + (1-λ)·x[perm]``, targets alike.

    Zhang et al. 2018, "mixup: Beyond Empirical Risk Minimization".  One
    ``λ ~ Beta(α, α)`` per batch and ``perm = randperm(N)``, both drawn from
    ``generator`` unless given.  The same ``λ`` mixes inputs and targets:
    ``y_soft = λ·onehot(y) + (1-λ)·onehot(y)[perm]``.  Train with a soft-target
    loss, e.g. ``F.cross_entropy(logits, y_soft)``.  ``x`` is not modified.

    Args:
        x: floating-point batch ``[N, *]``.
        y: integer labels ``[N]`` or soft targets ``[N, C]``.
        alpha: Beta concentration ``α > 0``; ignored when ``lam`` is given.
        num_classes: ``C``.
        lam: fixed mixing weight in ``[0, 1]`` instead of sampling it.
        perm: partner index per sample, integer ``[N]``, instead of ``randperm``.
        generator: source of randomness for ``λ`` and ``perm``.

    Returns:
        ``(x_mixed [N, *] same dtype as x, y_soft [N, C])``; ``y_soft`` is float32
        for integer ``y`` and keeps the dtype of soft ``y``.

    >>> x = torch.tensor([[1.0], [0.0]]); y = torch.tensor([0, 1])
    >>> xm, ym = mixup(x, y, num_classes=2, lam=0.7, perm=torch.tensor([1, 0]))
    >>> xm.flatten().tolist(), ym[0].tolist()
    ([0.7, 0.3], [0.7, 0.3])
    """
    x = _check_batch(x, 1, "mixup")
    if not x.is_floating_point():
        raise TypeError(f"mixup: x must be floating point (blending needs it), got dtype {x.dtype}; convert it first")
    n = x.shape[0]
    num_classes = _check_num_classes(num_classes)
    targets = _targets(y, n, num_classes, "mixup")
    if lam is None:
        alpha = _check_alpha("alpha", alpha, allow_zero=False)
        lam = float(_sample_beta(alpha, alpha, 1, generator))
    else:
        lam = _check_lam(lam)
    perm = _get_perm(perm, n, generator, x.device, "mixup")
    # λ·x + (1-λ)·x[perm] as one gathered copy blended in place (torch.lerp): one batch-sized
    # allocation instead of four; index_select gathers rows several times faster than x[perm]
    x_mixed = torch.index_select(x, 0, perm).lerp_(x, lam)
    targets = targets.to(x.device)
    y_soft = torch.index_select(targets, 0, perm).lerp_(targets, lam)
    return x_mixed, y_soft


# --------------------------------------------------------------------------- cutmix
_SCATTER_BYTES = 4 << 20  # boxes of this many bytes or more are scattered in place (see cutmix)

def _cutmix_box(
    spatial: tuple[int, ...], lam: float, center: object, generator: torch.Generator | None
) -> tuple[tuple[slice, ...], float]:
    """Box of volume ``(1-λ)·prod(spatial)`` centred at ``center`` (random if None), clipped to the image.

    Returns the slices per spatial dim and ``λ`` recomputed from the clipped box.
    """
    d = len(spatial)
    if center is None:
        center = tuple(
            int(torch.randint(0, s, (1,), generator=generator, device=_device_of(generator))) for s in spatial
        )
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
    return tuple(slices), 1.0 - area / math.prod(spatial)


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
) -> tuple[Tensor, Tensor]:
    """Paste a box cut from a partner sample into each sample; mix targets by the pasted area.

    Yun et al. 2019, "CutMix: Regularization Strategy to Train Strong Classifiers
    with Localizable Features".  One ``λ ~ Beta(α, α)`` and one box per batch:
    the box has volume ``(1-λ)`` of the image (side ``√(1-λ)·H``, ``√(1-λ)·W``
    for images, ``(1-λ)·L`` for sequences), its centre is uniform over the
    pixels, and it is clipped at the border.  ``λ`` is then **recomputed** from
    the box actually pasted, ``λ = 1 - box_area / (H·W)``, so the targets
    ``λ·onehot(y) + (1-λ)·onehot(y)[perm]`` match the pixels.  Returns a new
    tensor; ``x`` is not modified.

    Args:
        x: batch ``[N, C, H, W]`` or ``[N, C, L]``, any dtype.
        y: integer labels ``[N]`` or soft targets ``[N, num_classes]``.
        alpha: Beta concentration ``α > 0``; ignored when ``lam`` is given.
        num_classes: number of classes.
        lam: requested mixing weight in ``[0, 1]`` instead of sampling it.
        perm: partner index per sample, integer ``[N]``, instead of ``randperm``.
        center: box centre ``(row, col)`` (or ``(pos,)`` for ``[N, C, L]``) instead of a random one.
        generator: source of randomness for ``λ``, ``perm`` and the centre.

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
    n = x.shape[0]
    num_classes = _check_num_classes(num_classes)
    targets = _targets(y, n, num_classes, "cutmix")
    if lam is None:
        alpha = _check_alpha("alpha", alpha, allow_zero=False)
        lam = float(_sample_beta(alpha, alpha, 1, generator))
    else:
        lam = _check_lam(lam)
    sampled = perm is None  # then perm is a permutation
    perm = _get_perm(perm, n, generator, x.device, "cutmix")
    box, lam = _cutmix_box(tuple(x.shape[2:]), lam, center, generator)
    x_mixed = x.clone()
    index = (slice(None), slice(None), *box)
    if sampled and x[index].numel() * x.element_size() >= _SCATTER_BYTES:
        # a large box: scatter it to its places through the inverse permutation, no temporary copy
        # (a fresh multi-MiB temporary costs more in page faults than the copy itself)
        inverse = torch.empty_like(perm)
        inverse[perm] = torch.arange(n, device=perm.device)
        x_mixed[index].index_copy_(0, inverse, x[index])
    else:  # gather the partners' boxes (not the whole permuted batch); any indices, repeats allowed
        x_mixed[index] = torch.index_select(x[index], 0, perm)
    targets = targets.to(x.device)
    y_soft = torch.index_select(targets, 0, perm).lerp_(targets, lam)
    return x_mixed, y_soft


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
    ) -> None:
        self.mixup_alpha = _check_alpha("mixup_alpha", mixup_alpha, allow_zero=True)
        self.cutmix_alpha = _check_alpha("cutmix_alpha", cutmix_alpha, allow_zero=True)
        self.prob = _check_prob("prob", prob)
        self.switch_prob = _check_prob("switch_prob", switch_prob)
        self.num_classes = _check_num_classes(num_classes)
        self.smoothing = _check_smoothing(smoothing)
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
        self.generator = generator

    def _uniform(self) -> float:
        return float(torch.rand(1, generator=self.generator, device=_device_of(self.generator)))

    def __call__(self, x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        """Mix one batch: ``(x, y) -> (x_mixed, y_soft)``; see the class docstring."""
        x = _check_batch(x, 3, "MixupCutmix")
        n, c = x.shape[0], self.num_classes
        enabled = self.mixup_alpha > 0 or self.cutmix_alpha > 0
        if enabled and self._uniform() < self.prob:
            if self.mixup_alpha > 0 and self.cutmix_alpha > 0:
                use_cutmix = self._uniform() < self.switch_prob
            else:
                use_cutmix = self.cutmix_alpha > 0
            if use_cutmix:
                x, y_soft = cutmix(x, y, self.cutmix_alpha, num_classes=c, generator=self.generator)
            else:
                x, y_soft = mixup(x, y, self.mixup_alpha, num_classes=c, generator=self.generator)
        else:
            y_soft = _targets(y, n, c, "MixupCutmix").to(x.device)
        if self.smoothing > 0:
            y_soft = y_soft * (1.0 - self.smoothing) + self.smoothing / c
        return x, y_soft

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(mixup_alpha={self.mixup_alpha}, cutmix_alpha={self.cutmix_alpha}, "
            f"prob={self.prob}, switch_prob={self.switch_prob}, num_classes={self.num_classes}, "
            f"smoothing={self.smoothing})"
        )
