"""Image folders (one sub-folder per class, or train/ val/ test/ folders of them), read with PIL."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset, Subset

from trickbag.data.sampler import SampleIndex
from trickbag.data.sources.memory import split_indices
from trickbag.data.sources.splits import DataSplits
from trickbag.errors import DataError, TrickbagError

__all__ = ["imagefolder", "MAX_IMAGE_PIXELS", "eval_image_state", "image_transform", "image_predict", "labelled_folder"]

#: largest image (in pixels) the image sources and ``trickbag predict`` read (PIL's own default is ~89 M)
MAX_IMAGE_PIXELS = 64_000_000


_IMG_EXT = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def _to_mode(img: Any, mode: str) -> Any:
    """Convert a PIL image to ``mode`` ("RGB" or "L") for the transforms.

    16-bit greyscale (``I;16*``) is scaled to 8 bits, ``round(v / 257)``, where PIL's own conversion
    would clip every value above 255 to white; palette images with transparency go through RGBA
    (what PIL asks for). Modes PIL cannot convert (e.g. LAB to L) raise its ``ValueError``.
    """
    from PIL import Image

    if img.mode.startswith("I;16"):
        img = Image.fromarray(np.round(np.asarray(img, dtype=np.float64) / 257.0).astype(np.uint8))
    elif img.mode == "P" and "transparency" in img.info:
        img = img.convert("RGBA")
    return img.convert(mode)


class _UnreadableSample(DataError):
    """An image sample that cannot be loaded; one line naming the file, also from a DataLoader worker."""

    def __init__(self, message: str) -> None:
        # a worker's error is re-raised as ``cls("Caught ... Original Traceback ...")``: keep our last line
        last = message.rstrip().splitlines()[-1] if message.strip() else ""
        prefix = f"{type(self).__module__}.{type(self).__qualname__}: "
        if message.startswith("Caught ") and last.startswith(prefix):
            message = last[len(prefix) :]
        super().__init__(message)


class _ImageSplit(Subset):
    """A split of an ImageFolder whose unreadable samples raise a one-line :class:`DataError` naming the file."""

    def __init__(self, folder: Dataset, indices: Sequence[int], split: str) -> None:
        super().__init__(folder, indices)
        self.split = split

    @classmethod
    def of(cls, ds: Dataset | None, split: str) -> _ImageSplit | None:
        if ds is None:
            return None
        if isinstance(ds, Subset):
            return cls(ds.dataset, ds.indices, split)
        return cls(ds, range(len(ds)), split)  # type: ignore[arg-type]

    def __getitem__(self, i: int):
        try:
            if isinstance(i, SampleIndex):  # random crops and flips seeded by (seed, epoch, index)
                with torch.random.fork_rng(devices=[]):
                    torch.manual_seed(i.seed_for_sample())
                    return self.dataset[self.indices[i]]
            return self.dataset[self.indices[i]]
        except TrickbagError:
            raise
        except Exception as exc:  # PIL (truncated, not an image, unknown mode), OS and transform errors
            path = self.dataset.samples[self.indices[i]][0]  # type: ignore[attr-defined]
            which = f"the first {self.split} sample" if i == 0 else f"{self.split} sample {i}"
            reason = (str(exc).strip().splitlines() or [""])[0][:160]
            raise _UnreadableSample(
                f"data: {which} (file {path!r}) cannot be loaded: {type(exc).__name__}: {reason}"
            ) from None

    def __getitems__(self, indices: list[int]) -> list:
        return [self[i] for i in indices]


def eval_image_state(cfg: Any) -> dict[str, Any]:
    """The evaluation preprocessing of an image recipe as plain data (stored in the run's checkpoints):
    the colour mode, the training ``size``, the short side ``resize`` (bilinear, antialiased) and the
    centre ``crop`` of :func:`~trickbag.data.transforms.eval_transforms`, and the normalisation."""
    size = cfg.image_size or 224
    crop = cfg.eval_image_size or size
    mean = [float(v) for v in (cfg.mean or [0.485, 0.456, 0.406])]
    std = [float(v) for v in (cfg.std or [0.229, 0.224, 0.225])]
    if len(mean) != len(std):
        raise DataError(f"data.mean has {len(mean)} values but data.std has {len(std)}; give one per channel")
    return {"mode": "RGB" if len(mean) == 3 else "L", "size": size, "resize": int(crop / 0.875), "crop": crop,
            "interpolation": "bilinear", "antialias": True, "mean": mean, "std": std}


def image_transform(state: dict[str, Any]) -> Any:
    """The evaluation transform an :func:`eval_image_state` describes (PIL image or uint8 ``[C, H, W]`` ->
    float ``[C, crop, crop]``): the same steps as :func:`~trickbag.data.transforms.eval_transforms`."""
    from torchvision.transforms import v2

    from trickbag.data.transforms import pipeline_tail

    return v2.Compose([v2.ToImage(), v2.Resize(int(state["resize"]), antialias=bool(state["antialias"])),
                       v2.CenterCrop(int(state["crop"])), *pipeline_tail(list(state["mean"]), list(state["std"]))])


def image_predict(state: dict[str, Any]) -> Any:
    """One PIL image (any mode) -> the model's input, as :func:`image_transform` after the colour conversion."""
    t, mode = image_transform(state), state["mode"]
    return lambda img: t(_to_mode(img, mode))


def unreadable(path: str) -> str | None:
    """Why the image file ``path`` cannot be decoded (``"TypeName: message"``), or None when it can.

    The whole file is decoded (a JPEG at 1/8 scale, which reads all of it but costs little), so a truncated
    file is found as well as one that is not an image."""
    from PIL import Image

    Image.MAX_IMAGE_PIXELS = MAX_IMAGE_PIXELS
    try:
        with Image.open(path) as img:
            img.draft(None, (1, 1))  # JPEG: decode at the smallest scale
            img.load()
    except Exception as exc:  # PIL's errors (not an image, truncated, a bomb), OSError
        return f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:160]}"
    return None


