"""Image folders (one sub-folder per class, or train/ val/ test/ folders of them), read with PIL."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset, Subset

from trickbag.data.sampler import SampleIndex

from trickbag.data.sources.memory import split_indices
from trickbag.data.sources.splits import DataSplits
from trickbag.errors import DataError, TrickbagError

__all__ = ["imagefolder"]


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
    def of(cls, ds: Optional[Dataset], split: str) -> Optional["_ImageSplit"]:
        if ds is None:
            return None
        if isinstance(ds, Subset):
            return cls(ds.dataset, ds.indices, split)
        return cls(ds, range(len(ds)), split)

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
            path = self.dataset.samples[self.indices[i]][0]
            which = f"the first {self.split} sample" if i == 0 else f"{self.split} sample {i}"
            reason = (str(exc).strip().splitlines() or [""])[0][:160]
            raise _UnreadableSample(
                f"data: {which} (file {path!r}) cannot be loaded: {type(exc).__name__}: {reason}"
            ) from None

    def __getitems__(self, indices: list[int]) -> list:
        return [self[i] for i in indices]


def imagefolder(cfg: Any) -> DataSplits:
    from torchvision.datasets import ImageFolder

    from trickbag.data.transforms import eval_transforms, train_transforms

    if not cfg.root:
        raise DataError("data.root must name a folder of class sub-folders for data.name=imagefolder")
    root = Path(cfg.root)
    if not root.is_dir():
        raise DataError(f"data.root={cfg.root!r} does not exist or is not a folder")
    size = cfg.image_size or 224
    eval_size = cfg.eval_image_size or size
    mean = cfg.mean or [0.485, 0.456, 0.406]
    std = cfg.std or [0.229, 0.224, 0.225]
    if len(mean) != len(std):
        raise DataError(f"data.mean has {len(mean)} values but data.std has {len(std)}; give one per channel")
    t_train = train_transforms(size, mean=mean, std=std) if cfg.augment else eval_transforms(size, mean=mean, std=std)
    t_eval = eval_transforms(eval_size, mean=mean, std=std)
    rgb = len(mean) == 3

    def loader(path: str):
        from PIL import Image

        with Image.open(path) as img:  # by path: PIL's errors then name the file, not a file object
            return _to_mode(img, "RGB" if rgb else "L")

    def folder(p: Path, transform) -> ImageFolder:
        try:
            return ImageFolder(str(p), transform=transform, loader=loader)
        except (FileNotFoundError, RuntimeError) as exc:
            raise DataError(
                f"data.root={str(p)!r} holds no images in class sub-folders ({', '.join(_IMG_EXT)}): "
                f"{str(exc).splitlines()[0]}"
            ) from None

    if (root / "train").is_dir():
        train_full = folder(root / "train", t_train)
        eval_full = folder(root / "train", t_eval)
        val = folder(root / "val", t_eval) if (root / "val").is_dir() else None
        test = folder(root / "test", t_eval) if (root / "test").is_dir() else val
        if val is None and cfg.val_fraction > 0:
            ys = np.array(train_full.targets)
            tr, va = split_indices(ys, cfg.val_fraction, cfg.split_seed)
            train, val = Subset(train_full, tr.tolist()), Subset(eval_full, va.tolist())
            eval_train = Subset(eval_full, tr.tolist())
        else:
            train, eval_train = train_full, eval_full
            tr = np.arange(len(train_full))
            ys = np.array(train_full.targets)
        classes = train_full.classes
    else:
        train_full = folder(root, t_train)
        eval_full = folder(root, t_eval)
        ys = np.array(train_full.targets)
        rest, te = split_indices(ys, cfg.test_fraction, cfg.split_seed)
        tr_l, va_l = split_indices(ys[rest], cfg.val_fraction, cfg.split_seed + 1)
        tr, va = rest[tr_l], rest[va_l]
        train = Subset(train_full, tr.tolist())
        eval_train = Subset(eval_full, tr.tolist())
        val = Subset(eval_full, va.tolist()) if len(va) else None
        test = Subset(eval_full, te.tolist()) if len(te) else None
        classes = train_full.classes
    if len(train) == 0:
        raise DataError(f"data.root={cfg.root!r}: the training split is empty")
    train, eval_train = _ImageSplit.of(train, "train"), _ImageSplit.of(eval_train, "train")
    val, test = _ImageSplit.of(val, "val"), _ImageSplit.of(test, "test")
    counts = np.bincount(ys[tr], minlength=len(classes)).tolist()
    return DataSplits(
        train=train,
        val=val,
        test=test,
        num_classes=len(classes),
        input_shape=(len(mean), size, size),
        class_counts=counts,
        classes=list(classes),
        predict_transform=lambda img: t_eval(_to_mode(img, "RGB" if rgb else "L")),
        eval_train=eval_train,
    )
