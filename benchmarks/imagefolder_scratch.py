"""Image folders from scratch: the built-in ``imagefolder-scratch`` recipe against a plain small-CNN baseline on the
same split, on two image folders this script draws (no downloads).

The folders (seeded, written to a temporary folder as a user's would be, one sub-folder per class):

* ``shapes``: a circle, square, triangle or cross (4 classes) of random size, position, rotation and colour on a
  noisy background with a distracting line, 28-40 pixels a side (not all square);
* ``textures``: stripes at any angle, a checkerboard, dots or smooth blobs (4 classes) of random scale, phase and
  colours, plus pixel noise, 28-40 pixels a side.

For each folder and each ``data.split_seed`` in ``--splits``: the recipe trains through ``trickbag train``'s own
choice (``trickbag.runs.pick.fit_recipe``: the recipe a run with no recipe named gets, sized from the images), and
the baseline — three plain convolutions with max pooling, no BatchNorm, Adam (lr 1e-3), no augmentation, the same
epochs budget (``--baseline-epochs``) — trains on the same training images at the same size (read back from the
recipe's own split), is scored at its best validation epoch on the same test images. Both report test accuracy.

Run: ``nice -n 10 .venv/bin/python benchmarks/imagefolder_scratch.py [--splits 3] [--first-split 0] [--per-class 100]``
(the recipe's settings were chosen on splits 0-1: ``--first-split 2`` measures on splits it was not tuned on)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

QUIET = ["run.progress=false", "run.plots=false", "log.tensorboard=false"]


# --------------------------------------------------------------------------- the generated folders
def _background(rng: np.random.Generator, w: int, h: int) -> np.ndarray:
    base = rng.integers(40, 216, size=3)
    img = base + rng.normal(0, 28, size=(h, w, 3))
    return np.clip(img, 0, 255).astype(np.uint8)


def _shape(rng: np.random.Generator, kind: str) -> Any:
    from PIL import Image, ImageDraw

    w, h = int(rng.integers(28, 41)), int(rng.integers(28, 41))
    img = Image.fromarray(_background(rng, w, h))
    draw = ImageDraw.Draw(img)
    x0, _y0 = float(rng.uniform(0, w)), float(rng.uniform(0, h))  # a distracting line across the image
    draw.line([(x0, 0), (float(rng.uniform(0, w)), h)], fill=tuple(int(v) for v in rng.integers(0, 256, 3)),
              width=int(rng.integers(1, 3)))
    r = float(rng.uniform(0.18, 0.34)) * min(w, h)
    cx, cy = float(rng.uniform(r, w - r)), float(rng.uniform(r, h - r))
    colour = tuple(int(v) for v in rng.integers(0, 256, 3))
    angle = float(rng.uniform(0, 2 * np.pi))
    if kind == "circle":
        draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=colour)
    elif kind == "square":
        pts = [(cx + r * np.cos(angle + k * np.pi / 2), cy + r * np.sin(angle + k * np.pi / 2)) for k in range(4)]
        draw.polygon(pts, fill=colour)
    elif kind == "triangle":
        pts = [(cx + r * np.cos(angle + k * 2 * np.pi / 3), cy + r * np.sin(angle + k * 2 * np.pi / 3))
               for k in range(3)]
        draw.polygon(pts, fill=colour)
    else:  # cross
        t = max(2, int(r / 3))
        for a in (angle, angle + np.pi / 2):
            dx, dy = r * np.cos(a), r * np.sin(a)
            draw.line([(cx - dx, cy - dy), (cx + dx, cy + dy)], fill=colour, width=t)
    return img


def _texture(rng: np.random.Generator, kind: str) -> Any:
    from PIL import Image

    w, h = int(rng.integers(28, 41)), int(rng.integers(28, 41))
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    period = float(rng.uniform(4, 9))
    phase = rng.uniform(0, period, size=2)
    if kind == "stripes":
        a = rng.uniform(0, np.pi)
        v = np.sin(2 * np.pi * (xx * np.cos(a) + yy * np.sin(a) + phase[0]) / period) > 0
    elif kind == "checker":
        a = rng.uniform(0, np.pi / 2)
        u, s = xx * np.cos(a) + yy * np.sin(a), -xx * np.sin(a) + yy * np.cos(a)
        v = (np.floor((u + phase[0]) / period * 2) + np.floor((s + phase[1]) / period * 2)) % 2 == 0
    elif kind == "dots":
        v = np.zeros((h, w), bool)
        for _ in range(int(rng.integers(5, 14))):
            cx, cy, r = rng.uniform(0, w), rng.uniform(0, h), rng.uniform(1.5, 3.0)
            v |= (xx - cx) ** 2 + (yy - cy) ** 2 < r * r
    else:  # blobs: smooth noise, thresholded
        coarse = rng.normal(size=(h // 8 + 2, w // 8 + 2))
        big = np.asarray(Image.fromarray(coarse.astype(np.float32)).resize((w, h), Image.BICUBIC))
        v = big > 0
    c1, c2 = rng.integers(0, 256, 3), rng.integers(0, 256, 3)
    img = np.where(v[..., None], c1, c2) + rng.normal(0, 30, size=(h, w, 3))
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))


FOLDERS = {"shapes": (_shape, ["circle", "square", "triangle", "cross"]),
           "textures": (_texture, ["stripes", "checker", "dots", "blobs"])}


def write_folder(root: Path, name: str, per_class: int, seed: int = 0) -> Path:
    """``root/name/<class>/<i>.png``: ``per_class`` images of each class, drawn with a generator seeded by
    ``seed`` and the class."""
    draw, classes = FOLDERS[name]
    for k, cls in enumerate(classes):
        rng = np.random.default_rng([seed, k, len(name)])
        (root / name / cls).mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            draw(rng, cls).save(root / name / cls / f"{i:04d}.png")
    return root / name


# --------------------------------------------------------------------------- the baseline
class PlainCNN(nn.Module):
    """Three 3x3 convolutions (32-64-128) with ReLU and 2x max pooling, global average pooling, a linear head."""

    def __init__(self, in_channels: int, num_classes: int) -> None:
        super().__init__()
        layers, c = [], in_channels
        for w in (32, 64, 128):
            layers += [nn.Conv2d(c, w, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]
            c = w
        self.net = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def _tensors(ds) -> tuple[torch.Tensor, torch.Tensor]:
    xs, ys = zip(*(ds[i] for i in range(len(ds))))
    return torch.stack(xs), torch.as_tensor(ys)


def _acc(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    model.eval()
    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean())


def small_cnn_baseline(recipe, epochs: int, seed: int = 0) -> float:
    """Test accuracy of :class:`PlainCNN` (Adam 1e-3, batch 32, no augmentation) at its best validation epoch,
    trained on the recipe's own training images at its size and scored on its test images."""
    from trickbag.data.sources import build_data

    splits = build_data(recipe.data, recipe.task)
    x, y = _tensors(splits.eval_train)  # the training images without augmentation
    xv, yv = _tensors(splits.val) if splits.val is not None else (x, y)
    xt, yt = _tensors(splits.test)
    torch.manual_seed(seed)
    model = PlainCNN(x.shape[1], splits.num_classes)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    best_val, test_at_best = -1.0, 0.0
    for _ in range(epochs):
        model.train()
        for idx in torch.randperm(len(x)).split(32):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()
        val = _acc(model, xv, yv)
        if val >= best_val:  # ties go to the later epoch, as best.pt
            best_val, test_at_best = val, _acc(model, xt, yt)
    return test_at_best


