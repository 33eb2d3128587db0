"""Trainer overhead: trickbag.Trainer vs a hand-written loop on the default digits model, side by side.

Three variants train the same model (``SmallCNN`` of the ``digits`` recipe) from the same initial
weights, on the same data loader, with the same optimizer, LR schedule and seed, for ``--epochs``
epochs each (training + one validation pass per epoch):

* ``hand``: the loop a careful user writes (zero_grad, forward, loss, backward, step, schedule, running
  loss / accuracy, validation under ``inference_mode``);
* ``trainer``: ``trickbag.Trainer`` with no plug-ins (logging off);
* ``trainer+log``: the Trainer with ``CSVLogger`` + ``TensorBoardLogger`` + ``ProgressBar`` (the
  bar renders into /dev/null, the files go to a temporary directory), as ``trickbag train`` uses them;
* ``lightning``: only when Lightning is installed (``pytorch-lightning`` is in the ``bench`` extra;
  the unified ``lightning`` package works too), with logger, checkpointing, bar and summary off.

The variants alternate inside one process (order rotated every round, one warm-up round discarded);
the table gives the median per-epoch wall time, the median over rounds of the ratio to the ``hand``
run of the same round, and the median peak RSS of a run.  Targets: ratio <= 1.02 (logging off),
<= 1.05 (logging on).  Because all variants draw the same random numbers in the same order, the final
weights must agree; the script checks it (a variant computing something else would not be a fair
comparison).

Run: ``.venv/bin/python benchmarks/overhead.py [--epochs 2] [--rounds 21] [--threads 1] [--profile]``
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import importlib.util
import io
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from trickbag import runtime  # noqa: E402
from trickbag.data.sources import build_data  # noqa: E402
from trickbag.models import SmallCNN  # noqa: E402
from trickbag.recipe import load_recipe  # noqa: E402
from trickbag.train import Event, Trainer  # noqa: E402
from trickbag.train.parts import build_schedule, make_loader, optimizer_spec  # noqa: E402
from trickbag.train.plugins.loggers import CSVLogger, TensorBoardLogger  # noqa: E402
from trickbag.train.plugins.progress import ProgressBar  # noqa: E402

TARGETS = {"trainer": 1.02, "trainer+log": 1.05}



def _optimizer(recipe, model):
    """The recipe's optimizer over all of ``model``'s parameters, one group (as the Trainer builds it)."""
    cls, kwargs = optimizer_spec(recipe)
    return cls([{"params": list(model.parameters())}], **kwargs)

class Setup:
    """The shared pieces: recipe, data loaders, initial weights, seed."""

    def __init__(self, epochs: int, seed: int) -> None:
        self.epochs = epochs
        self.seed = seed
        self.recipe = load_recipe("digits", [f"train.epochs={epochs}", f"train.seed={seed}"])
        dist = runtime.dist_info()
        self.device = torch.device("cpu")
        self.data = build_data(self.recipe.data)
        self.train_loader = make_loader(self.data.train, self.recipe, train=True, dist=dist, device=self.device)
        self.val_loader = make_loader(self.data.val, self.recipe, train=False, dist=dist, device=self.device)
        self.steps_per_epoch = len(self.train_loader)
        runtime.seed_everything(seed)
        self.init_state = copy.deepcopy(self.new_model_raw().state_dict())

    def new_model_raw(self) -> torch.nn.Module:
        return SmallCNN(self.data.input_shape[0], self.data.num_classes)

    def fresh(self) -> tuple[torch.nn.Module, torch.optim.Optimizer, Any]:
        """Model at the shared initial weights, the recipe's optimizer (SGD+nesterov) and schedule (warmup+cosine)."""
        model = self.new_model_raw()
        model.load_state_dict(self.init_state)
        opt = _optimizer(self.recipe, model)
        sched = build_schedule(self.recipe, opt, self.steps_per_epoch)
        return model, opt, sched


