"""Recipe tricks at evaluation: test-time augmentation (flips).

The plug-in wraps ``state.predict`` (the forward the trainer's evaluation uses) at EVAL_START and
restores the previous one at EVAL_END, so it composes with the other evaluation wrappers
(multi-scale test size, channels-last) and with weight swapping (EMA, SWA).
"""

from __future__ import annotations

from typing import Any, Callable, Literal

import torch

from trickbag.config import Recipe
from trickbag.errors import RecipeError
from trickbag.train.plugin import Plugin
from trickbag.train.state import State
from trickbag.train.tricks import INTERACTION_CHECKS, register_trick

__all__ = ["TTAPlugin", "flip_tta"]


def flip_tta(
    forward: Callable[[torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    *,
    hflip: bool = True,
    vflip: bool = False,
    average: Literal["probs", "logits"] = "probs",
) -> torch.Tensor:
    """Predict on ``x`` and its flips and average: log of the mean softmax (``"probs"``) or the mean logits.

    Test-time augmentation as in Krizhevsky et al. 2012 (averaging over flips and crops).
    ``hflip`` flips the last dimension (width, or time for 1-D signals), ``vflip`` the one before
    (height; needs ``[N, C, H, W]``).  With ``"probs"`` the result is ``log(mean_k softmax(f(x_k)))``:
    its argmax is the averaged prediction and ``cross_entropy`` on it is the NLL of the averaged
    probabilities.

    Args:
        forward: the model (or any ``[N, ...] -> [N, K]`` logits function).
        x: input batch ``[N, C, H, W]`` (or ``[N, C, L]`` with ``hflip`` only).

    Returns:
        ``[N, K]`` float tensor.

    >>> f = lambda t: t.flatten(1)[:, :2]          # "logits": the first two values of each sample
    >>> x = torch.tensor([[[[1.0, 0.0]]]])         # [1, 1, 1, 2]; its flip is [[0, 1]]
    >>> flip_tta(f, x, average="logits")
    tensor([[0.5000, 0.5000]])
    >>> torch.allclose(flip_tta(f, x).exp().sum(1), torch.ones(1))
    True
    """
    if average not in ("probs", "logits"):
        raise ValueError(f"average must be 'probs' or 'logits', got {average!r}")
    if vflip and x.dim() != 4:
        raise ValueError(f"vflip needs image batches [N, C, H, W], got a tensor of shape {list(x.shape)}")
    views = [x]
    if hflip:
        views.append(torch.flip(x, dims=(-1,)))
    if vflip:
        views.append(torch.flip(x, dims=(-2,)))
    outs = [forward(v).float() for v in views]
    if average == "logits":
        return torch.stack(outs).mean(0)
    logp = torch.stack([torch.log_softmax(o, dim=1) for o in outs])
    return torch.logsumexp(logp, dim=0) - torch.log(torch.tensor(float(len(outs)), device=logp.device))


class TTAPlugin(Plugin):
    """Install :func:`flip_tta` as ``state.predict`` at EVAL_START; restore the previous forward at EVAL_END."""

    name = "tta"

    def __init__(self, hflip: bool, vflip: bool, average: str) -> None:
        self.hflip, self.vflip, self.average = hflip, vflip, average
        self._prev: Any = None

    def configure(self, ctx: Any) -> None:
        if self.vflip and len(ctx.data.input_shape) != 3:
            raise RecipeError(
                f"tricks.tta.vflip needs image data [C, H, W]; data {ctx.recipe.data.name!r} has samples of shape "
                f"{list(ctx.data.input_shape)}"
            )

    def on_eval_start(self, state: State) -> None:
        self._prev = state.predict
        inner = state.predict or state.model
        kw = dict(hflip=self.hflip, vflip=self.vflip, average=self.average)
        state.predict = lambda x: flip_tta(inner, x, **kw)  # type: ignore[arg-type]

    def on_eval_end(self, state: State) -> None:
        state.predict = self._prev
        self._prev = None


@register_trick("tta", "Test-time augmentation: average predictions over flipped inputs at evaluation")
def _tta(cfg: Any, recipe: Recipe) -> list[Plugin]:
    return [TTAPlugin(cfg.hflip, cfg.vflip, cfg.average)]


def _check_tta_flips(recipe: Recipe) -> None:
    t = recipe.tricks.tta
    if t.enabled and not (t.hflip or t.vflip):
        raise RecipeError("tricks.tta has no flip turned on; set tricks.tta.hflip=true and/or tricks.tta.vflip=true")


INTERACTION_CHECKS.append(_check_tta_flips)
