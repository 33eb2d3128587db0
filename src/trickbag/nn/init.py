"""Weight initialisation schemes for conv/linear/norm layers, with zero-init of residual branches."""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn

from trickbag.nn.param_groups import NORM_TYPES

__all__ = ["init_weights"]

InitScheme = Literal[
    "kaiming_normal", "kaiming_uniform", "xavier_normal", "xavier_uniform", "orthogonal", "trunc_normal"
]
_SCHEMES = ("kaiming_normal", "kaiming_uniform", "xavier_normal", "xavier_uniform", "orthogonal", "trunc_normal")

# trunc_normal: N(0, 0.02^2) truncated at +-2 std (ViT / BERT convention).
TRUNC_NORMAL_STD = 0.02


def _init_weight(weight: torch.Tensor, scheme: str, generator: torch.Generator | None) -> None:
    if scheme == "kaiming_normal":
        nn.init.kaiming_normal_(weight, mode="fan_in", nonlinearity="relu", generator=generator)
    elif scheme == "kaiming_uniform":
        nn.init.kaiming_uniform_(weight, mode="fan_in", nonlinearity="relu", generator=generator)
    elif scheme == "xavier_normal":
        nn.init.xavier_normal_(weight, generator=generator)
    elif scheme == "xavier_uniform":
        nn.init.xavier_uniform_(weight, generator=generator)
    elif scheme == "orthogonal":
        nn.init.orthogonal_(weight, generator=generator)
    else:
        s = TRUNC_NORMAL_STD
        nn.init.trunc_normal_(weight, std=s, a=-2 * s, b=2 * s, generator=generator)


def _last_bns(model: nn.Module) -> list[nn.Module]:
    """The last norm layer of every residual block of a torchvision ResNet."""
    from torchvision.models.resnet import BasicBlock, Bottleneck

    found: list[nn.Module] = []
    for module in model.modules():
        if isinstance(module, Bottleneck):
            found.append(module.bn3)
        elif isinstance(module, BasicBlock):
            found.append(module.bn2)
    return found


def init_weights(
    model: nn.Module,
    scheme: InitScheme = "kaiming_normal",
    *,
    zero_init_last_bn: bool = False,
    generator: torch.Generator | None = None,
) -> nn.Module:
    """Re-initialise conv/linear weights with ``scheme``, zero their biases, set norm layers to identity.

    Schemes (``fan_in``/``fan_out`` as computed by ``torch.nn.init``; std of the weights):

    - ``kaiming_normal`` / ``kaiming_uniform`` (He et al. 2015), ``fan_in`` mode, ReLU gain:
      ``std = sqrt(2 / fan_in)``;
    - ``xavier_normal`` / ``xavier_uniform`` (Glorot & Bengio 2010): ``std = sqrt(2 / (fan_in + fan_out))``;
    - ``orthogonal`` (Saxe et al. 2014): the weight, flattened to ``[out, in * k...]``, has
      orthonormal rows (or columns, whichever are fewer);
    - ``trunc_normal`` (ViT, BERT): ``N(0, 0.02^2)`` truncated to ``[-0.04, 0.04]`` (std 0.0176).

    Conv (including transposed) and linear layers get ``scheme`` on their weight and zero
    bias; normalisation layers (BatchNorm*, InstanceNorm*, LayerNorm, GroupNorm, RMSNorm)
    get weight 1 and bias 0.  Other modules (embeddings, attention's packed projections,
    custom parameters) are left untouched.

    ``zero_init_last_bn=True`` (Goyal et al. 2017, "Accurate, Large Minibatch SGD", sec. 5.1)
    zeroes the weight of the last BatchNorm of each residual block (torchvision
    ``BasicBlock.bn2`` / ``Bottleneck.bn3``; a module with a ``zero_init_last()`` method, as
    in timm, has it called instead), so every block starts as the identity.  Raises
    ``ValueError`` if the model has no such block.

    Args:
        model: the module, modified in place (parameters must be initialised, not lazy).
        scheme: one of the names above.
        zero_init_last_bn: see above.
        generator: ``torch.Generator`` for reproducible draws (default: global RNG).

    Returns:
        ``model``.

    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> model = init_weights(torch.nn.Linear(512, 256), "kaiming_normal", generator=g)
    >>> round(model.weight.std().item() / (2 / 512) ** 0.5, 1), model.bias.abs().max().item()
    (1.0, 0.0)
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if scheme not in _SCHEMES:
        raise ValueError(f"scheme must be one of {_SCHEMES}, got {scheme!r}")
    if not isinstance(zero_init_last_bn, bool):
        raise TypeError(f"zero_init_last_bn must be a bool, got {zero_init_last_bn!r}")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")

    for name, param in model.named_parameters():
        if isinstance(param, nn.parameter.UninitializedParameter):
            raise ValueError(f"parameter {name!r} is lazy and not initialised yet: run one forward pass first")
    custom = [m for m in model.modules() if callable(getattr(m, "zero_init_last", None))]
    last = _last_bns(model)
    if zero_init_last_bn and not custom and not last:
        raise ValueError(
            "zero_init_last_bn=True but the model has no residual block to zero: supported are "
            "torchvision BasicBlock/Bottleneck and modules with a zero_init_last() method"
        )
    with torch.no_grad():
        _init_layers(model, scheme, generator)
        if zero_init_last_bn:
            for m in custom:
                m.zero_init_last()  # type: ignore[operator]
            for bn in last:
                if getattr(bn, "weight", None) is not None:
                    bn.weight.zero_()  # type: ignore[operator]
    return model


def _init_layers(model: nn.Module, scheme: str, generator: torch.Generator | None) -> None:
    for module in model.modules():
        if isinstance(module, (nn.modules.conv._ConvNd, nn.Linear)):
            _init_weight(module.weight, scheme, generator)
            if module.bias is not None:
                module.bias.zero_()
        elif isinstance(module, NORM_TYPES):
            weight, bias = getattr(module, "weight", None), getattr(module, "bias", None)
            if isinstance(weight, torch.Tensor):
                weight.fill_(1.0)
            if isinstance(bias, torch.Tensor):
                bias.zero_()