def hand_loop(s: Setup, model: torch.nn.Module, opt: torch.optim.Optimizer, sched: Any) -> dict[str, float]:
    """The hand-written loop: the same work the Trainer does with no plug-ins."""
    sampler = s.train_loader.sampler
    val_acc = float("nan")
    for epoch in range(s.epochs):
        sampler.set_epoch(epoch)
        model.train()
        loss_sum = torch.zeros((), dtype=torch.float64)
        correct = torch.zeros((), dtype=torch.int64)
        seen = 0
        for x, y in s.train_loader:
            out = model(x)
            loss = F.cross_entropy(out, y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            sched.step()
            with torch.no_grad():
                loss_sum += loss.detach().double() * y.shape[0]
                correct += (out.argmax(1) == y).sum()
            seen += y.shape[0]
        train_loss = loss_sum.item() / seen  # noqa: F841 - a real loop logs it
        model.eval()
        with torch.inference_mode():
            vc = torch.zeros((), dtype=torch.int64)
            vn = 0
            for x, y in s.val_loader:
                vc += (model(x).argmax(1) == y).sum()
                vn += y.shape[0]
        val_acc = vc.item() / vn
    return {"val_acc": val_acc}


def run_hand(s: Setup, rss: C.PeakRSS) -> dict[str, Any]:
    model, opt, sched = s.fresh()
    runtime.seed_everything(s.seed)  # augmentation (random shifts) and dropout draw from the global RNG
    rss.reset()
    c0, t0 = time.process_time(), time.perf_counter()
    out = hand_loop(s, model, opt, sched)
    out["seconds"], out["cpu"] = time.perf_counter() - t0, time.process_time() - c0
    out["rss_mb"] = rss.peak_mb()
    out["state"] = model.state_dict()
    return out


class HookClock:
    """Wall / CPU seconds spent inside plug-in hooks: wraps each overridden ``on_<event>`` of the instances."""

    def __init__(self, plugins: list[Any]) -> None:
        self.wall = self.cpu = 0.0
        for p in plugins:
            for event in Event:
                if p.handles(event):
                    name = "on_" + event.value
                    setattr(p, name, self._wrap(getattr(p, name)))

    def _wrap(self, fn: Any) -> Any:
        def timed(state: Any) -> None:
            c0, t0 = time.process_time(), time.perf_counter()
            try:
                fn(state)
            finally:
                self.wall += time.perf_counter() - t0
                self.cpu += time.process_time() - c0

        return timed


def run_trainer(s: Setup, rss: C.PeakRSS, logging: bool) -> dict[str, Any]:
    model, opt, sched = s.fresh()
    runtime.seed_everything(s.seed)
    with tempfile.TemporaryDirectory(prefix="trickbag-bench-") as tmp, open(os.devnull, "w") as devnull:
        plugins = []
        if logging:  # as trickbag.runs.run.run_recipe adds them (log.every_steps=10)
            every = s.recipe.log.every_steps
            plugins = [CSVLogger(Path(tmp) / "metrics.csv", every_steps=every),
                       TensorBoardLogger(Path(tmp) / "tb", every_steps=every),
                       ProgressBar(every_steps=max(1, min(10, every)), file=devnull)]
        clock = HookClock(plugins)
        rss.reset()
        c0, t0 = time.process_time(), time.perf_counter()
        trainer = Trainer(model, opt, s.train_loader, s.val_loader, scheduler=sched, plugins=plugins,
                          max_epochs=s.epochs, device=s.device)
        state = trainer.fit()
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        peak = rss.peak_mb()
    return {
        "seconds": seconds,
        "cpu": cpu,
        "rss_mb": peak,
        "val_acc": state.metrics["val/acc"],
        "state": model.state_dict(),
        "hooks": clock.wall,
        "hooks_cpu": clock.cpu,
    }


class NullSetup:
    """The loop's own cost: a model with almost no compute (Flatten + Linear 64 -> 10) on pre-collated
    in-memory batches of the digits training set (no augmentation, no validation), many epochs per run."""

    def __init__(self, s: Setup, epochs: int) -> None:
        x, y = s.data.eval_train.x, s.data.eval_train.y
        bs = s.recipe.data.batch_size
        self.batches = [(x[i:i + bs], y[i:i + bs]) for i in range(0, len(y), bs)]
        self.epochs = epochs
        self.steps = epochs * len(self.batches)
        self.in_features = x[0].numel()
        self.num_classes = s.data.num_classes
        self.recipe = s.recipe
        torch.manual_seed(0)
        self.init = copy.deepcopy(self._model().state_dict())

    def _model(self) -> torch.nn.Module:
        return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(self.in_features, self.num_classes))

    def fresh(self) -> tuple[torch.nn.Module, torch.optim.Optimizer, Any]:
        model = self._model()
        model.load_state_dict(self.init)
        opt = _optimizer(self.recipe, model)
        return model, opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0)


