"""The one run path: :func:`run_recipe` builds, checks, trains, tests and summarises a recipe.

``trickbag train``, every sweep trial, every ablation cell and ``trickbag lr-find`` call it; they
differ only in the plug-ins they add and in whether the run writes a directory. A run directory
holds ``recipe.yaml`` (fully resolved), ``metrics.csv``, ``tb/`` (TensorBoard events),
``checkpoints/last.pt`` and ``best.pt`` (plus ``step-N.pt`` when asked), ``curves.png``,
``lr.png`` and ``summary.txt``. Nothing is written outside it, and nothing at all before the
recipe, the data and the model have passed the pre-flight.
"""

from __future__ import annotations

import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from trickbag import runtime
from trickbag._files import WriteError, atomic_write_text
from trickbag.errors import CheckpointError, DataError, TrickbagError
from trickbag.models import undeclared_kwargs
from trickbag.nn import unwrap
from trickbag.plugin.interface import Plugin
from trickbag.plugin.state import StopReason
from trickbag.recipe import Recipe, load_run_recipe, recipe_to_yaml
from trickbag.runs.artifacts import write_test_details
from trickbag.runs.baseline import table_baseline
from trickbag.runs.extras import check_run_extras
from trickbag.runs.naming import (
    LOCK,
    RunLock,
    check_folder_layout,
    find_resume_checkpoint,
    new_run_dir,
    refuse_taken,
    remove_stale_temporaries,
)
from trickbag.runs.preflight import preflight
from trickbag.runs.resume import apply_resume, check_resume, log_resume, train_longer_hint
from trickbag.runs.summary import RunResult, format_summary, model_summary
from trickbag.train.build import build
from trickbag.train.checkpoint_files import check_state_fits, load_checkpoint
from trickbag.train.distributed import on_main, scaling_notes
from trickbag.train.parts import RunParts
from trickbag.train.plugins.checkpoints import Checkpointing
from trickbag.train.plugins.signals import GracefulInterrupt
from trickbag.train.sharded import load_full
from trickbag.train.trainer import Trainer

__all__ = ["run_recipe", "resume_run", "TrainingError", "RunFinished", "RunResult"]


class TrainingError(TrickbagError):
    """Training failed after it started (exit status 1); the message names the log and how to continue."""

    exit_code = 1


class RunFinished(TrickbagError):
    """``--resume`` of a run that has nothing left to train: said in one line, exit status 0."""

    exit_code = 0


class RunClock(Plugin):
    """Wall time of a run summed over its sessions (kept in checkpoints, so resumes add up)."""

    name = "clock"

    def __init__(self) -> None:
        self.before = 0.0
        self.t0 = time.perf_counter()

    def total(self) -> float:
        return self.before + time.perf_counter() - self.t0

    def state_dict(self) -> dict[str, Any]:
        return {"wall_time_s": self.total()}

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        self.before = float(sd.get("wall_time_s", 0.0))


