"""``trickbag summary``, ``stats``, ``profile``: inspect a recipe without training it."""

from __future__ import annotations

import argparse
import datetime
import itertools
from collections.abc import Sized
from pathlib import Path
from typing import cast

from trickbag.errors import TrickbagError

__all__ = ["register"]


def _recipe(args: argparse.Namespace):
    from trickbag.recipe import load_recipe

    return load_recipe(args.recipe, list(args.overrides))


def cmd_summary(args: argparse.Namespace) -> int:
    """torchinfo's table for the recipe's model, on one sample of the recipe's input shape."""
    from trickbag.data.sources import build_data
    from trickbag.nn import count_parameters, summary
    from trickbag.train.parts import model_for

    recipe = _recipe(args)
    data = build_data(recipe.data, recipe.task)
    model = model_for(recipe, data)
    print(summary(model, (1, *data.input_shape), verbose=0, depth=args.depth))
    print(f"parameters: {count_parameters(model):,} ({count_parameters(model, trainable_only=True):,} trainable)")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    """Per-channel mean/std of the recipe's training inputs, ready to paste into the recipe."""
    import torch

    from trickbag.data import mean_std
    from trickbag.data.sources import build_data

    recipe = _recipe(args)
    if recipe.data.name == "imagefolder":
        # statistics of the raw pixels: drop the normalisation the recipe would apply
        recipe = recipe.model_copy(deep=True)
        recipe.data.mean = [0.0] * len(recipe.data.mean or [0, 0, 0])
        recipe.data.std = [1.0] * len(recipe.data.std or [1, 1, 1])
        recipe.data.augment = False
    data = build_data(recipe.data, recipe.task)
    ds = data.eval_train if data.eval_train is not None else data.train
    loader = torch.utils.data.DataLoader(ds, batch_size=256, num_workers=recipe.data.num_workers)
    mean, std = mean_std(loader)
    fmt = lambda t: "[" + ", ".join(f"{v:.4f}" for v in t.tolist()) + "]"  # noqa: E731
    note = "" if recipe.data.name == "imagefolder" else "  # after the source's own normalisation"
    n = len(cast(Sized, ds))  # the sources' datasets are map-style, with a length
    print(f"# {n} training samples, {len(mean)} channel(s){note}")
    print("data:")
    print(f"  mean: {fmt(mean)}")
    print(f"  std: {fmt(std)}")
    return 0


def cmd_profile(args: argparse.Namespace) -> int:
    """torch.profiler over a few real training steps of the recipe; top ops printed, Chrome trace saved."""
    from trickbag.extras.debug import profile_steps
    from trickbag.train.build import build

    recipe = _recipe(args)
    trainer, ctx = build(recipe)
    name = recipe.run.name or f"{recipe.name}-profile-{datetime.datetime.now().strftime('%Y%m%d-%H%M%S')}"
    out_dir = Path(args.out) if args.out else Path(recipe.run.dir) / name
    if out_dir.exists() and any(out_dir.iterdir()):
        raise TrickbagError(f"output directory {str(out_dir)!r} already exists; pass --out or run.name=...")
    batches = itertools.cycle(list(itertools.islice(iter(ctx.train_loader), max(1, args.steps))))
    model, opt, loss_fn, dev = ctx.model, ctx.optimizer, ctx.loss_fn, ctx.device
    assert opt is not None  # build() makes the recipe's optimizer
    model.train()

    def step() -> None:
        x, y = next(batches)
        x, y = x.to(dev), y.to(dev)
        loss = loss_fn(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    out_dir.mkdir(parents=True, exist_ok=True)
    res = profile_steps(step, steps=args.steps, warmup=2, trace_path=out_dir / "trace.json", row_limit=args.top)
    print(res.table)
    print(f"Chrome trace: {out_dir / 'trace.json'} (open in chrome://tracing or ui.perfetto.dev)")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("summary", help="model summary (torchinfo) of a recipe")
    s.add_argument("recipe", nargs="?", default="digits")
    s.add_argument("overrides", nargs="*")
    s.add_argument("--depth", type=int, default=3)
    s.set_defaults(func=cmd_summary)

    st = sub.add_parser("stats", help="per-channel mean/std of a recipe's training data")
    st.add_argument("recipe", nargs="?", default="digits")
    st.add_argument("overrides", nargs="*")
    st.set_defaults(func=cmd_stats)

    p = sub.add_parser("profile", help="torch.profiler over a few training steps of a recipe")
    p.add_argument("recipe", nargs="?", default="digits")
    p.add_argument("overrides", nargs="*")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--top", type=int, default=15, help="rows of the op table")
    p.add_argument("--out", help="directory for trace.json (default: runs/<recipe>-profile-<time>)")
    p.set_defaults(func=cmd_profile)
