"""``torch.compile`` the model (off by default: compilation takes time up front); checkpoints keep the
plain module's keys (the trainer unwraps ``_orig_mod``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, cast

from trickbag.config import TrickSection
from trickbag.errors import RecipeError
from trickbag.plugin.context import log
from trickbag.plugin.interface import Plugin
from trickbag.tricks.base import Trick

if TYPE_CHECKING:
    from trickbag.plugin.context import TrickContext


class CompileConfig(TrickSection):
    """torch.compile the model (off by default: compilation takes time up front)."""

    backend: str = "inductor"  # torch.compile backend; 'aot_eager' / 'eager' to debug
    mode: Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"] = "default"  # torch.compile mode  # noqa: E501 (a key's help is the comment on its line)
    dynamic: bool | None = None  # dynamic shapes; None lets torch decide
    fullgraph: bool = False  # fail instead of falling back on graph breaks


class CompilePlugin(Plugin):
    """Replace ``ctx.model`` by ``torch.compile(ctx.model, ...)`` at build time."""

    name = "compile"

    def __init__(self, cfg: CompileConfig) -> None:
        self.cfg = cfg

    def configure(self, ctx: TrickContext) -> None:
        import torch
        import torch._dynamo

        c = self.cfg
        backends = torch._dynamo.list_backends(exclude_tags=())
        if c.backend not in backends:
            raise RecipeError(f"tricks.compile.backend={c.backend!r} is not a torch.compile backend; allowed: "
                              f"{', '.join(sorted(backends))}")
        # compiling a Module gives an OptimizedModule (a Module); torch.compile's annotation says only "a callable"
        ctx.model = cast("torch.nn.Module", torch.compile(ctx.model, backend=c.backend,
                                                          mode=None if c.mode == "default" else c.mode,
                                                          dynamic=c.dynamic, fullgraph=c.fullgraph))
        log.info(f"torch.compile (backend {c.backend}, mode {c.mode}): the first updates are slow")


def build(cfg: CompileConfig) -> list[Plugin]:
    return [CompilePlugin(cfg)]


TRICK = Trick(
    name="compile",
    after=("channels_last",),  # the model is compiled in its final memory format
    config=CompileConfig,
    description="torch.compile the model (off by default); checkpoint keys stay those of the plain model",
    build=build,
)
