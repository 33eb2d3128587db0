"""Shared pieces of the tricks tests: a tiny recipe, a plug-in made of callables, a build helper."""

from __future__ import annotations

from trickbag.config import load_recipe
from trickbag.train.build import build
from trickbag.train.events import Event
from trickbag.train.plugin import Plugin


def tiny_base(epochs: int) -> list[str]:
    """Fake data (4 classes, [1, 8, 8], ~69 training samples in batches of 16), a narrow BN CNN."""
    return [
        "data.name=fake", "data.num_samples=96", "data.batch_size=16", f"train.epochs={epochs}",
        "train.device=cpu", "log.tensorboard=false", "run.progress=false", "run.plots=false",
        "schedule.warmup_epochs=0", "model.kwargs={width: 8}", "optim.lr=0.1",
    ]


class Hook(Plugin):
    """A plug-in made of the given ``on_<event>`` callables."""

    def __init__(self, **handlers):
        self._events = set(handlers)
        for event, fn in handlers.items():
            setattr(self, "on_" + event, fn)

    def handles(self, event: Event) -> bool:
        return event.value in self._events


def build_run(base: list[str], *overrides: str, hook: Plugin | None = None):
    """Build the digits recipe with ``base`` + ``overrides``; returns (trainer, ctx, recipe)."""
    recipe = load_recipe("digits", [*base, *overrides])
    trainer, ctx = build(recipe)
    if hook is not None:
        trainer.add_plugin(hook)
    return trainer, ctx, recipe