class _Folders:
    """Builds ImageFolder datasets of one recipe: its transforms, its colour mode, its error messages, and the
    files it leaves out because they cannot be read (each file decoded once, whatever the order of the split)."""

    def __init__(self, cfg: Any, stored: dict[str, Any] | None = None, root: Path | None = None,
                 skip: Sequence[str] = ()) -> None:
        from trickbag.data.transforms import eval_transforms, train_transforms

        self.state = dict(stored) if stored is not None else eval_image_state(cfg)
        self.size, self.mean, std = self.state["size"], self.state["mean"], self.state["std"]
        self.t_eval = image_transform(self.state)
        self.t_train = train_transforms(self.size, mean=self.mean, std=std) if cfg.augment else \
            eval_transforms(self.size, mean=self.mean, std=std)
        self.mode = self.state["mode"]
        self.root, self.skip = root, set(skip)  # skip: a run's stored list (relative paths), left out as they were
        self.problems: dict[str, str | None] = {}  # every file looked at -> why it cannot be read (None: it can)

    def rel(self, path: str) -> str:
        return Path(path).relative_to(self.root).as_posix() if self.root is not None else path

    def _readable(self, ds: Any) -> None:
        """Leave out of ``ds`` (an ImageFolder) the files that cannot be decoded, and those a run skipped before."""
        import os
        import warnings
        from concurrent.futures import ThreadPoolExecutor

        from PIL import Image

        todo = [path for path, _ in ds.samples if path not in self.problems]
        if todo:  # PIL decodes without the GIL: one thread per core; each result belongs to its file, in any order
            with warnings.catch_warnings(), ThreadPoolExecutor(min(32, os.cpu_count() or 1)) as pool:
                warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # above the limit: an error
                self.problems.update(zip(todo, pool.map(unreadable, todo)))
        keep = []
        for path, y in ds.samples:
            if self.problems[path] is None and self.rel(path) not in self.skip:
                keep.append((path, y))
        ds.samples = ds.imgs = keep
        ds.targets = [y for _, y in keep]

    def load(self, path: str) -> Any:
        from PIL import Image

        Image.MAX_IMAGE_PIXELS = MAX_IMAGE_PIXELS  # larger images: PIL's DecompressionBombError, one line per file
        with Image.open(path) as img:  # by path: PIL's errors then name the file, not a file object
            return _to_mode(img, self.mode)

    def folder(self, p: Path, *, train: bool) -> Any:
        from torchvision.datasets import ImageFolder

        try:
            ds = ImageFolder(str(p), transform=self.t_train if train else self.t_eval, loader=self.load)
        except (FileNotFoundError, RuntimeError) as exc:
            raise DataError(
                f"data.root={str(p)!r} holds no images in class sub-folders ({', '.join(_IMG_EXT)}): "
                f"{str(exc).splitlines()[0]}"
            ) from None
        self._readable(ds)
        return ds

    def judge(self, cfg: Any, resuming: bool) -> list[tuple[str, str]]:
        """The files left out, (relative path, reason); one line (exit 2) above ``data.max_corrupt``, or, for a
        run's stored state, when a file that was read then cannot be now (its splits would shift)."""
        bad = sorted((self.rel(p), why) for p, why in self.problems.items() if why is not None)
        shown = "; ".join(f"{r!r} ({why})" for r, why in bad[:3]) + ("; ..." if len(bad) > 3 else "")
        if resuming:
            new = [(r, why) for r, why in bad if r not in self.skip]
            if new:
                raise DataError(f"data.root={cfg.root!r}: {len(new)} image(s) the run read can no longer be read: "
                                f"{shown}; restore them to continue the run exactly, or start a new run")
            return [(r, "skipped when the run began") for r in sorted(self.skip)]
        total = len(self.problems)
        if bad and len(bad) > cfg.max_corrupt * total:
            raise DataError(f"data.root={cfg.root!r}: {len(bad)} of {total} images cannot be read "
                            f"({100 * len(bad) / total:.1f} %, above data.max_corrupt={cfg.max_corrupt:g}): {shown}; "
                            f"repair or remove them, or set data.max_corrupt={len(bad) / total:.3g} to skip them")
        return bad