class _Session:
    """One run of one recipe, from the build to the summary (see :func:`run_recipe`)."""

    def __init__(self, recipe: Recipe, dist: runtime.DistInfo, out: TextIO, quiet: bool, write: bool) -> None:
        self.recipe, self.dist, self.out, self.quiet, self.write = recipe, dist, out, quiet, write
        self.main = dist.is_main
        self.run_dir: Path | None = None
        self.lock: RunLock | None = None
        self.lock_created = False  # the lock file is this session's: a refusal before open() removes it
        self.opened = False  # open() began writing the run folder
        self.ckpt: tuple[Path, dict[str, Any]] | None = None
        self.trainer: Trainer
        self.ctx: RunParts
        self.plugins: list[Plugin] = []
        self.checkpointing: Checkpointing | None = None
        self.interrupt: GracefulInterrupt
        self.clock = RunClock()
        self.changes: dict[str, Any] = {}
        self.resuming = False
        self.resume_notes: list[str] = []

    def say(self, msg: str) -> None:
        if self.main and not self.quiet:
            print(msg, file=self.out, flush=True)

    # ------------------------------------------------------------------ before anything is written
    def prepare(self, resume_dir: Path | None) -> None:
        """Choose (and for a resume, lock) the run directory, build, pre-flight, load the checkpoint."""
        check_run_extras(self.recipe, write=self.write, quiet=self.quiet)
        self.resuming = self.write and resume_dir is not None
        if self.write and resume_dir is not None:
            run_dir = self.run_dir = Path(resume_dir)
            if self.main:
                check_folder_layout(run_dir)  # before the lock: a refusal leaves the folder as it was
                self._lock(run_dir)
            self.ckpt = on_main(lambda: find_resume_checkpoint(run_dir))
            if self.ckpt is not None:
                self._check_resume(self.ckpt[1], run_dir)
        elif self.write:
            # under DDP rank 0 decides the name and hands it to every rank
            self.run_dir = on_main(lambda: new_run_dir(self.recipe))
        fitted = self.ckpt[1].get("preprocess") if self.ckpt is not None else None  # the stored encoding: no re-fit
        self.trainer, self.ctx = build(self.recipe, run_dir=self.run_dir, fitted=fitted)
        preflight(self.trainer, self.ctx)
        if self.ckpt is not None:
            path, ckpt = self.ckpt
            check_state_fits(unwrap(self.trainer.model), ckpt["model"], f"checkpoint {str(path)!r}")
            try:
                self.trainer.load_state_dict(ckpt)
            except (RuntimeError, KeyError, ValueError) as exc:
                raise CheckpointError(f"checkpoint {str(path)!r} does not fit this recipe's model/optimizer: "
                                      f"{str(exc).splitlines()[0]}") from None
            world = self.ckpt[1].get("counters", {}).get("world_size")
            self.resume_notes = apply_resume(self.trainer, self.ctx, self.changes, world)

    def _lock(self, run_dir: Path) -> None:
        self.lock_created = not (run_dir / LOCK).exists()
        self.lock = RunLock(run_dir).acquire()

    def release(self) -> None:
        """Release the lock; a session refused before it wrote anything also removes the lock file it created,
        so the folder is as it was (a process that opens the file meanwhile is refused or gets a new one)."""
        if self.lock is None:
            return
        if self.lock_created and not self.opened:
            (self.lock.run_dir / LOCK).unlink(missing_ok=True)
        self.lock.release()

    def _check_resume(self, ckpt: dict[str, Any], run_dir: Path) -> None:
        """Refuse unsafe overrides; a run with nothing left to train says so (:class:`RunFinished`)."""
        c = ckpt.get("counters", {})
        epochs_done, mid = int(c.get("epoch", 0)), bool(c.get("batch_idx"))
        stored = ckpt.get("recipe")
        old = stored if isinstance(stored, dict) else {}
        self.changes = check_resume(old, self.recipe.model_dump(mode="json"), epochs_done, run_dir)
        written_on = int(c.get("world_size") or self.dist.world_size)
        if mid and written_on != self.dist.world_size:
            raise CheckpointError(
                f"the newest checkpoint of {run_dir} stands inside epoch {epochs_done + 1} and was written by "
                f"{written_on} process{'es' if written_on > 1 else ''}; this run has {self.dist.world_size}: an epoch "
                f"is split over the processes, so the number can change only at an epoch's end; resume with "
                f"dist.nproc={written_on}, and change it after that epoch")
        stopped = c.get("stopped")
        if stopped == StopReason.EARLY_STOPPING.value and "train.early_stopping_patience" not in self.changes:
            raise RunFinished(f"run {run_dir} is finished: early stopping ended it after {epochs_done} epochs; "
                              f"to train on, resume with a larger train.early_stopping_patience")
        finished = epochs_done >= self.recipe.train.epochs and not mid
        if finished and (run_dir / "summary.txt").is_file():  # else: killed before its test, finish that
            raise RunFinished(f"run {run_dir} is finished: {epochs_done} of {self.recipe.train.epochs} epochs "
                              f"trained; to train longer: {train_longer_hint(run_dir, self.recipe, epochs_done)}")

    # ------------------------------------------------------------------ the run directory
    def open(self, extra: Sequence[Plugin]) -> None:
        """Take the lock, write the recipe, add the file-writing plug-ins and the caller's."""
        if self.write and self.main:
            assert self.run_dir is not None
            if self.lock is None:
                self._lock(self.run_dir)
                # checked again under the lock: a run on the same name may have started and ended since prepare()
                if not self.resuming:
                    refuse_taken(self.run_dir)
            self.opened = True
            remove_stale_temporaries(self.run_dir)
            atomic_write_text(self.run_dir / "recipe.yaml", recipe_to_yaml(self.recipe))
            if self.ctx.data.skipped:  # files left out of the splits because they cannot be read
                atomic_write_text(self.run_dir / "skipped_images.txt",
                                  "".join(f"{path}\t{why}\n" for path, why in self.ctx.data.skipped))
            if self.ctx.weights_report is not None and self.ckpt is None:
                atomic_write_text(
                    self.run_dir / "weights_report.txt", _weights_report(self.recipe, self.ctx.weights_report)
                )
            self.plugins = self._file_plugins()
        self.interrupt = GracefulInterrupt(out=sys.stderr if self.main else None)
        self.plugins += [self.clock, self.interrupt, *extra, *self.ctx.user_plugins]  # the recipe's own run last
        for p in self.plugins:
            self.trainer.add_plugin(p)
        if self.ckpt is not None:  # plug-ins added after the load need their state too
            states = self.ckpt[1].get("plugins", {})
            for p in self.plugins:
                if p.key in states:
                    p.load_state_dict(states[p.key])

    def _file_plugins(self) -> list[Plugin]:
        """The run folder's plug-ins, as a hand-built Trainer's ``run_dir=`` makes them, from the recipe."""
        from trickbag.train.plugins.loggers import WandbLogger
        from trickbag.train.plugins.run_folder import RunFolder

        r, d = self.recipe, self.run_dir
        assert d is not None
        folder = RunFolder(
            path=d, progress=False if self.quiet else (True if r.run.progress else "lines"),
            log_every_steps=r.log.every_steps, checkpoint_every_steps=r.train.checkpoint_every_steps,
            keep_checkpoints=r.train.keep_checkpoints, plots=r.run.plots, tensorboard=r.log.tensorboard,
            extra={"recipe": r.model_dump(mode="json"), "classes": self.ctx.data.classes, **self.ctx.checkpoint_extra},
        )
        out = folder.plugins(monitor=self.ctx.monitor, mode=self.ctx.mode)
        assert isinstance(out[-1], Checkpointing)
        self.checkpointing = out[-1]
        if r.log.wandb:
            out.insert(len(out) - 1, WandbLogger(d, r.model_dump(mode="json"), every_steps=r.log.every_steps))
        return out

    def announce(self) -> None:
        r, ctx, s = self.recipe, self.ctx, self.trainer.state
        if self.ckpt is not None and self.main:  # said even when quiet: where the run continues
            assert self.run_dir is not None  # a checkpoint is loaded only from the run folder being resumed
            print(f"resuming {self.run_dir} from {self.ckpt[0].name} at epoch {s.epoch + 1}, update {s.step}",
                  file=self.out, flush=True)
            for note in self.resume_notes:
                print(f"  {note}", file=self.out, flush=True)
            log_resume(self.run_dir, self.ckpt[0].name, f"epoch {s.epoch + 1}, update {s.step}", self.changes,
                       self.resume_notes)
        elif self.resuming and self.main and self.run_dir is not None:
            print(f"resuming {self.run_dir}: it has no checkpoint yet, so it trains from the beginning",
                  file=self.out, flush=True)
            log_resume(self.run_dir, None, "the beginning (no checkpoint yet)", {})
        n = lambda ds: len(ds) if ds is not None else 0  # noqa: E731
        eff = r.data.batch_size * r.train.accumulate * self.dist.world_size
        from trickbag.train.parts import resolve_model_name

        self.say(
            f"trickbag: training {r.name!r} ({resolve_model_name(r, ctx.data)}, "
            f"{sum(p.numel() for p in ctx.model.parameters()):,} "
            f"parameters) on {ctx.device}; {n(ctx.data.train)} train / {n(ctx.data.val)} val / "
            f"{n(ctx.data.test)} test samples; effective batch {eff}"
        )
        if self.dist.world_size > 1:
            for line in scaling_notes(r.data.batch_size, r.train.accumulate, self.dist.world_size, r.optim.lr):
                self.say(f"  {line}")
        for note in ctx.notes:
            self.say(f"  {note}")
        name = resolve_model_name(r, ctx.data)
        dropped = undeclared_kwargs(name, dict(r.model.kwargs))
        if dropped:
            self.say(f"  model.kwargs {', '.join(dropped)} are not passed to {name}: it does not declare them")

    # ------------------------------------------------------------------ training and after
    def fit(self) -> float:
        """Train under a graceful-interrupt handler; unexpected errors become one line (exit 1) and a log.
        Returns the run's wall time over all its sessions."""
        self.clock.t0 = time.perf_counter()
        try:
            with self.interrupt:
                self.trainer.fit()
        except (CheckpointError, WriteError) as exc:  # disk full, permission lost: say how to continue
            raise TrainingError(
                f"{exc}; training stopped, continue with: trickbag train --resume {self.run_dir}"
            ) from None
        except DataError as exc:  # a sample that cannot be read, found mid-run: one line, a log, a way on
            raise self._data_failure(exc) from None
        except (TrickbagError, KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:
            raise self._failure(exc) from exc
        return self.clock.total()

    def _write_error_log(self, exc: BaseException) -> Path | None:
        if not (self.main and self.run_dir is not None and self.run_dir.is_dir()):
            return None
        log = self.run_dir / "error.log"
        try:
            atomic_write_text(log, "".join(traceback.format_exception(exc)))
        except WriteError:
            return None
        return log

    def _data_failure(self, exc: DataError) -> DataError:
        """The data error of a sample read mid-run, with the error log and what to do with the run folder."""
        s = self.trainer.state
        log = self._write_error_log(exc)
        first = (str(exc).strip().splitlines() or [""])[0]
        if self.run_dir is None:
            return DataError(f"{first} (at epoch {s.epoch + 1}, update {s.step})")
        held = sorted(self.checkpointing.written) if self.checkpointing else []
        kept = (f"it keeps {', '.join(held)}" if held else "it has no checkpoint yet")
        return DataError(f"{first}; training stopped at epoch {s.epoch + 1}, update {s.step}"
                         f"{f', the traceback is in {log}' if log else ''}; the run folder {self.run_dir} is "
                         f"resumable ({kept}): repair the file and continue with: trickbag train --resume "
                         f"{self.run_dir}; or delete the file and the folder and start again (fewer files change "
                         f"the data splits)")

    def _failure(self, exc: Exception) -> TrainingError:
        import torch

        s = self.trainer.state
        where = f"epoch {s.epoch + 1}, update {s.step}"
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        log = self._write_error_log(exc)
        more = f"; the traceback is in {log}" if log else ""
        cont = f"; continue with: trickbag train --resume {self.run_dir}" if self.run_dir else ""
        if isinstance(exc, torch.OutOfMemoryError) and self.run_dir:  # a resume may change the micro-batch size
            cont += (" train.micro_batch_size=auto (halves the micro-batch on an out-of-memory error, the same "
                     "updates) or a number of samples")
        return TrainingError(f"training failed at {where}: {type(exc).__name__}: {first}{more}{cont}")

    def test(self) -> dict[str, Any]:
        """Metrics of best.pt (the weights it holds) on the test split (floats; tensors go to ``test_details``)."""
        s, ctx = self.trainer.state, self.ctx
        self.test_details: dict[str, Any] = {}
        if s.stop_reason is StopReason.INTERRUPTED or ctx.test_loader is None:
            return {}
        if self.write and self.run_dir is not None:
            best = self.run_dir / "checkpoints" / "best.pt"
            weights = on_main(lambda: _best_weights(best))  # rank 0 reads it; every rank gets it
            if weights is None:  # no epoch ended well: nothing to test (never the weights of a diverged run)
                return {}
            load_full(unwrap(self.trainer.model), weights)  # a sharded model takes its slice
            s.predict = None
        metrics = self.trainer.evaluate(ctx.test_loader, test=True)
        self.test_details = {k: v for k, v in metrics.items() if not isinstance(v, float)}
        return {f"test/{k}": v for k, v in metrics.items() if isinstance(v, float)}

    def result(self, wall: float, test: dict[str, Any]) -> RunResult:
        s = self.trainer.state
        cp = self.checkpointing
        return RunResult(run_dir=self.run_dir, history=s.history, best=cp.best if cp else None, test=test,
                         wall_time_s=wall, stop_reason=s.stop_reason, stop_detail=s.stop_detail,
                         monitor=self.ctx.monitor, updates=s.step, skipped=s.skipped_steps,
                         nonfinite_skipped=s.nonfinite_skipped, checkpoints=cp.on_disk() if cp else {},
                         plugins=list(self.plugins), test_details=getattr(self, "test_details", {}),
                         threads=self.ctx.threads_report(), checkpoint_sizes=cp.sizes() if cp else {},
                         baseline=table_baseline(self.ctx.data, self.ctx.task) if test and self.write and self.main
                         else None)

    def summarise(self, result: RunResult) -> None:
        if not (self.write and self.main and self.run_dir is not None):
            return
        files = write_test_details(
            self.run_dir, result.test_details, list(self.ctx.data.classes), self.recipe.run.plots
        )
        text = format_summary(result, mode=self.ctx.mode, metric_names=self.ctx.task.metric_names(test=True))
        if files:
            text += "\ntest files " + ", ".join(p.name for p in files)
        table = model_summary(self.ctx.model, self.ctx.data.input_shape, self.ctx.device)
        atomic_write_text(self.run_dir / "summary.txt", text + "\n\n" + table + "\n")
        self.say(text)


def _weights_report(recipe: Recipe, report: Any) -> str:
    """The full lists of what ``model.weights`` loaded into the model and what it did not."""
    lines = [f"model.weights = {recipe.model.weights}", str(report), ""]
    for title, names in (("loaded", report.loaded), ("missing (kept as initialised)", report.missing),
                         ("unexpected (ignored)", report.unexpected),
                         ("shape mismatched (kept as initialised)",
                          [f"{k}: checkpoint {tuple(c)} vs model {tuple(m)}" for k, c, m in report.shape_mismatched])):
        lines += [f"{title}: {len(names)}"] + [f"  {n}" for n in names]
    return "\n".join(lines) + "\n"


def _best_weights(best_path: Path) -> dict[str, Any] | None:
    if not best_path.exists():
        return None
    best = load_checkpoint(best_path)
    return best.get("eval_model") or best["model"]


def run_recipe(recipe: Recipe, *, resume_dir: Path | None = None, plugins: Sequence[Plugin] = (),
               out: TextIO | None = None, quiet: bool = False, write: bool = True, test: bool = True) -> RunResult:
    """Train ``recipe`` into a new run directory (or continue ``resume_dir``), test best.pt, summarise.

    Args:
        plugins: extra plug-ins added after the run's own (a sweep's pruning reporter, lr-find).
        out: where messages go (default ``sys.stdout`` at call time).
        quiet: no progress bar and no messages.
        write: False runs without a run directory (no checkpoints, logs or summary): lr-find.
        test: evaluate best.pt on the test split at the end.
    """
    out = out if out is not None else sys.stdout
    own_group = not (runtime.torch_distributed_initialized())
    dist = runtime.init_distributed(recipe.dist.backend, recipe.dist.timeout_s)
    if not own_group or dist.world_size <= 1:
        if recipe.dist.strategy == "fsdp" and own_group:  # FSDP2 in one process: a group of one
            from trickbag.train.sharded import single_process_group

            with single_process_group(runtime.select_device(recipe.train.device, local_rank=dist.local_rank)):
                return _run(recipe, dist, resume_dir, plugins, out, quiet, write, test)
        return _run(recipe, dist, resume_dir, plugins, out, quiet, write, test)
    ok = False
    try:
        result = _run(recipe, dist, resume_dir, plugins, out, quiet, write, test)
        ok = True
        return result
    finally:
        # a process group left to the interpreter's exit can abort a rank ("terminate called
        # without an active exception") while another is still writing; wait for every rank
        # (only when all got here), then close the group this run opened
        runtime.shutdown_distributed(wait=ok)


def _run(recipe: Recipe, dist: runtime.DistInfo, resume_dir: Path | None, plugins: Sequence[Plugin],
         out: TextIO, quiet: bool, write: bool, test: bool) -> RunResult:
    session = _Session(recipe, dist, out, quiet, write)
    try:
        session.prepare(resume_dir)
        session.open(plugins)
        session.announce()
        wall = session.fit()
        result = session.result(wall, session.test() if test else {})
        session.summarise(result)
        return result
    finally:
        session.release()


def resume_run(run_dir: Path, overrides: list[str] | None = None, **kw: Any) -> RunResult:
    """Continue the run in ``run_dir`` from its newest readable checkpoint (overrides may extend epochs)."""
    from trickbag.errors import RecipeError

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RecipeError(f"--resume {str(run_dir)!r}: no such run directory")
    recipe = load_run_recipe(run_dir, list(overrides or []))
    return run_recipe(recipe, resume_dir=run_dir, **kw)
