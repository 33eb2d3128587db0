"""Data sources a recipe can name: digits, mnist1d, imagefolder, csv, fake.

Each source returns a :class:`DataSplits` with train / val / test datasets, the number of classes,
the input shape, the per-class training counts (for class-balanced losses) and a ``predict``
transform that turns one PIL image into the model's input (for ``trickbag predict``).
"""

from __future__ import annotations

import csv as _csv
import dataclasses
import difflib
import hashlib
import math
import os
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset, Subset

from trickbag.errors import DataError, TrickbagError

__all__ = ["DataSplits", "build_data", "TensorDataset", "cache_dir"]


def cache_dir() -> Path:
    """Folder for generated data (``$TRICKBAG_CACHE``, else ``$XDG_CACHE_HOME/trickbag``, else ``~/.cache/trickbag``)."""
    if os.environ.get("TRICKBAG_CACHE"):
        return Path(os.environ["TRICKBAG_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "trickbag"


@dataclasses.dataclass
class DataSplits:
    train: Dataset
    val: Optional[Dataset]
    test: Optional[Dataset]
    num_classes: int
    input_shape: tuple[int, ...]  # per sample, e.g. (1, 8, 8)
    class_counts: list[int]  # training samples per class
    classes: list[str]
    predict_transform: Optional[Callable[[Any], torch.Tensor]] = None
    eval_train: Optional[Dataset] = None  # the training data without augmentation
    normalise: Callable[[torch.Tensor], torch.Tensor] = lambda t: t  # what the source applied to inputs


class Collated(tuple):
    """A batch a dataset already assembled in ``__getitems__``; :func:`collate` passes it through."""


def collate(samples: Any) -> Any:
    """A ``collate_fn``: a :class:`Collated` batch as it is, anything else through torch's ``default_collate``."""
    if isinstance(samples, Collated):
        return tuple(samples)
    from torch.utils.data import default_collate

    return default_collate(samples)


class TensorDataset(Dataset):
    """In-memory ``(x, y)`` dataset with an optional per-sample augmentation (torch's global RNG)."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, augment: Optional[Callable] = None) -> None:
        self.x, self.y, self.augment = x, y, augment

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        x = self.x[i]
        if self.augment is not None:
            x = self.augment(x)
        return x, self.y[i]

    def gather(self, indices: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """The batch of ``indices`` as ``(x, y)``: one indexing op per tensor, the augmentation per sample
        in order (the same random numbers as ``__getitem__`` one by one)."""
        idx = torch.as_tensor(list(indices), dtype=torch.long)
        if self.augment is None:
            x = self.x.index_select(0, idx)
        else:
            x = torch.stack([self.augment(self.x[i]) for i in indices])
        return x, self.y.index_select(0, idx)


class BatchGather(Dataset):
    """A view of a :class:`TensorDataset` that hands the DataLoader whole batches; use it with :func:`collate`.

    The DataLoader calls ``__getitems__`` with a batch's indices: the batch is then gathered with one
    indexing op per tensor instead of one ``__getitem__`` per sample and a stack. The batches are
    the same tensors as the per-sample path's. The view is separate so that a DataLoader with torch's
    default ``collate_fn`` over a plain :class:`TensorDataset` keeps working as before.

    >>> ds = TensorDataset(torch.arange(12.0).view(6, 1, 2), torch.arange(6))
    >>> from torch.utils.data import DataLoader
    >>> x, y = next(iter(DataLoader(BatchGather(ds), batch_size=4, collate_fn=collate)))
    >>> torch.equal(x, torch.stack([ds[i][0] for i in range(4)])), y.tolist()
    (True, [0, 1, 2, 3])
    """

    def __init__(self, dataset: TensorDataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, i: int):
        return self.dataset[i]

    def __getitems__(self, indices: list[int]) -> Collated:
        return Collated(self.dataset.gather(indices))

    def __getattr__(self, name: str) -> Any:  # x, y, augment, ... of the wrapped dataset
        if name == "dataset":
            raise AttributeError(name)
        return getattr(self.dataset, name)


def random_shift(max_shift: int = 1) -> Callable[[torch.Tensor], torch.Tensor]:
    """Translate a ``[C, H, W]`` or ``[C, L]`` sample by up to ``max_shift`` pixels, zero-filled."""

    def shift(x: torch.Tensor) -> torch.Tensor:
        d = torch.randint(-max_shift, max_shift + 1, (x.dim() - 1,)).tolist()
        out = torch.zeros_like(x)
        src = [slice(None)]
        dst = [slice(None)]
        for k, n in zip(d, x.shape[1:]):
            src.append(slice(max(0, -k), n - max(0, k)))
            dst.append(slice(max(0, k), n - max(0, -k)))
        out[tuple(dst)] = x[tuple(src)]
        return out

    return shift


def _split_indices(y: np.ndarray, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Stratified split of ``arange(len(y))`` into (rest, held_out) with ``fraction`` held out."""
    from sklearn.model_selection import train_test_split

    idx = np.arange(len(y))
    if fraction <= 0:
        return idx, idx[:0]
    counts = np.bincount(y)
    stratify = y if counts[counts > 0].min() >= 2 and round(fraction * len(y)) >= len(counts[counts > 0]) else None
    rest, held = train_test_split(idx, test_size=fraction, random_state=seed, stratify=stratify)
    return np.sort(rest), np.sort(held)


def _tensor_splits(
    x: torch.Tensor,
    y: torch.Tensor,
    cfg: Any,
    *,
    augment: Optional[Callable],
    test: Optional[tuple[torch.Tensor, torch.Tensor]] = None,
    classes: Optional[list[str]] = None,
    normalise: bool = True,
    encode: Optional[Callable[[np.ndarray], Callable[[torch.Tensor], torch.Tensor]]] = None,
    per_feature: bool = False,
) -> DataSplits:
    """Split ``x [N, ...]`` / ``y [N]`` (stratified), normalise with training statistics, wrap as datasets.

    ``encode(train_rows)`` returns a row-wise input transform fitted on the training rows only (e.g.
    bin edges); it is applied to every split before normalisation.
    """
    yn = y.numpy()
    if test is None:
        rest, test_idx = _split_indices(yn, cfg.test_fraction, cfg.split_seed)
        x_test, y_test = x[test_idx], y[test_idx]
    else:
        rest = np.arange(len(yn))
        x_test, y_test = test
    tr_idx_local, val_idx_local = _split_indices(yn[rest], cfg.val_fraction, cfg.split_seed + 1)
    tr, va = rest[tr_idx_local], rest[val_idx_local]
    if encode is not None:
        transform = encode(tr)
        x, x_test = transform(x), transform(x_test)
    x_tr, y_tr = x[tr], y[tr]
    if normalise:  # statistics of the training part only: per channel, or per feature (tabular columns)
        dims = [0] if per_feature else [0] + list(range(2, x.dim()))
        mean = x_tr.mean(dim=dims, keepdim=True)[0]
        std = x_tr.std(dim=dims, keepdim=True)[0].clamp_min(1e-8)
        norm = lambda t: (t - mean) / std  # noqa: E731
    else:
        mean = std = None
        norm = lambda t: t  # noqa: E731
    num_classes = int(max(int(y.max()), int(y_test.max()) if len(y_test) else 0)) + 1
    counts = torch.bincount(y_tr, minlength=num_classes).tolist()
    return DataSplits(
        train=TensorDataset(norm(x_tr), y_tr, augment),
        val=TensorDataset(norm(x[va]), y[va]) if len(va) else None,
        test=TensorDataset(norm(x_test), y_test) if len(y_test) else None,
        num_classes=num_classes,
        input_shape=tuple(x.shape[1:]),
        class_counts=counts,
        classes=classes or [str(i) for i in range(num_classes)],
        eval_train=TensorDataset(norm(x_tr), y_tr),
        normalise=norm,
    )


# --------------------------------------------------------------------------- sources
def _digits(cfg: Any) -> DataSplits:
    from sklearn.datasets import load_digits

    d = load_digits()
    x = torch.tensor(d.images, dtype=torch.float32).unsqueeze(1) / 16.0  # [N, 1, 8, 8] in [0, 1]
    y = torch.tensor(d.target, dtype=torch.long)
    splits = _tensor_splits(x, y, cfg, augment=random_shift(1) if cfg.augment else None)
    normalise = splits.normalise

    def predict(img: Any) -> torch.Tensor:
        """A PIL image -> [1, 8, 8] like the training data (bright = ink, as in the digits set)."""
        from PIL import Image

        g = img.convert("L").resize((8, 8), Image.BILINEAR)
        return normalise(torch.tensor(np.asarray(g, dtype=np.float32) / 255.0).unsqueeze(0))

    splits.predict_transform = predict
    return splits


def _mnist1d(cfg: Any) -> DataSplits:
    n = cfg.num_samples or 5000
    path = cache_dir() / f"mnist1d-{n}.npz"
    if path.exists():
        with np.load(path) as f:
            data = {k: f[k] for k in f.files}
    else:
        from mnist1d.data import get_dataset_args, make_dataset

        args = get_dataset_args()
        args.num_samples = n
        state = np.random.get_state()  # make_dataset reseeds NumPy's global generator
        try:
            ds = make_dataset(args)
        finally:
            np.random.set_state(state)
        data = {"x": ds["x"], "y": ds["y"], "x_test": ds["x_test"], "y_test": ds["y_test"]}
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")
        np.savez(tmp, **data)
        os.replace(tmp, path)
    x = torch.tensor(data["x"], dtype=torch.float32).unsqueeze(1)  # [N, 1, 40]
    y = torch.tensor(data["y"], dtype=torch.long)
    xt = torch.tensor(data["x_test"], dtype=torch.float32).unsqueeze(1)
    yt = torch.tensor(data["y_test"], dtype=torch.long)
    # the generator already standardises the whole set; keep its scale (and its test split)
    return _tensor_splits(x, y, cfg, augment=None, test=(xt, yt), normalise=False)


def _fake(cfg: Any) -> DataSplits:
    n = cfg.num_samples or 512
    k = cfg.num_classes or 4
    shape = tuple(cfg.shape or [1, 8, 8])
    if any(int(s) < 1 for s in shape):
        raise DataError(f"data.shape={list(shape)} is not allowed: every size must be >= 1")
    g = torch.Generator().manual_seed(cfg.split_seed)
    templates = torch.randn((k, *shape), generator=g)
    y = torch.arange(n) % k
    x = templates[y] + 1.5 * torch.randn((n, *shape), generator=g)
    return _tensor_splits(x, y, cfg, augment=None)


def _csv_source(cfg: Any) -> DataSplits:
    if not cfg.root:
        raise DataError("data.root must name a CSV file for data.name=csv")
    path = Path(cfg.root)
    if not path.is_file():
        raise DataError(f"data.root={cfg.root!r}: CSV file does not exist")
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = list(_csv.reader(fh))
    except (OSError, UnicodeDecodeError, _csv.Error) as exc:
        raise DataError(f"data.root={cfg.root!r} cannot be read as CSV: {exc}") from None
    if len(rows) < 2:
        raise DataError(f"data.root={cfg.root!r} has no data rows (a header and at least one row expected)")
    header = [h.strip() for h in rows[0]]
    if cfg.label_column not in header:
        raise DataError(
            f"data.label_column={cfg.label_column!r} is not a column of {cfg.root!r}; columns: {', '.join(header)}"
        )
    li = header.index(cfg.label_column)
    feats = cfg.feature_columns or [h for h in header if h != cfg.label_column]
    missing = [f for f in feats if f not in header]
    if missing:
        raise DataError(f"data.feature_columns {missing} are not columns of {cfg.root!r}; columns: {', '.join(header)}")
    fi = [header.index(f) for f in feats]
    for name in cfg.bins:
        if name not in feats:
            close = difflib.get_close_matches(name, feats, n=1)
            what = "the label column" if name == cfg.label_column else "not a feature column"
            hint = f" (did you mean {close[0]!r}?)" if close and name != cfg.label_column else ""
            raise DataError(
                f"data.bins names {name!r}, which is {what} of {cfg.root!r}{hint}; feature columns: {', '.join(feats)}"
            )
    binned = {feats.index(name) for name in cfg.bins}  # these may hold empty / NaN cells (own indicator)
    xs, labels = [], []
    for r, row in enumerate(rows[1:], start=2):
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) != len(header):
            raise DataError(f"{cfg.root!r} line {r}: {len(row)} fields, expected {len(header)}")
        try:
            vals = [math.nan if j in binned and not row[i].strip() else float(row[i]) for j, i in enumerate(fi)]
        except ValueError:
            raise DataError(f"{cfg.root!r} line {r}: a feature is not a number: {[row[i] for i in fi]}") from None
        bad_j = next((j for j, v in enumerate(vals) if math.isinf(v) or (math.isnan(v) and j not in binned)), None)
        if bad_j is not None:
            raise DataError(
                f"{cfg.root!r} line {r}: feature {feats[bad_j]!r} is NaN or infinite; clean or impute it first"
            )
        xs.append(vals)
        labels.append(row[li].strip())
    if all(_is_int(v) for v in labels):
        ints = [int(v) for v in labels]
        if min(ints) < 0:
            raise DataError(f"{cfg.root!r}: label {min(ints)} is out of range; integer labels must be >= 0")
        if cfg.num_classes is not None and max(ints) >= cfg.num_classes:
            raise DataError(
                f"{cfg.root!r}: label {max(ints)} is out of range for data.num_classes={cfg.num_classes}"
            )
        classes = [str(i) for i in range(max(ints) + 1)]
        y = torch.tensor(ints)
    else:
        classes = sorted(set(labels))
        y = torch.tensor([classes.index(v) for v in labels])
    if len(set(y.tolist())) < 2:
        raise DataError(f"{cfg.root!r}: the label column has fewer than 2 classes")
    x = torch.tensor(xs, dtype=torch.float32).unsqueeze(1)  # [N, 1, F]
    encode = _bin_columns(x, y, cfg, feats) if cfg.bins else None
    # columns have their own units: standardise each one with its training mean and std
    return _tensor_splits(x, y, cfg, augment=None, classes=classes, encode=encode, per_feature=True)


def _bin_columns(
    x: torch.Tensor, y: torch.Tensor, cfg: Any, feats: list[str]
) -> Callable[[np.ndarray], Callable[[torch.Tensor], torch.Tensor]]:
    """``data.bins``: fit each column's edges on the training rows, then one-hot the bin codes of every row.

    ``x``: ``[N, 1, F]`` raw features (NaN allowed in binned columns), ``y``: ``[N]`` class indices.
    Returns ``encode(train_rows)`` for :func:`_tensor_splits`; its transform maps ``[n, 1, F]`` to
    ``[n, 1, F']``, each binned column replaced in place by ``n_bins + 1`` indicators: one per bin of
    ``trickbag.tabular.Binning.transform`` (values outside the training range go to the first or
    last bin) and a last one for a missing value.  ``method: tree`` splits on the label with a
    ``DecisionTreeClassifier(max_leaf_nodes=n_bins)``, which handles any number of classes.
    """
    from torch.nn.functional import one_hot

    from trickbag import tabular

    columns = {feats.index(name): (name, spec) for name, spec in cfg.bins.items()}

    def encode(train_rows: np.ndarray) -> Callable[[torch.Tensor], torch.Tensor]:
        fitted: dict[int, tabular.Binning] = {}
        y_tr = y[train_rows].numpy()
        for j, (name, spec) in columns.items():
            v = x[train_rows, 0, j].double().numpy()
            known = ~np.isnan(v)
            if not known.any():
                raise DataError(
                    f"data.bins: column {name!r} of {cfg.root!r} has no value in the training split; fill it in or "
                    "remove it from data.bins"
                )
            if spec.method == "tree":  # tabular.bin_feature(target=) takes a binary label only (for WoE)
                edges = tabular._tree_edges(v[known], y_tr[known], spec.n_bins, 1, 0)
                b = tabular.Binning("tree", edges, codes=np.empty(0, dtype=np.int64))
                fitted[j] = dataclasses.replace(b, codes=b.transform(v))
            else:
                fitted[j] = tabular.bin_feature(v, spec.method, spec.n_bins)

        def transform(t: torch.Tensor) -> torch.Tensor:
            parts = []
            for j in range(t.shape[-1]):
                col = t[:, 0, j]
                if j in fitted:
                    codes = torch.from_numpy(fitted[j].transform(col.double().numpy()))
                    parts.append(one_hot(codes, fitted[j].n_bins + 1).to(t.dtype))
                else:
                    parts.append(col[:, None])
            return torch.cat(parts, dim=1).unsqueeze(1)

        return transform

    return encode


def _is_int(v: str) -> bool:
    try:
        int(v)
        return True
    except ValueError:
        return False


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


def _imagefolder(cfg: Any) -> DataSplits:
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
            tr, va = _split_indices(ys, cfg.val_fraction, cfg.split_seed)
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
        rest, te = _split_indices(ys, cfg.test_fraction, cfg.split_seed)
        tr_l, va_l = _split_indices(ys[rest], cfg.val_fraction, cfg.split_seed + 1)
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


_SOURCES: dict[str, Callable[[Any], DataSplits]] = {
    "digits": _digits,
    "mnist1d": _mnist1d,
    "fake": _fake,
    "csv": _csv_source,
    "imagefolder": _imagefolder,
}


def build_data(cfg: Any) -> DataSplits:
    """Build the datasets a :class:`trickbag.config.DataConfig` describes."""
    if cfg.name not in _SOURCES:
        raise DataError(f"data.name={cfg.name!r} is not a data source; allowed: {', '.join(_SOURCES)}")
    if cfg.root and cfg.name in ("digits", "mnist1d", "fake"):
        raise DataError(f"data.root is not used by data.name={cfg.name!r}; remove it or pick imagefolder/csv")
    splits = _SOURCES[cfg.name](cfg)
    n_train = len(splits.train)
    if cfg.drop_last and cfg.batch_size > n_train:
        raise DataError(
            f"data.batch_size={cfg.batch_size} is larger than the training set ({n_train} samples) with "
            "data.drop_last=true, so no batch would be made; lower the batch size or set drop_last=false"
        )
    return splits


def data_fingerprint(cfg: Any) -> str:
    """A short hash of the data settings (used to name caches)."""
    return hashlib.sha1(repr(sorted(cfg.model_dump().items())).encode()).hexdigest()[:10]