def _split_folders(f: _Folders, root: Path, cfg: Any) -> tuple[Any, ...]:
    """``root/train`` (and ``val``, ``test`` when present): (train, eval_train, val, test, train indices, labels)."""
    train_full, eval_full = f.folder(root / "train", train=True), f.folder(root / "train", train=False)
    val = f.folder(root / "val", train=False) if (root / "val").is_dir() else None
    test = f.folder(root / "test", train=False) if (root / "test").is_dir() else val
    ys = np.array(train_full.targets)
    if val is None and cfg.val_fraction > 0:
        tr, va = split_indices(ys, cfg.val_fraction, cfg.split_seed)
        return Subset(train_full, tr.tolist()), Subset(eval_full, tr.tolist()), Subset(eval_full, va.tolist()), \
            test, tr, ys
    return train_full, eval_full, val, test, np.arange(len(train_full)), ys


def _one_folder(f: _Folders, root: Path, cfg: Any) -> tuple[Any, ...]:
    """One folder of class sub-folders, split into train / val / test by the recipe's fractions."""
    train_full, eval_full = f.folder(root, train=True), f.folder(root, train=False)
    ys = np.array(train_full.targets)
    rest, te = split_indices(ys, cfg.test_fraction, cfg.split_seed)
    tr_l, va_l = split_indices(ys[rest], cfg.val_fraction, cfg.split_seed + 1)
    tr, va = rest[tr_l], rest[va_l]
    val = Subset(eval_full, va.tolist()) if len(va) else None
    test = Subset(eval_full, te.tolist()) if len(te) else None
    return Subset(train_full, tr.tolist()), Subset(eval_full, tr.tolist()), val, test, tr, ys


