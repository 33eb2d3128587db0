"""Layer-wise learning-rate decay (ELECTRA, Clark et al. 2020; BEiT): earlier layers learn slower.

The groups are built by the ``param_groups`` trick's plug-in, which reads both sections.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from trickbag.config import TrickSection
from trickbag.plugin.interface import Plugin
from trickbag.tricks.base import Trick
from trickbag.tricks.param_groups import ParamGroupsPlugin

if TYPE_CHECKING:
    pass


class LayerDecayConfig(TrickSection):
    """Layer-wise learning-rate decay (ELECTRA, Clark et al. 2020; BEiT): earlier layers learn slower."""

    decay: float = Field(0.75, gt=0.0, le=1.0)  # LR factor per layer below the top one (BEiT/MAE fine-tuning: 0.65-0.75)  # noqa: E501 (a key's help is the comment on its line)
    depth: int = Field(1, ge=1)  # name components that make a layer: 1 -> 'features', 2 -> 'features.0'


def build(cfg: LayerDecayConfig, param_groups: Any) -> list[Plugin]:
    # one plug-in builds the groups for both sections
    return [] if param_groups.enabled else [ParamGroupsPlugin(param_groups, cfg)]


TRICK = Trick(
    name="layer_decay",
    joins=("param_groups",),  # one plug-in builds the groups for both sections
    config=LayerDecayConfig,
    description="Layer-wise LR decay: LR x decay^(layers above), top layer at the full LR (Clark 2020)",
    build=build,
)
