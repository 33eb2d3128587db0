"""Runs on disk: create / resume a run directory, train, test, summarise; evaluate and predict from it.

A run directory holds: ``recipe.yaml`` (fully resolved), ``metrics.csv``, ``tb/`` (TensorBoard
events), ``checkpoints/last.pt`` and ``best.pt`` (plus ``step-N.pt`` when asked), ``curves.png``,
``lr.png`` and ``summary.txt``. Nothing is written outside it.
"""

from __future__ import annotations

import dataclasses
import datetime
import sys
import time
from pathlib import Path
from typing import Any, Optional, TextIO

import torch

from trickbag import runtime
from trickbag.config import Recipe, recipe_from_dict, recipe_to_yaml
from trickbag.errors import CheckpointError, TrickbagError
from trickbag.train.build import build, check_monitor, make_loader
from trickbag.train.builtin import CSVLogger, Checkpointing, Plots, ProgressBar, TensorBoardLogger, list_checkpoints
from trickbag.train.checkpoint import WriteError, atomic_write_text, check_state_fits, load_checkpoint
from trickbag.train.signals import GracefulInterrupt, kill_switch_from_env
from trickbag.train.distributed import on_main, scaling_notes
from trickbag.train.trainer import Trainer, _unwrap

__all__ = ["RunResult", "train_recipe", "resume_run", "evaluate_run", "predict_image", "find_resume_checkpoint"]


@dataclasses.dataclass
class RunResult:
    run_dir: Optional[Path]
    history: list[dict[str, float]]
    best: Optional[float]
    test: dict[str, float]
    wall_time_s: float
    stop_reason: Optional[str]
    interrupted: bool = False

    @property
    def final(self) -> dict[str, float]:
        return self.history[-1] if self.history else {}


def default_run_name(recipe: Recipe) -> str:
    return f"{recipe.name}-{datetime.datetime.now().strftime('%Y%m%d-%H%M%S')}"


def _say(msg: str, out: TextIO) -> None:
    if runtime.is_main_process():
        print(msg, file=out, flush=True)


def _position(ckpt: dict[str, Any], path: Path) -> tuple[int, int, int]:
    """(epoch, batch, update) a training checkpoint resumes at; CheckpointError if it has none."""
    c = ckpt.get("counters")
    try:
        if "model" not in ckpt or not isinstance(c, dict):
            raise KeyError("counters")
        return int(c["epoch"]), int(c.get("batch_idx") or 0), int(c["step"])
    except (KeyError, TypeError, ValueError):
        raise CheckpointError(f"checkpoint {str(path)!r} is not a trickbag training checkpoint") from None


def find_resume_checkpoint(run_dir: Path, out: Optional[TextIO] = None) -> tuple[Path, dict[str, Any]]:
    """The readable checkpoint of ``run_dir`` furthest into training; unreadable ones are reported and skipped.

    Candidates are ``step-N.pt`` and ``last.pt``; their recorded position (epoch, batch, update)
    decides, not file times (a copied run directory loses those), so a truncated or corrupted
    newest file makes the run fall back to the previous one.
    """
    out = out if out is not None else sys.stderr
    ckpt_dir = Path(run_dir) / "checkpoints"
    candidates = list_checkpoints(ckpt_dir)
    if not candidates:
        raise CheckpointError(f"{str(run_dir)!r} has no checkpoints to resume from (looked in {str(ckpt_dir)!r})")
    problems = []
    best: Optional[tuple[tuple[int, ...], Path]] = None
    for order, path in enumerate(candidates):  # newest file first: it wins ties
        try:
            key = (*_position(load_checkpoint(path, mmap=True), path), -order)  # mapped: only counters are read
        except CheckpointError as exc:
            problems.append(str(exc))
            continue
        if best is None or key > best[0]:
            best = (key, path)
    if best is None:
        note = f"{len(problems)} unreadable files, the first: " if len(problems) > 1 else ""
        raise CheckpointError(f"no readable checkpoint in {str(ckpt_dir)!r} ({note}{problems[0]})")
    path = best[1]
    for problem in problems:
        _say(f"trickbag: skipping {problem}", out)
    if problems:
        _say(f"trickbag: falling back to {path}", out)
    return path, load_checkpoint(path)


def _new_run_dir(recipe: Recipe) -> Path:
    name = recipe.run.name or default_run_name(recipe)
    run_dir = Path(recipe.run.dir) / name
    if run_dir.exists() and any(run_dir.iterdir()):
        raise TrickbagError(
            f"run directory {str(run_dir)!r} already exists; choose another run.name=..., "
            f"or continue it with: trickbag train --resume {run_dir}"
        )
    return run_dir


