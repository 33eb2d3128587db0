"""Standard ImageNet-style train and eval preprocessing on torchvision.transforms.v2."""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Real

import torch
from torchvision.transforms import v2

__all__ = ["train_transforms", "eval_transforms", "augment_policy", "add_policy", "POLICIES"]


def _check_size(size: object) -> int:
    if isinstance(size, bool) or not isinstance(size, int):
        raise TypeError(f"size must be an int > 0 (output side in pixels), got {size!r} ({type(size).__name__})")
    if size < 1:
        raise ValueError(f"size must be an int > 0 (output side in pixels), got {size}")
    return size


def _check_mean_std(mean: object, std: object) -> tuple[list[float], list[float]]:
    out = []
    for name, seq in (("mean", mean), ("std", std)):
        if isinstance(seq, torch.Tensor):
            seq = seq.tolist()
        if (
            isinstance(seq, (str, bytes))
            or not isinstance(seq, Sequence)
            or len(seq) == 0
            or any(isinstance(v, bool) or not isinstance(v, Real) for v in seq)
        ):
            raise TypeError(f"{name} must be a non-empty sequence of floats, one per channel, got {seq!r}")
        out.append([float(v) for v in seq])
    mean_l, std_l = out
    if len(mean_l) != len(std_l):
        raise ValueError(
            f"mean and std must have one value per channel each, got {len(mean_l)} and {len(std_l)} values"
        )
    if any(not v > 0 for v in std_l):
        raise ValueError(f"std values must all be > 0, got {std_l}")
    return mean_l, std_l


def pipeline_tail(mean: list[float], std: list[float]) -> list[v2.Transform]:
    return [v2.ToDtype(torch.float32, scale=True), v2.Normalize(mean, std), v2.ToPureTensor()]


def train_transforms(
    size: int,
    *,
    mean: Sequence[float],
    std: Sequence[float],
    scale: tuple[float, float] = (0.08, 1.0),
    hflip: float = 0.5,
) -> v2.Compose:
    """Training preprocessing: random resized crop, horizontal flip, to float in [0, 1], normalise.

    The Inception-style augmentation (Szegedy et al. 2015) used for ImageNet
    training: ``RandomResizedCrop(size, scale)`` (area fraction in ``scale``,
    aspect ratio in [3/4, 4/3], bilinear with antialias) then
    ``RandomHorizontalFlip(hflip)``, then ``(x/255 - mean) / std``.  Built from
    ``torchvision.transforms.v2``; its randomness comes from torch's global RNG
    (seed it with ``torch.manual_seed``; DataLoader workers get distinct seeds).

    Args:
        size: output side in pixels.
        mean, std: per-channel statistics of images scaled to [0, 1] (see ``mean_std``).
        scale: range of the crop's area as a fraction of the image, ``0 < lo <= hi <= 1``.
        hflip: probability of a horizontal flip in ``[0, 1]``.

    Returns:
        A callable taking a PIL image or a uint8 tensor ``[C, H, W]`` and
        returning a float32 tensor ``[C, size, size]``.

    >>> from PIL import Image
    >>> t = train_transforms(32, mean=[0.5] * 3, std=[0.25] * 3)
    >>> out = t(Image.new("RGB", (48, 40), (255, 0, 128)))
    >>> out.shape, out.dtype, out[:, 0, 0].tolist()
    (torch.Size([3, 32, 32]), torch.float32, [2.0, -2.0, 0.0078...])
    """
    size = _check_size(size)
    mean_l, std_l = _check_mean_std(mean, std)
    if (
        not isinstance(scale, (tuple, list))
        or len(scale) != 2
        or any(isinstance(v, bool) or not isinstance(v, Real) for v in scale)
    ):
        raise TypeError(f"scale must be a pair (lo, hi) of floats, got {scale!r}")
    lo, hi = float(scale[0]), float(scale[1])
    if not 0.0 < lo <= hi <= 1.0:
        raise ValueError(f"scale must satisfy 0 < lo <= hi <= 1 (area fractions), got {scale!r}")
    if isinstance(hflip, bool) or not isinstance(hflip, Real) or not 0.0 <= float(hflip) <= 1.0:
        raise ValueError(f"hflip must be a probability in [0, 1], got {hflip!r}")
    steps: list[v2.Transform] = [v2.ToImage(), v2.RandomResizedCrop(size, scale=(lo, hi), antialias=True)]
    if hflip > 0:
        steps.append(v2.RandomHorizontalFlip(float(hflip)))
    return v2.Compose(steps + pipeline_tail(mean_l, std_l))