def null_hand(n: NullSetup) -> dict[str, float]:
    model, opt, sched = n.fresh()
    c0, t0 = time.process_time(), time.perf_counter()
    for _ in range(n.epochs):
        model.train()
        loss_sum = torch.zeros((), dtype=torch.float64)
        correct = torch.zeros((), dtype=torch.int64)
        seen = 0
        for x, y in n.batches:
            out = model(x)
            loss = F.cross_entropy(out, y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            sched.step()
            with torch.no_grad():
                loss_sum += loss.detach().double() * y.shape[0]
                correct += (out.argmax(1) == y).sum()
            seen += y.shape[0]
        _ = loss_sum.item() / seen, correct.item() / seen
    return {"seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0}


def null_trainer(n: NullSetup, logging: bool) -> dict[str, float]:
    model, opt, sched = n.fresh()
    with tempfile.TemporaryDirectory(prefix="trickbag-bench-") as tmp, open(os.devnull, "w") as devnull:
        plugins = []
        if logging:
            every = n.recipe.log.every_steps
            plugins = [CSVLogger(Path(tmp) / "metrics.csv", every_steps=every),
                       TensorBoardLogger(Path(tmp) / "tb", every_steps=every),
                       ProgressBar(every_steps=max(1, min(10, every)), file=devnull)]
        c0, t0 = time.process_time(), time.perf_counter()
        Trainer(model, opt, n.batches, None, scheduler=sched, plugins=plugins, max_epochs=n.epochs,
                device="cpu").fit()
        return {"seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0}


def null_section(s: Setup, epochs: int, rounds: int, warmup: int, hand_step_cpu_s: float) -> str:
    n = NullSetup(s, epochs)
    print(f"\nnull model: {n.steps} steps per run ({epochs} epochs of {len(n.batches)} batches), {rounds} rounds",
          file=sys.stderr)
    res = C.alternate({"hand": lambda: null_hand(n), "trainer": lambda: null_trainer(n, False),
                       "trainer+log": lambda: null_trainer(n, True)}, rounds, warmup, progress=False)
    rows = []
    for name, runs in res.items():
        extra_wall = [(a["seconds"] - b["seconds"]) / n.steps for a, b in zip(runs, res["hand"])]
        extra_cpu = [(a["cpu"] - b["cpu"]) / n.steps for a, b in zip(runs, res["hand"])]
        rows.append([
            name,
            f"{1e6 * C.median(r['seconds'] for r in runs) / n.steps:.0f}",
            f"{1e6 * C.median(r['cpu'] for r in runs) / n.steps:.0f}",
            "" if name == "hand" else f"{1e6 * C.median(extra_wall):+.0f}",
            "" if name == "hand" else f"{1e6 * C.median(extra_cpu):+.0f}",
            "" if name == "hand" else f"{100 * C.median(extra_cpu) / hand_step_cpu_s:+.2f} %",
        ])
    return C.markdown_table(["variant (null model)", "wall us/step", "CPU us/step", "extra wall us/step vs hand",
                             "extra CPU us/step vs hand", "extra CPU as share of a SmallCNN step"], rows)


def _lightning_module_name() -> str | None:
    """``lightning`` (the unified package) or ``pytorch_lightning`` (the bench extra's), whichever is installed."""
    for name in ("lightning", "pytorch_lightning"):
        if importlib.util.find_spec(name) is not None:
            return name
    return None


def lightning_available() -> bool:
    return _lightning_module_name() is not None


def run_lightning(s: Setup, rss: C.PeakRSS) -> dict[str, Any]:  # pragma: no cover - needs lightning
    import importlib
    import logging
    import warnings

    warnings.filterwarnings("ignore", message=".*LeafSpec.*")  # its own deprecation notice on newer torch
    name = _lightning_module_name()
    L = importlib.import_module(name)
    for logger in ("lightning.pytorch", "pytorch_lightning", "lightning_fabric", "lightning"):
        logging.getLogger(logger).setLevel(logging.ERROR)  # no GPU/TPU banner, tips, "max_epochs reached"

    class Module(L.LightningModule):
        def __init__(self, model, opt, sched):
            super().__init__()
            self.model, self._opt, self._sched = model, opt, sched

        def training_step(self, batch, batch_idx):
            x, y = batch
            return F.cross_entropy(self.model(x), y)

        def validation_step(self, batch, batch_idx):
            x, y = batch
            self.log("val_acc", (self.model(x).argmax(1) == y).float().mean(), on_epoch=True, batch_size=len(y))

        def configure_optimizers(self):
            return {"optimizer": self._opt, "lr_scheduler": {"scheduler": self._sched, "interval": "step"}}

    model, opt, sched = s.fresh()
    runtime.seed_everything(s.seed)
    rss.reset()
    c0, t0 = time.process_time(), time.perf_counter()
    trainer = L.Trainer(max_epochs=s.epochs, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0)
    trainer.fit(Module(model, opt, sched), s.train_loader, s.val_loader)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {
        "seconds": seconds,
        "cpu": cpu,
        "rss_mb": rss.peak_mb(),
        "val_acc": float(trainer.callback_metrics["val_acc"]),
        "state": model.state_dict(),
    }


def max_abs_diff(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    return max(float((a[k].double() - b[k].double()).abs().max()) if a[k].numel() else 0.0 for k in a)


def profile(s: Setup, rss: C.PeakRSS, logging: bool, top: int = 25) -> str:
    """cProfile of one Trainer run (after a warm-up), sorted by own time: where the overhead goes."""
    run_trainer(s, rss, logging)
    prof = cProfile.Profile()
    prof.enable()
    run_trainer(s, rss, logging)
    prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(top)
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2, help="epochs per run (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--null-epochs", type=int, default=20,
                        help="epochs per run of the null-model section (0 skips it; default 20)")
    parser.add_argument("--profile", action="store_true", help="also print a cProfile of one Trainer run with logging")
    C.add_common_args(parser, rounds=21)
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.epochs < 1:
        parser.error("--rounds and --epochs must be >= 1")
    C.setup(args, "Trainer overhead vs a hand-written loop (digits, SmallCNN)")

    s = Setup(args.epochs, args.seed)
    rss = C.PeakRSS()
    print(f"model: SmallCNN ({sum(p.numel() for p in s.new_model_raw().parameters()):,} parameters); "
          f"{len(s.data.train)} train / {len(s.data.val)} val samples, batch {s.recipe.data.batch_size}, "
          f"{s.steps_per_epoch} steps/epoch, {args.epochs} epochs/run, {args.rounds} rounds "
          f"(+{args.warmup} warm-up) alternating in one process")
    variants = {
        "hand": lambda: run_hand(s, rss),
        "trainer": lambda: run_trainer(s, rss, logging=False),
        "trainer+log": lambda: run_trainer(s, rss, logging=True),
    }
    if lightning_available():
        variants["lightning"] = lambda: run_lightning(s, rss)
    results = C.alternate(variants, args.rounds, args.warmup)

    hand_t = [r["seconds"] for r in results["hand"]]
    hand_c = [r["cpu"] for r in results["hand"]]
    rows = []
    for name, runs in results.items():
        t, c = [r["seconds"] for r in runs], [r["cpu"] for r in runs]
        wall_ratio, cpu_ratio = C.ratios(t, hand_t), C.ratios(c, hand_c)
        target = TARGETS.get(name)
        met = ""
        if target is not None:
            met = " / ".join("yes" if C.median(x) <= target else "NO" for x in (wall_ratio, cpu_ratio))
        diff = 0.0 if name == "hand" else max_abs_diff(runs[0]["state"], results["hand"][0]["state"])
        rows.append([
            name,
            f"{1000 * C.median(t) / args.epochs:.0f}",
            f"{C.median(wall_ratio):.3f}",
            C.spread(wall_ratio),
            f"{1000 * C.median(c) / args.epochs:.0f}",
            f"{C.median(cpu_ratio):.3f}",
            C.spread(cpu_ratio),
            f"<= {target}" if target else "",
            met,
            f"{C.median(r['rss_mb'] for r in runs):.0f}",
            (f"{1000 * C.median(r['hooks'] for r in runs) / args.epochs:.1f} / "
             f"{1000 * C.median(r['hooks_cpu'] for r in runs) / args.epochs:.1f}") if "hooks" in runs[0] else "",
            f"{C.median(r['val_acc'] for r in runs):.4f}",
            f"{diff:.1e}",
        ])
    if not lightning_available():
        rows.append(["lightning", "not installed"] + [""] * 11)
    print()
    print(
        C.markdown_table(
            [
                "variant",
                "wall ms/epoch",
                "wall ratio",
                "wall ratio range",
                "CPU ms/epoch",
                "CPU ratio",
                "CPU ratio range",
                "target",
                "met (wall / CPU)",
                "peak RSS MB",
                "in plug-in hooks ms/epoch (wall / CPU)",
                "val acc",
                "max |w - w_hand|",
            ],
            rows,
        )
    )
    if not rss.resettable:
        print("\n(peak RSS: /proc/self/clear_refs unavailable; values are the process peak so far)")
    print("\nms/epoch: median over rounds of a run's time (construction + training + one validation pass per epoch)"
          " / epochs; wall = perf_counter, CPU = process_time (all threads of this process, so background"
          " load from other processes inflates it far less).\nratio: per round, the variant's time over the"
          " hand loop's time in the same round; median (and range) over rounds. peak RSS: whole process"
          " (torch libraries included), high-water mark reset before each run.")
    if args.null_epochs:
        hand_step_cpu = C.median(hand_c) / (args.epochs * s.steps_per_epoch)
        print()
        print(null_section(s, args.null_epochs, max(args.rounds, 9), args.warmup, hand_step_cpu))
        print("\nnull model: the same loops around Flatten+Linear on pre-collated batches, so nearly all the time is"
              " the loop itself; extra = median over rounds of (variant - hand) / steps; share = that extra CPU time"
              " over the hand loop's CPU time per step of the SmallCNN table above.")
    if args.profile:
        print("\n## cProfile of one Trainer run with logging (sorted by own time)\n")
        print(profile(s, rss, logging=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