def imagefolder(cfg: Any, fitted: dict[str, Any] | None = None) -> DataSplits:
    """Images read with PIL from ``data.root``: ``train/`` (``val/``, ``test/``) folders of class
    sub-folders, or one folder of class sub-folders split by the recipe's fractions.

    ``fitted``: a run's stored state: its evaluation transform and class names are used (a folder whose
    classes differ is refused in one line)."""
    if not cfg.root:
        raise DataError("data.root must name a folder of class sub-folders for data.name=imagefolder")
    root = Path(cfg.root).expanduser()
    if not root.is_dir():
        raise DataError(f"data.root={cfg.root!r} does not exist or is not a folder")
    f = _Folders(cfg, fitted.get("image") if fitted else None, root, fitted.get("skipped", []) if fitted else ())
    train, eval_train, val, test, tr, ys = (_split_folders if (root / "train").is_dir() else _one_folder)(f, root, cfg)
    skipped = f.judge(cfg, resuming=fitted is not None)
    classes = list(train.dataset.classes if isinstance(train, Subset) else train.classes)  # type: ignore[attr-defined]
    if len(train) == 0:
        raise DataError(f"data.root={cfg.root!r}: the training split is empty")
    if fitted is not None and classes != list(fitted["classes"]):
        raise DataError(f"data.root={cfg.root!r} has the class folders {classes}, the run was trained on "
                        f"{list(fitted['classes'])}")
    splits = DataSplits(
        train=_ImageSplit.of(train, "train"),  # type: ignore[arg-type]
        val=_ImageSplit.of(val, "val"),
        test=_ImageSplit.of(test, "test"),
        num_classes=len(classes),
        input_shape=(len(f.mean), f.size, f.size),
        class_counts=np.bincount(ys[tr], minlength=len(classes)).tolist(),
        classes=classes,
        predict_transform=image_predict(f.state),
        eval_train=_ImageSplit.of(eval_train, "train"),
        fitted={"source": "imagefolder", "image": f.state, "skipped": [r for r, _ in skipped]},
        skipped=skipped,
    )
    if skipped:
        splits.notes.append(f"data: {len(skipped)} unreadable image(s) left out of the splits (listed in the run "
                            f"folder's skipped_images.txt): {', '.join(repr(r) for r, _ in skipped[:3])}"
                            f"{', ...' if len(skipped) > 3 else ''}")
    if f.state["crop"] != f.size:
        splits.notes.append(
            f"warning: data.eval_image_size={f.state['crop']} differs from data.image_size={f.size}: the model is "
            "evaluated at another size than it trains at, which costs accuracy; FixRes (a larger test size with "
            "fine-tuning at it) is the only intended case: otherwise set both to the same size")
    return splits


def labelled_folder(state: dict[str, Any], classes: list[str], path: str | Path) -> Dataset:
    """A folder of class sub-folders (``eval --data``) under a run's stored evaluation transform; each
    sub-folder must be one of the run's ``classes`` (a subset is fine), its label that class's index."""
    from torchvision.datasets import ImageFolder

    root = Path(path).expanduser()
    if not root.is_dir():
        raise DataError(f"--data {str(path)!r} is not a folder of class sub-folders")
    f = _Folders.__new__(_Folders)
    f.state, f.mode, f.t_eval = dict(state), state["mode"], image_transform(state)
    try:
        folder = ImageFolder(str(root), transform=f.t_eval, loader=f.load)
    except (FileNotFoundError, RuntimeError) as exc:
        raise DataError(f"--data {str(path)!r} holds no images in class sub-folders: {str(exc).splitlines()[0]}") \
            from None
    unknown = [c for c in folder.classes if c not in classes]
    if unknown:
        raise DataError(f"--data {str(path)!r} has the class folder {unknown[0]!r}, which is not a class of the run "
                        f"({', '.join(classes[:10])}{', ...' if len(classes) > 10 else ''})")
    remap = [classes.index(c) for c in folder.classes]
    folder.target_transform = lambda k: remap[k]
    folder.targets = [remap[k] for k in folder.targets]
    return _ImageSplit(folder, range(len(folder)), "--data")