def recipe_accuracy(folder: Path, split: int, runs: Path, extra: list[str]) -> tuple[float, object, str]:
    """The test accuracy of ``trickbag train data.name=imagefolder data.root=FOLDER`` (no recipe named), its
    recipe and the line the command prints about its choice."""
    from trickbag.recipe import load_recipe
    from trickbag.runs.pick import fit_recipe
    from trickbag.runs.run import run_recipe

    overrides = [f"data.root={folder}", f"data.split_seed={split}", *QUIET, f"run.dir={runs}",
                 f"run.name={folder.name}-{split}-{len(extra)}", *extra]
    name, more, line = fit_recipe(None, ["data.name=imagefolder", *overrides])
    recipe = load_recipe(name, ["data.name=imagefolder", *overrides, *more])
    result = run_recipe(recipe, quiet=True)
    return result.test["test/acc"], recipe, line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=3, help="how many data.split_seed values (default 3)")
    parser.add_argument("--first-split", type=int, default=0,
                        help="the first data.split_seed (default 0; the recipe was chosen on splits 0-1, so 2 and up "
                             "are splits it was not tuned on)")
    parser.add_argument("--per-class", type=int, default=100, help="images per class (default 100)")
    parser.add_argument("--baseline-epochs", type=int, default=30, help="epochs of the baseline (default 30)")
    parser.add_argument("--folders", default=",".join(FOLDERS), help="which generated folders (default all)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a recipe override for the recipe's runs (repeatable), to try a variant")
    C.add_common_args(parser, rounds=1)
    args = parser.parse_args()
    C.setup(args, "imagefolder-scratch vs a plain small CNN on the same splits")
    rows, wins = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.folders.split(","):
            folder = write_folder(Path(tmp), name, args.per_class)
            for split in range(args.first_split, args.first_split + args.splits):
                t0 = time.perf_counter()
                acc, recipe, line = recipe_accuracy(folder, split, Path(tmp) / "runs", args.set)
                t1 = time.perf_counter()
                base = small_cnn_baseline(recipe, args.baseline_epochs)
                t2 = time.perf_counter()
                if split == args.first_split:
                    print(line, flush=True)
                wins.append(acc - base)
                rows.append([name, split, f"{acc:.3f}", f"{base:.3f}", f"{t1 - t0:.0f}", f"{t2 - t1:.0f}"])
                print(" | ".join(map(str, rows[-1])), flush=True)
    print()
    print(C.markdown_table(["folder", "split", "imagefolder-scratch test acc", "small-CNN baseline test acc",
                            "recipe s", "baseline s"], rows))
    print()
    print(f"mean difference (recipe - baseline): {statistics.mean(wins):+.3f} over {len(wins)} splits; "
          f"the recipe ahead on {sum(w > 0 for w in wins)}")
    print(f"load average at the end: {', '.join(f'{x:.1f}' for x in __import__('os').getloadavg())}")


if __name__ == "__main__":
    main()
