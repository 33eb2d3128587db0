"""Class-balanced sampling: the training loader draws the rare classes more often (re-sampling for imbalanced data).

Each epoch draws as many samples as the training set holds, with replacement, sample ``i`` with probability
proportional to ``n_{y_i}^-power`` (``n_c``: training samples of class ``c``). ``power: 1`` draws every class
equally often (class-balanced sampling; Buda et al. 2018 found over-sampling the most reliable fix for imbalance
in CNNs); ``0.5`` is square-root sampling (Mahajan et al. 2018; Kang et al. 2020), ``0`` the data's own
proportions. The draw is seeded by (seed, epoch) in the recipe's resumable sampler, so a resumed run draws the
same samples, and it is sharded over DDP ranks like the usual permutation. The loss, the schedule and the number
of updates per epoch do not change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from trickbag.config import TrickSection
from trickbag.errors import RecipeError
from trickbag.plugin.context import log
from trickbag.plugin.interface import Plugin
from trickbag.tricks._loss import CLASSIFICATION_ONLY, training_counts
from trickbag.tricks.base import Trick

if TYPE_CHECKING:
    import torch

    from trickbag.plugin.context import TrickContext


class ResampleConfig(TrickSection):
    """Class-balanced sampling: sample i is drawn in proportion to n_(y_i)^-power, with replacement."""

    power: float = Field(1.0, ge=0.0, le=1.0)  # 1: every class equally often; 0.5: square-root sampling; 0: as the data


def training_labels(train_set: Any) -> torch.Tensor | None:
    """The class of each training sample, in the loader's index order: a recipe's in-memory split (``.y``) or an
    image-folder split (a ``Subset`` of a dataset with ``targets``); None for anything else."""
    import torch

    y = getattr(train_set, "y", None)
    if isinstance(y, torch.Tensor) and y.dim() == 1 and not y.is_floating_point():
        return y.long()
    indices, base = getattr(train_set, "indices", None), getattr(train_set, "dataset", None)
    targets = getattr(base, "targets", None)
    if indices is not None and targets is not None:
        return torch.as_tensor(targets, dtype=torch.long)[torch.as_tensor(list(indices), dtype=torch.long)]
    return None


def sample_weights(labels: torch.Tensor, counts: list[int], power: float) -> torch.Tensor:
    """``counts[labels[i]] ** -power`` for each sample: every class's total weight is ``n_c ** (1 - power)``.

    >>> import torch
    >>> sample_weights(torch.tensor([0, 0, 0, 1]), [3, 1], 1.0).tolist()  # each class half of the draws
    [0.3333333333333333, 0.3333333333333333, 0.3333333333333333, 1.0]
    """
    import torch

    return torch.as_tensor(counts, dtype=torch.float64)[labels] ** -power


class ResamplePlugin(Plugin):
    """Sets the training sampler's weights from the training labels and class counts."""

    name = "resample"

    def __init__(self, power: float) -> None:
        self.power = power

    def configure(self, ctx: TrickContext) -> None:
        counts = training_counts(ctx, "resample", "give your DataLoader a torch.utils.data.WeightedRandomSampler")
        labels = training_labels(ctx.train_set)
        if labels is None or len(labels) != len(ctx.train_set):  # type: ignore[arg-type]
            raise RecipeError("tricks.resample needs the class of each training sample, which this data source does "
                              "not give; use an in-memory or image-folder source, or turn tricks.resample off")
        if int(labels.min()) < 0 or int(labels.max()) >= len(counts):
            raise RecipeError(f"tricks.resample: training labels outside 0..{len(counts) - 1}")
        ctx.sample_weights = sample_weights(labels, counts, self.power)
        share = [c ** (1.0 - self.power) for c in counts]
        total = sum(share)
        log.info(f"resampling (power {self.power:g}): each epoch draws the classes in the proportions "
                 + ", ".join(f"{s / total:.3f}" for s in share) + " (the data's: "
                 + ", ".join(f"{c / sum(counts):.3f}" for c in counts) + ")")


def build(cfg: ResampleConfig) -> list[Plugin]:
    return [ResamplePlugin(cfg.power)]


TRICK = Trick(
    name="resample",
    config=ResampleConfig,
    description="Class-balanced sampling: draw the rare classes more often, with replacement (imbalanced data)",
    build=build,
    tasks=CLASSIFICATION_ONLY,
    why="it draws samples by their class",
    recipe_only="it changes what the recipe's own training loader draws; give your DataLoader a "
                "torch.utils.data.WeightedRandomSampler(weights, num_samples=len(dataset)) instead",
)