def eval_transforms(
    size: int,
    *,
    mean: Sequence[float],
    std: Sequence[float],
    crop_ratio: float = 0.875,
) -> v2.Compose:
    """Evaluation preprocessing: resize the short side, centre crop, to float in [0, 1], normalise.

    The standard ImageNet evaluation pipeline: ``Resize(int(size / crop_ratio))``
    on the shorter side (bilinear, antialias; 256 for size 224 at the usual
    ``crop_ratio = 0.875``), ``CenterCrop(size)``, then ``(x/255 - mean) / std``.
    Deterministic.

    Args:
        size: output side in pixels.
        mean, std: per-channel statistics of images scaled to [0, 1].
        crop_ratio: fraction of the resized short side kept by the crop, in ``(0, 1]``.

    Returns:
        A callable taking a PIL image or a uint8 tensor ``[C, H, W]`` and
        returning a float32 tensor ``[C, size, size]``.

    >>> t = eval_transforms(224, mean=[0.0] * 3, std=[1.0] * 3)
    >>> t.transforms[1].size          # short side resized to int(224 / 0.875)
    [256]
    >>> t(torch.zeros(3, 300, 400, dtype=torch.uint8)).shape
    torch.Size([3, 224, 224])
    """
    size = _check_size(size)
    mean_l, std_l = _check_mean_std(mean, std)
    if isinstance(crop_ratio, bool) or not isinstance(crop_ratio, Real) or not 0.0 < float(crop_ratio) <= 1.0:
        raise ValueError(f"crop_ratio must be a float in (0, 1], got {crop_ratio!r}")
    steps: list[v2.Transform] = [
        v2.ToImage(),
        v2.Resize(int(size / float(crop_ratio)), antialias=True),
        v2.CenterCrop(size),
    ]
    return v2.Compose(steps + pipeline_tail(mean_l, std_l))


#: the augmentation policies of torchvision.transforms.v2 that :func:`augment_policy` builds
POLICIES = ("randaugment", "trivialaugment", "augmix", "autoaugment")


def augment_policy(name: str, **options: object) -> v2.Transform:
    """A torchvision ``transforms.v2`` augmentation policy on uint8 images: ``randaugment`` (``num_ops``,
    ``magnitude``, ``num_magnitude_bins``; Cubuk et al. 2020), ``trivialaugment`` (``num_magnitude_bins``; Müller &
    Hutter 2021), ``augmix`` (``severity``, ``mixture_width``, ``chain_depth``, ``alpha``; Hendrycks et al. 2020) or
    ``autoaugment`` (``policy`` imagenet / cifar10 / svhn; Cubuk et al. 2019). Its draws come from torch's global
    RNG, which trickbag's image sources seed per sample and epoch (exact resume, with workers too).

    >>> type(augment_policy("randaugment", num_ops=2, magnitude=9)).__name__
    'RandAugment'
    """
    if name == "randaugment":
        return v2.RandAugment(**options)
    if name == "trivialaugment":
        return v2.TrivialAugmentWide(**options)
    if name == "augmix":
        return v2.AugMix(**options)
    if name == "autoaugment":
        policy = options.pop("policy", "imagenet")
        return v2.AutoAugment(v2.AutoAugmentPolicy(policy), **options)
    raise ValueError(f"unknown augmentation policy {name!r}; allowed: {', '.join(POLICIES)}")


def add_policy(pipeline: v2.Compose, policy: v2.Transform) -> None:
    """Put ``policy`` into a training pipeline of :func:`train_transforms` (or any ``v2.Compose`` holding a
    ``ToDtype``), right before the conversion to float: after the crop and the flip, on the uint8 image."""
    steps = pipeline.transforms
    at = next((i for i, t in enumerate(steps) if isinstance(t, v2.ToDtype)), None)
    if at is None:
        raise ValueError("the pipeline has no v2.ToDtype step to put the policy before")
    steps.insert(at, policy)