def _best_weights(best_path: Path) -> Optional[dict[str, Any]]:
    if not best_path.exists():
        return None
    best = load_checkpoint(best_path)
    return best.get("eval_model") or best["model"]


def remove_stale_temporaries(run_dir: Path) -> list[Path]:
    """Delete the temporary files a crash mid-write left in ``run_dir`` (``.<name>.<random>.tmp``)."""
    removed = []
    for folder in (Path(run_dir), Path(run_dir) / "checkpoints"):
        if folder.is_dir():
            for p in folder.glob(".*.tmp"):
                p.unlink(missing_ok=True)
                removed.append(p)
    return removed


def train_recipe(
    recipe: Recipe,
    *,
    resume_dir: Optional[Path] = None,
    out: Optional[TextIO] = None,
    quiet: bool = False,
) -> RunResult:
    """Train ``recipe`` into a new run directory (or continue ``resume_dir``); test best.pt; summarise.

    Messages go to ``out`` (default: ``sys.stdout`` at call time).
    """
    out = out if out is not None else sys.stdout
    own_group = not (torch.distributed.is_available() and torch.distributed.is_initialized())
    dist = runtime.init_distributed(recipe.dist.backend, recipe.dist.timeout_s)
    if not own_group or dist.world_size <= 1:
        return _train_recipe(recipe, dist, resume_dir, out, quiet)
    ok = False
    try:
        result = _train_recipe(recipe, dist, resume_dir, out, quiet)
        ok = True
        return result
    finally:
        # a process group left to the interpreter's exit can abort a rank ("terminate called
        # without an active exception") while another is still writing; wait for every rank
        # (only when all got here), then close the group this run opened
        runtime.shutdown_distributed(wait=ok)


