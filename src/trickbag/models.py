"""Built-in models and the model factory used by recipes.

``model.name`` may be a built-in (``digits_cnn``, ``small_cnn``, ``signal_cnn``,
``fast_signal_cnn``, ``mlp``), a torchvision classification model (``resnet18``,
``mobilenet_v3_small``, ...; random init or local weights via ``model.weights``), or
``package.module:function`` — your own code, which is imported and called, so only name code you
trust.

Your own function is called as ``fn(num_classes=K, **kwargs)``: ``input_shape=`` (the per-sample
shape, e.g. ``(13,)`` for a CSV of 13 feature columns, ``(3, 64, 64)`` for images) is passed when its
signature names it, and the recipe's ``model.kwargs`` only those it declares (all of them with
``**kwargs``), so a built-in recipe's settings for its own model (``dropout``, ``hidden``) do not
reach it. The module is found like ``python -m`` finds it: on ``sys.path``, then in the current
folder. Lazy modules (``nn.LazyLinear``, ...) are initialised by one dry forward on a zero batch.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from trickbag.errors import RecipeError

__all__ = ["SmallCNN", "SignalCNN", "FastSignalCNN", "MLP", "build_model", "BUILTIN_MODELS", "import_callable",
           "is_callable_spec", "undeclared_kwargs"]


def _conv_bn(cin: int, cout: int, conv: type[nn.Module], bn: type[nn.Module]) -> nn.Sequential:
    return nn.Sequential(conv(cin, cout, 3, padding=1, bias=False), bn(cout), nn.ReLU(inplace=True))


class SmallCNN(nn.Module):
    """A small BatchNorm CNN for small images ``[N, C, H, W]`` (8x8 digits and up) → logits ``[N, K]``.

    >>> SmallCNN(1, 10)(torch.zeros(2, 1, 8, 8)).shape
    torch.Size([2, 10])
    """

    def __init__(self, in_channels: int = 1, num_classes: int = 10, width: int = 32, dropout: float = 0.1) -> None:
        super().__init__()
        w = width
        self.features = nn.Sequential(
            _conv_bn(in_channels, w, nn.Conv2d, nn.BatchNorm2d),
            _conv_bn(w, 2 * w, nn.Conv2d, nn.BatchNorm2d),
            nn.MaxPool2d(2),
            _conv_bn(2 * w, 4 * w, nn.Conv2d, nn.BatchNorm2d),
            _conv_bn(4 * w, 4 * w, nn.Conv2d, nn.BatchNorm2d),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(4 * w, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.dropout(self.features(x)))


class SignalCNN(nn.Module):
    """A 1-D BatchNorm CNN for signals ``[N, C, L]`` (MNIST-1D) → logits ``[N, K]``.

    >>> SignalCNN(1, 10)(torch.zeros(2, 1, 40)).shape
    torch.Size([2, 10])
    """

    def __init__(self, in_channels: int = 1, num_classes: int = 10, width: int = 64, dropout: float = 0.1) -> None:
        super().__init__()
        w = width
        self.features = nn.Sequential(
            _conv_bn(in_channels, w, nn.Conv1d, nn.BatchNorm1d),
            _conv_bn(w, w, nn.Conv1d, nn.BatchNorm1d),
            nn.MaxPool1d(2),
            _conv_bn(w, 2 * w, nn.Conv1d, nn.BatchNorm1d),
            _conv_bn(2 * w, 2 * w, nn.Conv1d, nn.BatchNorm1d),
            nn.MaxPool1d(2),
            _conv_bn(2 * w, 4 * w, nn.Conv1d, nn.BatchNorm1d),
            nn.AdaptiveAvgPool1d(1),
            nn.Flatten(),
        )
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(4 * w, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.dropout(self.features(x)))


class FastSignalCNN(nn.Module):
    """A small, fast 1-D BatchNorm CNN for short signals ``[N, C, L]`` (MNIST-1D) → logits ``[N, K]``.

    Four convolutions, each followed by BatchNorm and ReLU: a kernel-5 stem with ``width``
    channels at full resolution and a 2x max-pool, a kernel-3 convolution to ``2 * width`` at
    ``L/2``, a kernel-3 stride-2 one to ``4 * width`` at ``L/4`` (the MNIST-1D paper's CNN,
    Greydanus 2020, downsamples with strides too) and a 1x1 convolution there; then global max
    pooling over positions (a digit can sit anywhere in the signal: its strongest response
    counts) and one linear layer.  Built for a small compute budget: at width 32 on 40-long
    signals, 0.54 M multiply-adds per signal (``SignalCNN``: 0.74 M) and one layer at full
    resolution instead of two (on MNIST-1D, a wider receptive field at ``L/4`` or a strided stem
    gave no more accuracy per second of training).

    >>> FastSignalCNN(1, 10)(torch.zeros(2, 1, 40)).shape
    torch.Size([2, 10])
    >>> w = 32  # conv weights (no biases) + BatchNorm scales/shifts + linear head
    >>> convs = 1 * w * 5 + w * 2 * w * 3 + 2 * w * 4 * w * 3 + 4 * w * 4 * w
    >>> sum(p.numel() for p in FastSignalCNN(1, 10, width=w).parameters()) == convs + 2 * 11 * w + 4 * w * 10 + 10
    True
    """

    def __init__(
        self, in_channels: int = 1, num_classes: int = 10, width: int = 32, dropout: float = 0.0, pool: str = "max"
    ) -> None:
        super().__init__()
        if pool not in ("max", "avg"):
            raise ValueError(f"pool must be 'max' or 'avg', got {pool!r}")
        if isinstance(width, bool) or not isinstance(width, int) or width < 1:
            raise ValueError(f"width must be an int >= 1, got {width!r}")
        w = width

        def conv(cin: int, cout: int, k: int, stride: int) -> nn.Sequential:
            return nn.Sequential(
                nn.Conv1d(cin, cout, k, stride=stride, padding=k // 2, bias=False),
                nn.BatchNorm1d(cout),
                nn.ReLU(inplace=True),
            )

        self.pool = pool
        self.features = nn.Sequential(
            conv(in_channels, w, 5, 1),
            nn.MaxPool1d(2),  # L -> L/2
            conv(w, 2 * w, 3, 1),
            conv(2 * w, 4 * w, 3, 2),  # L/2 -> L/4
            conv(4 * w, 4 * w, 1, 1),
        )
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(4 * w, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.features(x)  # [N, 4w, L/4]
        h = h.max(dim=-1).values if self.pool == "max" else h.mean(dim=-1)
        return self.head(self.dropout(h))


class MLP(nn.Module):
    """A multi-layer perceptron on flattened inputs → logits ``[N, K]``.

    >>> MLP(8, 3, hidden=[16])(torch.zeros(4, 1, 8)).shape
    torch.Size([4, 3])
    """

    def __init__(
        self, in_features: int, num_classes: int, hidden: list[int] | None = None, dropout: float = 0.0
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Flatten()]
        d = in_features
        for h in hidden if hidden is not None else [128, 128]:  # [] is a linear model
            layers += [nn.Linear(d, h), nn.BatchNorm1d(h), nn.ReLU(inplace=True), nn.Dropout(dropout)]
            d = h
        layers.append(nn.Linear(d, num_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


BUILTIN_MODELS: dict[str, Callable[..., nn.Module]] = {
    "digits_cnn": lambda shape, k, **kw: SmallCNN(shape[0], k, **kw),
    "small_cnn": lambda shape, k, **kw: SmallCNN(shape[0], k, **kw),
    "signal_cnn": lambda shape, k, **kw: SignalCNN(shape[0], k, **kw),
    "fast_signal_cnn": lambda shape, k, **kw: FastSignalCNN(shape[0], k, **kw),
    "mlp": lambda shape, k, **kw: MLP(_numel(shape), k, **kw),
}

_CALLABLE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def is_callable_spec(spec: str) -> bool:
    """Whether ``spec`` has the form ``package.module:function``."""
    return bool(_CALLABLE.match(spec))


def _import_module(mod_name: str) -> Any:
    """``importlib.import_module``, then, when the top-level package is not on ``sys.path``, again with the
    current folder first on it, as ``python -m`` has it (the ``trickbag`` console script does not)."""
    try:
        return importlib.import_module(mod_name)
    except ModuleNotFoundError as exc:
        cwd = os.getcwd()
        top = mod_name.split(".")[0]
        if exc.name != top or any(os.path.abspath(p or ".") == cwd for p in sys.path):
            raise
        if not any(os.path.exists(os.path.join(cwd, top + ext)) for ext in ("", ".py")):
            raise
        sys.path.insert(0, cwd)
        return importlib.import_module(mod_name)


def import_callable(spec: str, key: str) -> Callable[..., Any]:
    """The function ``package.module:function`` names (imported: it runs that module's code), found on
    ``sys.path`` or in the current folder; ``key`` names the recipe key in the one-line
    :class:`RecipeError` for a bad spec."""
    if not _CALLABLE.match(spec):
        raise RecipeError(f"{key}={spec!r} is not of the form package.module:function")
    mod_name, fn_name = spec.split(":")
    try:
        mod = _import_module(mod_name)
    except ImportError as exc:
        raise RecipeError(f"{key}={spec!r}: cannot import {mod_name!r} ({exc}); it is looked for on sys.path "
                          f"(PYTHONPATH) and in the current folder {os.getcwd()}") from None
    fn = getattr(mod, fn_name, None)
    if not callable(fn):
        raise RecipeError(f"{key}={spec!r}: {mod_name!r} has no callable {fn_name!r}")
    return fn


def _declared(fn: Callable[..., Any]) -> tuple[set[str], bool]:
    """The keyword names ``fn`` declares, and whether it takes ``**kwargs``."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # a builtin or C callable: pass everything
        return set(), True
    names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return names, any(p.kind is p.VAR_KEYWORD for p in params)


def undeclared_kwargs(name: str, kwargs: dict[str, Any]) -> list[str]:
    """The ``model.kwargs`` keys that your own ``model.name=package.module:function`` does not declare (they
    are not passed to it); ``[]`` for a built-in or torchvision model."""
    if ":" not in name or not kwargs:
        return []
    names, any_kw = _declared(import_callable(name, "model.name"))
    return [] if any_kw else [k for k in kwargs if k not in names]


def _user_model(name: str, num_classes: int, kwargs: dict[str, Any], input_shape: tuple[int, ...]) -> nn.Module:
    fn = import_callable(name, "model.name")
    names, any_kw = _declared(fn)
    passed = dict(kwargs) if any_kw else {k: v for k, v in kwargs.items() if k in names}
    if "input_shape" in names and "input_shape" not in passed:
        passed["input_shape"] = tuple(input_shape)
    model = fn(num_classes=num_classes, **passed)
    if not isinstance(model, nn.Module):
        raise RecipeError(f"model.name={name!r} returned {type(model).__name__}, not a torch.nn.Module")
    return model


def _init_lazy(model: nn.Module, name: str, input_shape: tuple[int, ...]) -> nn.Module:
    """Initialise lazy modules (``nn.LazyLinear``, ...) with one dry forward on a zero batch of two samples, in
    eval mode and without gradients, before an optimizer sees the parameters; one :class:`RecipeError` when
    that forward fails."""
    from torch.nn.modules.lazy import LazyModuleMixin

    lazy = sorted({type(m).__name__ for m in model.modules() if isinstance(m, LazyModuleMixin)
                   and m.has_uninitialized_params()})
    if not lazy:
        return model
    was = model.training
    try:
        with torch.no_grad():
            model.eval()(torch.zeros((2, *input_shape)))
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        raise RecipeError(f"model.name={name!r} has lazy modules ({', '.join(lazy)}) that one dry forward on "
                          f"samples of shape {list(input_shape)} could not initialise: {type(exc).__name__}: "
                          f"{first}; give the layers their input sizes (the function may take input_shape=)"
                          ) from None
    finally:
        model.train(was)
    return model


def _torchvision_model(name: str, num_classes: int, kwargs: dict[str, Any]) -> nn.Module | None:
    import torchvision

    if name not in torchvision.models.list_models(module=torchvision.models):
        return None
    if kwargs.get("weights") not in (None,):
        raise RecipeError("model.kwargs.weights is not supported (no downloads); use model.weights=PATH")
    return torchvision.models.get_model(name, weights=None, num_classes=num_classes, **kwargs)


def build_model(name: str, input_shape: tuple[int, ...], num_classes: int, **kwargs: Any) -> nn.Module:
    """Build a model by recipe name for inputs of ``input_shape`` (per sample) and ``num_classes`` outputs."""
    try:
        if name in BUILTIN_MODELS:
            return BUILTIN_MODELS[name](tuple(input_shape), num_classes, **kwargs)
        if ":" in name:
            return _init_lazy(_user_model(name, num_classes, kwargs, tuple(input_shape)), name, tuple(input_shape))
        model = _torchvision_model(name, num_classes, kwargs)
        if model is not None:
            return model
    except TypeError as exc:
        raise RecipeError(f"model.kwargs {kwargs} do not fit model {name!r}: {exc}") from None
    import difflib

    import torchvision

    close = difflib.get_close_matches(name, list(BUILTIN_MODELS) + torchvision.models.list_models(), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise RecipeError(
        f"model.name={name!r} is unknown{hint}; allowed: {', '.join(BUILTIN_MODELS)}, a torchvision "
        "classification model name, or package.module:function"
    )
