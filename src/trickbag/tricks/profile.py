"""Profile a few optimizer updates with torch.profiler; Chrome trace and op table in ``<run>/profile/``.

The trace opens in ``chrome://tracing`` or https://ui.perfetto.dev; ``ops.txt`` lists the top ops by
self CPU time. A run shorter than the schedule is profiled up to its end.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from trickbag.config import TrickSection
from trickbag.plugin.interface import Plugin
from trickbag.tricks.base import Trick

if TYPE_CHECKING:
    from trickbag.plugin.state import State


class ProfileConfig(TrickSection):
    """Profile a few optimizer updates with torch.profiler; Chrome trace and op table in <run>/profile/."""

    wait: int = Field(1, ge=0)  # updates run before the profiler starts
    warmup: int = Field(1, ge=0)  # updates profiled and discarded (profiler warm-up)
    steps: int = Field(3, ge=1)  # updates recorded
    record_shapes: bool = False  # record input shapes of every op
    profile_memory: bool = False  # record tensor allocations
    with_stack: bool = False  # record Python stacks (large traces)


class ProfilePlugin(Plugin):
    """Profile ``steps`` updates after ``wait`` + ``warmup``; write ``<run dir>/profile/trace.json`` and
    ``ops.txt`` on the main process (without a run directory the table is kept in :attr:`table`)."""

    name = "profile"

    def __init__(self, cfg: ProfileConfig) -> None:
        self.cfg = cfg
        self.prof: Any = None
        self.done = False
        self.table: str | None = None
        self._run_dir: Path | None = None

    def on_fit_start(self, state: State) -> None:
        if self.done or not state.dist.is_main:
            return
        from torch.profiler import ProfilerActivity, profile, schedule

        c = self.cfg
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if state.device.type == "cuda" else [])
        self._run_dir = state.run_dir
        self.prof = profile(activities=activities, on_trace_ready=self._write,
                            schedule=schedule(wait=c.wait, warmup=c.warmup, active=c.steps, repeat=1),
                            record_shapes=c.record_shapes, profile_memory=c.profile_memory, with_stack=c.with_stack)
        self.prof.start()

    def _write(self, prof: Any) -> None:
        self.table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=20)
        if self._run_dir is not None:
            out = Path(self._run_dir) / "profile"
            out.mkdir(parents=True, exist_ok=True)
            prof.export_chrome_trace(str(out / "trace.json"))
            (out / "ops.txt").write_text(self.table + "\n", encoding="utf-8")
        self.done = True

    def on_step(self, state: State) -> None:
        if self.prof is None:
            return
        self.prof.step()
        if self.done:
            self._stop()

    def _stop(self) -> None:
        prof, self.prof = self.prof, None
        if prof is not None:
            prof.stop()

    def on_fit_end(self, state: State) -> None:
        self._stop()

    def state_dict(self) -> dict[str, Any]:
        return {"done": self.done}

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        self.done = bool(sd.get("done", False))


def build(cfg: ProfileConfig) -> list[Plugin]:
    return [ProfilePlugin(cfg)]


TRICK = Trick(
    name="profile",
    last=True,  # it times the whole update, every other trick included
    config=ProfileConfig,
    description="Profile a few updates with torch.profiler; Chrome trace and op table in <run>/profile/",
    build=build,
)