def _train_recipe(
    recipe: Recipe,
    dist: "runtime.DistInfo",
    resume_dir: Optional[Path],
    out: TextIO,
    quiet: bool,
) -> RunResult:
    main = dist.is_main
    ckpt: Optional[dict[str, Any]] = None
    # under DDP rank 0 decides (run name, resume checkpoint) and hands the result to every rank:
    # ranks agree, and no rank but 0 needs to see the run directory
    if resume_dir is not None:
        run_dir = Path(resume_dir)
        ckpt_path, ckpt = on_main(lambda: find_resume_checkpoint(run_dir))
    else:
        run_dir = on_main(lambda: _new_run_dir(recipe))
    trainer, ctx = build(recipe, run_dir=run_dir)
    check_monitor(recipe, ctx.val_loader is not None)
    if ckpt is not None:
        check_state_fits(_unwrap(trainer.model), ckpt["model"], f"checkpoint {str(ckpt_path)!r}")
        try:
            trainer.load_state_dict(ckpt)
        except (RuntimeError, KeyError, ValueError) as exc:
            raise CheckpointError(
                f"checkpoint {str(ckpt_path)!r} does not fit this recipe's model/optimizer: {str(exc).splitlines()[0]}"
            ) from None
    # --- from here on, files are written (rank 0 only)
    plugins = []
    recipe_dict = recipe.model_dump(mode="json")
    if main:
        run_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(run_dir / "recipe.yaml", recipe_to_yaml(recipe))
        plugins.append(CSVLogger(run_dir / "metrics.csv", every_steps=recipe.log.every_steps))
        if recipe.log.tensorboard:
            plugins.append(TensorBoardLogger(run_dir / "tb", every_steps=recipe.log.every_steps))
        if recipe.log.wandb:
            from trickbag.train.tricks.loggers import WandbLogger

            plugins.append(WandbLogger(run_dir, recipe_dict, every_steps=recipe.log.every_steps))
        if recipe.run.plots:
            plugins.append(Plots(run_dir))
        if recipe.run.progress and not quiet:
            plugins.append(ProgressBar(every_steps=max(1, min(10, recipe.log.every_steps))))
        plugins.append(
            Checkpointing(
                run_dir / "checkpoints",
                monitor=recipe.train.monitor,
                mode=recipe.train.mode,
                every_steps=recipe.train.checkpoint_every_steps,
                keep=recipe.train.keep_checkpoints,
                extra={"recipe": recipe_dict, "classes": ctx.data.classes, **ctx.checkpoint_extra},
            )
        )
    for p in plugins:
        trainer.add_plugin(p)
        if isinstance(p, Checkpointing):  # epoch-end checkpoints after every plug-in's EPOCH_END
            trainer.add_plugin(p.at_epoch_end, first=True)
    if ckpt is not None:  # plug-ins added after load need their state too
        states = ckpt.get("plugins", {})
        for p in plugins:
            if p.key in states:
                p.load_state_dict(states[p.key])
        _say(f"resuming {run_dir} from {ckpt_path.name} at epoch {trainer.state.epoch + 1}, "
             f"update {trainer.state.step}", out)
    if main and not quiet:
        eff = recipe.data.batch_size * recipe.train.accumulate * dist.world_size
        _say(
            f"trickbag: training {recipe.name!r} ({recipe.model.name}, {sum(p.numel() for p in ctx.model.parameters()):,} "
            f"parameters) on {ctx.device}; {len(ctx.data.train)} train / "
            f"{len(ctx.data.val) if ctx.data.val is not None else 0} val / "
            f"{len(ctx.data.test) if ctx.data.test is not None else 0} test samples; effective batch {eff}",
            out,
        )
        if dist.world_size > 1:
            for line in scaling_notes(recipe.data.batch_size, recipe.train.accumulate, dist.world_size, recipe.optim.lr):
                _say(f"  {line}", out)
        for note in ctx.notes:
            _say(f"  {note}", out)
    if main and ckpt is not None:
        remove_stale_temporaries(run_dir)
    interrupt = GracefulInterrupt(out=sys.stderr if main else None)
    trainer.add_plugin(interrupt)
    kill_switch = kill_switch_from_env()  # test seam: crash on purpose at a chosen point
    if kill_switch is not None:
        trainer.add_plugin(kill_switch)
        kill_switch.install()
    t0 = time.perf_counter()
    try:
        with interrupt:
            state = trainer.fit()
    except (CheckpointError, WriteError) as exc:  # disk full, permission lost: say how to continue
        raise type(exc)(f"{exc}; training stopped, continue with: trickbag train --resume {run_dir}") from None
    finally:
        if kill_switch is not None:
            kill_switch.restore()
    wall = time.perf_counter() - t0
    interrupted = bool(state.stop_reason and state.stop_reason.startswith("interrupted"))
    test: dict[str, float] = {}
    best_value = None
    for p in plugins:
        if isinstance(p, Checkpointing):
            best_value = p.best
    if not interrupted and ctx.test_loader is not None:
        best_path = run_dir / "checkpoints" / "best.pt"
        weights = on_main(lambda: _best_weights(best_path))  # rank 0 reads it; every rank gets it
        if weights is not None:
            _unwrap(trainer.model).load_state_dict(weights)
            state.predict = None
        test = {f"test/{k}": v for k, v in trainer.evaluate(ctx.test_loader).items()}
    result = RunResult(run_dir, state.history, best_value, test, wall, state.stop_reason, interrupted)
    if main:
        summary = format_summary(recipe, result, trainer)
        atomic_write_text(run_dir / "summary.txt", summary + "\n\n" + model_summary(ctx) + "\n")
        if not quiet:
            _say(summary, out)
    return result


def format_summary(recipe: Recipe, r: RunResult, trainer: Trainer) -> str:
    m = r.final
    mode = recipe.train.mode
    lines = [f"run        {r.run_dir}"]
    vals = [(int(h["epoch"]) + 1, h["val/acc"]) for h in r.history if "val/acc" in h]
    if vals:
        top = max(v for _, v in vals)
        best_epoch = [e for e, v in vals if v == top][-1]  # ties go to the later epoch, like best.pt
        lines.append(f"val acc    best {top:.4f} (epoch {best_epoch}), final {vals[-1][1]:.4f}")
    if r.best is not None and recipe.train.monitor != "val/acc":
        lines.append(f"best {recipe.train.monitor} = {r.best:.6g} ({mode})")
    if "train/loss" in m:
        lines.append(f"train loss final {m['train/loss']:.4f}")
    if r.test:
        lines.append(f"test acc   {r.test['test/acc']:.4f} on {int(r.test['test/n'])} samples (best.pt), "
                     f"loss {r.test['test/loss']:.4f}")
    lines.append(f"wall time  {r.wall_time_s:.1f} s for {len(r.history)} epochs, {trainer.state.step} updates")
    if r.stop_reason:
        lines.append(f"stopped    {r.stop_reason}")
    if trainer.state.skipped_steps:
        nonfinite = int(trainer.state.extra.get("nonfinite_skipped", 0))
        overflow = trainer.state.skipped_steps - nonfinite
        parts = [f"{nonfinite} non-finite loss/gradients"] if nonfinite else []
        parts += [f"{overflow} fp16 overflow (normal, the GradScaler adapts)"] if overflow else []
        lines.append(f"skipped    {trainer.state.skipped_steps} updates: {', '.join(parts)}")
    return "\n".join(lines)


