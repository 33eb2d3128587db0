"""``torch.compile`` (inductor) with EMA and flip-TTA weight swaps on CUDA: the compiled model evaluates the
weights swapped into it, checked against the same architecture run eagerly with those weights."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from trickbag.nn import flip_tta
from trickbag.recipe import load_recipe
from trickbag.train.build import build
from trickbag.train.parts import model_for
from trickbag.tricks.ema import EMAPlugin

from .helpers import CUDA_ONLY, FAKE, Hook, weights

pytestmark = CUDA_ONLY


@pytest.mark.timeout(180)
def test_compiled_model_with_ema_and_tta_evaluates_the_swapped_weights(no_tf32):
    import torch._dynamo

    torch._dynamo.reset()
    recipe = load_recipe("digits", [*FAKE, "train.epochs=2", "tricks.compile.enabled=true", "tricks.ema.enabled=true",
                                    "tricks.ema.decay=0.9", "tricks.ema.warmup=false", "tricks.tta.enabled=true",
                                    "data.drop_last=true", "data.eval_batch_size=1024"])  # few shapes to compile
    trainer, ctx = build(recipe)
    assert hasattr(trainer.model, "_orig_mod")  # the trick compiled the model
    ema = next(p for p in trainer.plugins if isinstance(p, EMAPlugin)).ema
    raw: dict[str, torch.Tensor] = {}
    trainer.add_plugin(Hook(epoch_end=lambda s: raw.update(weights(s.model))))  # the raw weights of the last eval
    trainer.fit()
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1
    last = trainer.state.history[-1]

    xs, ys = (torch.cat(t).cuda() for t in zip(*[(x, y) for x, y in ctx.val_loader]))
    eager = model_for(recipe, ctx.data).cuda().eval()
    for suffix, state in (("", ema.module.state_dict()), ("_raw", raw)):
        eager.load_state_dict(state)
        with torch.no_grad():
            out = flip_tta(eager, xs)  # tricks.tta defaults: hflip, probabilities averaged
        loss, acc = F.cross_entropy(out, ys).item(), (out.argmax(1) == ys).float().mean().item()
        assert abs(last[f"val/loss{suffix}"] - loss) < 1e-4, (suffix, last[f"val/loss{suffix}"], loss)
        assert abs(last[f"val/acc{suffix}"] - acc) < 1e-6, (suffix, last[f"val/acc{suffix}"], acc)
    # FIT_END copied the average into the (compiled) model for good
    torch.testing.assert_close(weights(trainer.model), {k: v.cpu() for k, v in ema.module.state_dict().items()})
    assert not torch.equal(torch.cat([v.flatten() for v in raw.values() if v.is_floating_point()]),
                           torch.cat([v.flatten().cpu() for v in ema.module.state_dict().values()
                                      if v.is_floating_point()]))  # the two evaluations saw different weights
