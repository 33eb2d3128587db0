"""An augmentation policy (RandAugment, TrivialAugment, AugMix, AutoAugment) in the training images' pipeline.

The policy is torchvision's (``transforms.v2``), put between the random crop/flip and the conversion to float
(:func:`trickbag.data.transforms.add_policy`) at build time; it draws from torch's global RNG, which the image
sources seed per sample and epoch, so a resumed run (with workers too) draws the same augmentations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from trickbag.config import TrickSection
from trickbag.errors import RecipeError
from trickbag.plugin.context import log
from trickbag.plugin.interface import Plugin
from trickbag.tricks.base import Trick

if TYPE_CHECKING:
    from trickbag.plugin.context import TrickContext


class AugmentConfig(TrickSection):
    """A torchvision augmentation policy on every training image (image-folder data)."""

    policy: Literal["randaugment", "trivialaugment", "augmix", "autoaugment"] = "randaugment"  # which policy
    num_ops: int = Field(2, ge=1)  # randaugment: operations per image
    magnitude: int = Field(9, ge=0)  # randaugment: strength, in [0, num_magnitude_bins)
    num_magnitude_bins: int = Field(31, ge=2)  # randaugment / trivialaugment: magnitude levels
    severity: int = Field(3, ge=1, le=10)  # augmix: strength of each operation
    mixture_width: int = Field(3, ge=1)  # augmix: augmentation chains mixed
    chain_depth: int = Field(-1, ge=-1)  # augmix: operations per chain; -1: 1 to 3 at random
    alpha: float = Field(1.0, gt=0.0)  # augmix: Dirichlet / Beta parameter of the mixing weights
    autoaugment_policy: Literal["imagenet", "cifar10", "svhn"] = "imagenet"  # autoaugment: the learned policy


def policy_options(cfg: AugmentConfig) -> dict[str, Any]:
    """The keyword arguments of ``cfg.policy`` (the other keys do not apply to it)."""
    options: dict[str, dict[str, Any]] = {
        "randaugment": {"num_ops": cfg.num_ops, "magnitude": cfg.magnitude,
                        "num_magnitude_bins": cfg.num_magnitude_bins},
        "trivialaugment": {"num_magnitude_bins": cfg.num_magnitude_bins},
        "augmix": {"severity": cfg.severity, "mixture_width": cfg.mixture_width, "chain_depth": cfg.chain_depth,
                   "alpha": cfg.alpha},
        "autoaugment": {"policy": cfg.autoaugment_policy},
    }
    return options[cfg.policy]


def _training_pipeline(ds: Any) -> Any:
    """The ``v2.Compose`` the training split's images go through (through Subset-like wrappers), or None."""
    from torchvision.transforms import v2

    for _ in range(8):
        transform = getattr(ds, "transform", None)
        if isinstance(transform, v2.Compose):
            return transform
        ds = getattr(ds, "dataset", None)
        if ds is None:
            return None
    return None


class AugmentPlugin(Plugin):
    """Build time only: the policy goes into the training images' pipeline (``configure``)."""

    name = "augment"

    def __init__(self, cfg: AugmentConfig) -> None:
        self.cfg = cfg

    def configure(self, ctx: TrickContext) -> None:
        from trickbag.data.transforms import add_policy, augment_policy

        if self.cfg.policy == "randaugment" and self.cfg.magnitude >= self.cfg.num_magnitude_bins:
            raise RecipeError(f"tricks.augment.magnitude={self.cfg.magnitude} must be below "
                              f"tricks.augment.num_magnitude_bins={self.cfg.num_magnitude_bins}")
        pipeline = _training_pipeline(ctx.train_set)
        if pipeline is None:
            raise RecipeError("tricks.augment works on image-folder data, whose training images go through "
                              "torchvision transforms; this training set has none (for in-memory "
                              "images use tricks.cutout, tricks.random_erasing or tricks.mix)")
        add_policy(pipeline, augment_policy(self.cfg.policy, **policy_options(self.cfg)))
        log.info(f"augment: {self.cfg.policy} {policy_options(self.cfg)} on every training image")


def build(cfg: AugmentConfig) -> list[Plugin]:
    return [AugmentPlugin(cfg)]


TRICK = Trick(
    name="augment",
    config=AugmentConfig,
    description="Augmentation policy: RandAugment / TrivialAugment / AugMix / AutoAugment on training images",
    build=build,
)