def model_summary(ctx: Any) -> str:
    try:
        import torchinfo

        x = torch.zeros((1, *ctx.data.input_shape), device=ctx.device)
        model = _unwrap(ctx.model)
        was = model.training
        stats = torchinfo.summary(model, input_data=x, verbose=0, device=ctx.device)
        model.train(was)
        return str(stats)
    except Exception as exc:  # the summary is informative only
        n = sum(p.numel() for p in ctx.model.parameters())
        return f"parameters: {n:,} (torchinfo summary unavailable: {exc})"


def _load_run_recipe(run_dir: Path, overrides: list[str]) -> Recipe:
    from trickbag.config import load_run_recipe

    return load_run_recipe(run_dir, overrides)


def resume_run(run_dir: Path, overrides: list[str] | None = None, **kw: Any) -> RunResult:
    """Continue the run in ``run_dir`` from its newest readable checkpoint (overrides may extend epochs)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise TrickbagError(f"--resume {str(run_dir)!r}: no such run directory")
    recipe = _load_run_recipe(run_dir, list(overrides or []))
    return train_recipe(recipe, resume_dir=run_dir, **kw)


def _model_from_checkpoint(
    ckpt_path: Path, *, trust_code: bool = False
) -> tuple[Recipe, torch.nn.Module, dict[str, Any], Any]:
    """Rebuild the model a run checkpoint names and load its weights.

    The checkpoint's recipe is data from a file that may come from anywhere: a
    ``package.module:function`` model name in it would import and run code, so it is refused unless
    ``trust_code`` (``--trust-model-code`` on the command line) says the user trusts the file.
    """
    from trickbag.data.sources import build_data
    from trickbag.models import build_model

    ckpt = load_checkpoint(ckpt_path)
    if "recipe" not in ckpt or "model" not in ckpt:
        raise CheckpointError(f"checkpoint {str(ckpt_path)!r} is not a trickbag run checkpoint (no recipe/model)")
    if not isinstance(ckpt["recipe"], dict):
        raise CheckpointError(f"checkpoint {str(ckpt_path)!r} has a malformed recipe entry")
    recipe = recipe_from_dict(ckpt["recipe"])
    if ":" in recipe.model.name and not trust_code:
        raise CheckpointError(
            f"checkpoint {str(ckpt_path)!r} names model code {recipe.model.name!r}; building it would import and run "
            "that code, so it is refused: pass --trust-model-code only if you trust where the file came from"
        )
    data = build_data(recipe.data)
    model = build_model(recipe.model.name, data.input_shape, recipe.model.num_classes or data.num_classes,
                        **recipe.model.kwargs)
    weights = ckpt.get("eval_model") or ckpt["model"]
    check_state_fits(model, weights, f"checkpoint {str(ckpt_path)!r}")
    try:
        model.load_state_dict(weights)
    except RuntimeError as exc:
        raise CheckpointError(f"checkpoint {str(ckpt_path)!r} does not fit model {recipe.model.name!r}: "
                              f"{str(exc).splitlines()[0]}") from None
    model.eval()
    return recipe, model, ckpt, data


#: recipe tricks that change how a trained model predicts (they wrap ``state.predict``):
#: ``trickbag eval`` and ``predict`` apply them as the run's own evaluation did
EVAL_TRICKS = ("multiscale", "tta")


def eval_plugins(recipe: Recipe, data: Any) -> list[Any]:
    """The plug-ins of ``recipe``'s enabled :data:`EVAL_TRICKS`, configured, in the training order.

    Evaluating a checkpoint with them gives the numbers the run itself reported (flip TTA, the
    FixRes test size); EMA/SWA need nothing here, since their checkpoints hold the averaged weights.
    """
    from types import SimpleNamespace

    from trickbag.train.tricks import ORDER, TRICKS, _load

    _load()
    plugins: list[Any] = []
    for name in ORDER:
        cfg = getattr(recipe.tricks, name, None)
        if name in EVAL_TRICKS and cfg is not None and getattr(cfg, "enabled", False):
            plugins += TRICKS[name].factory(cfg, recipe)
    ctx = SimpleNamespace(recipe=recipe, data=data, notes=[])
    for p in plugins:
        configure = getattr(p, "configure", None)
        if configure is not None:
            configure(ctx)
    return plugins


def describe_eval_tricks(recipe: Recipe) -> list[str]:
    """One phrase per evaluation trick ``recipe`` turns on (for ``trickbag eval``/``predict`` output)."""
    out = []
    ms, tta = recipe.tricks.multiscale, recipe.tricks.tta
    if ms.enabled and ms.test_size:
        out.append(f"test size {ms.test_size}x{ms.test_size} (tricks.multiscale)")
    if tta.enabled:
        flips = " + ".join(f for f, on in (("hflip", tta.hflip), ("vflip", tta.vflip)) if on)
        out.append(f"flip TTA: {flips}, {tta.average} averaged (tricks.tta)")
    return out


def evaluate_run(path: Path, split: str = "test", device: str = "auto", *, trust_code: bool = False,
                 plain: bool = False, tricks: Optional[list[str]] = None) -> dict[str, float]:
    """Metrics of a run's best.pt (or of a checkpoint file) on the recipe's ``split``.

    The recipe's evaluation tricks (:data:`EVAL_TRICKS`: flip TTA, the multi-scale test size) are
    applied as in the run itself, unless ``plain``; ``tricks``, when given, receives one phrase per
    evaluation trick the recipe turns on (:func:`describe_eval_tricks`).
    """
    path = Path(path)
    ckpt_path = path / "checkpoints" / "best.pt" if path.is_dir() else path
    if path.is_dir() and not ckpt_path.exists():
        raise CheckpointError(f"{str(path)!r} has no checkpoints/best.pt")
    recipe, model, _, data = _model_from_checkpoint(ckpt_path, trust_code=trust_code)
    if tricks is not None:
        tricks += describe_eval_tricks(recipe)
    ds = {"test": data.test, "val": data.val, "train": data.eval_train}.get(split)
    if ds is None:
        raise TrickbagError(f"split {split!r} is empty for this recipe; allowed: test, val, train")
    dev = runtime.select_device(device)
    loader = make_loader(ds, recipe, train=False, dist=runtime.DistInfo(), device=dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    t = Trainer(model, opt, loader, device=dev, precision=recipe.train.precision if recipe.train.precision != "16" else "32",
                plugins=[] if plain else eval_plugins(recipe, data))
    return t.evaluate(loader)


def predict_image(ckpt_path: Path, image_path: Path, top: int = 5, *, trust_code: bool = False,
                  plain: bool = False, tricks: Optional[list[str]] = None) -> list[tuple[str, float]]:
    """Class probabilities of one image under a run checkpoint, highest first.

    The recipe's evaluation tricks (flip TTA, the multi-scale test size) are applied unless
    ``plain``; ``tricks`` receives their descriptions, as in :func:`evaluate_run`.
    """
    from PIL import Image, UnidentifiedImageError

    image_path = Path(image_path)
    if not image_path.is_file():
        raise TrickbagError(f"image {str(image_path)!r} does not exist")
    try:
        with Image.open(image_path) as im:
            img = im.copy()
    except (UnidentifiedImageError, OSError):
        raise TrickbagError(f"{str(image_path)!r} is not an image file PIL can read") from None
    recipe, model, ckpt, data = _model_from_checkpoint(Path(ckpt_path), trust_code=trust_code)
    if data.predict_transform is None:
        raise TrickbagError(f"data source {recipe.data.name!r} does not take images; predict works on image recipes")
    x = data.predict_transform(img).unsqueeze(0)
    if tricks is not None:
        tricks += describe_eval_tricks(recipe)
    from types import SimpleNamespace

    # the evaluation tricks wrap `predict` exactly as at the trainer's EVAL_START, in the same order
    view = SimpleNamespace(model=model, predict=None)
    for p in [] if plain else eval_plugins(recipe, data):
        p.on_eval_start(view)
    forward = view.predict or model
    with torch.inference_mode():
        probs = torch.softmax(forward(x).float(), dim=1)[0]
    classes = ckpt.get("classes") or data.classes
    order = torch.argsort(probs, descending=True)[:top].tolist()
    return [(str(classes[i]) if i < len(classes) else str(i), float(probs[i])) for i in order]
