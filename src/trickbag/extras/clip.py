"""Zero-shot classification with a CLIP model (Radford et al. 2021), weights from a local file only.

The standard recipe:

1. for every class, fill each prompt template with the class name, encode the texts,
   L2-normalise each embedding, average over the templates and normalise again
   ("prompt ensembling", section 3.1.4 of the CLIP paper) -- one column of the
   classifier ``W`` ``[D, K]``;
2. for images, L2-normalise the image embeddings ``f`` ``[N, D]`` and take
   ``softmax(100 * f @ W)`` -- 100 is the temperature CLIP's learned
   ``logit_scale`` converges to (its clamp, ``exp(4.6052)``).

:func:`zero_shot_classifier` and :func:`zero_shot_predict` work with any model that
has ``encode_text(tokens)`` and ``encode_image(images)`` (open_clip, OpenAI CLIP).
:func:`load_clip` builds an open_clip model (extra ``clip``) from a local weights
file and never downloads.
"""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from trickbag._optional import require
from trickbag.errors import CheckpointError

__all__ = ["zero_shot_classifier", "zero_shot_predict", "load_clip", "LoadedClip"]

Template = str | Callable[[str], str]


def _fill(template: Template, name: str, k: int) -> str:
    if callable(template):
        text = template(name)
        if not isinstance(text, str):
            raise TypeError(f"templates[{k}] returned {type(text).__name__}, expected a str")
        return text
    if not isinstance(template, str) or "{}" not in template:
        raise ValueError(f"templates[{k}] = {template!r} must be a str with a '{{}}' placeholder or a callable")
    return template.format(name)


def _model_device(model: nn.Module) -> torch.device:
    try:
        return next(model.parameters()).device
    except (StopIteration, AttributeError):
        return torch.device("cpu")


@torch.no_grad()
def zero_shot_classifier(
    model: nn.Module,
    tokenizer: Callable[[list[str]], Tensor],
    class_names: Sequence[str],
    templates: Sequence[Template],
    *,
    device: str | torch.device | None = None,
) -> Tensor:
    """Build the zero-shot weight matrix ``W`` ``[D, K]`` by prompt ensembling over ``templates``.

    Source: Radford et al. 2021 (CLIP), prompt ensembling: column ``k`` is
    ``normalise(mean_t normalise(encode_text(template_t.format(class_k))))``.
    ``templates`` are strings with a ``{}`` placeholder (or callables ``name -> text``,
    like open_clip's ``IMAGENET_CLASSNAMES`` templates); ``tokenizer(list_of_texts)``
    returns token ids ``[T, L]``.  ``device`` defaults to the model's.  Runs under
    ``torch.no_grad()`` in the model's current mode (call ``model.eval()`` first).

    >>> class Toy(nn.Module):  # encodes a text as (length, 1)
    ...     def encode_text(self, tokens): return tokens.float()
    >>> tok = lambda texts: torch.tensor([[len(t), 1] for t in texts])
    >>> zero_shot_classifier(Toy(), tok, ["cat"], ["{}"]).T  # normalise((3, 1))
    tensor([[0.9487, 0.3162]])
    """
    if isinstance(class_names, str) or not isinstance(class_names, Sequence) or len(class_names) == 0:
        raise ValueError(f"class_names must be a non-empty sequence of str, got {class_names!r:.80}")
    if isinstance(templates, str) or not isinstance(templates, Sequence) or len(templates) == 0:
        raise ValueError(
            f"templates must be a non-empty sequence of str with a '{{}}' placeholder (or callables), "
            f"got {templates!r:.80}"
        )
    for k, name in enumerate(class_names):
        if not isinstance(name, str):
            raise TypeError(f"class_names[{k}] must be a str, got {type(name).__name__}")
    if not hasattr(model, "encode_text"):
        raise TypeError(f"model must have an encode_text(tokens) method (a CLIP model), got {type(model).__name__}")
    # a CLIP model's method (checked above); nn.Module's attribute type says "a tensor or a module"
    encode_text = cast("Callable[[Any], Tensor]", model.encode_text)
    dev = torch.device(device) if device is not None else _model_device(model)
    columns = []
    for name in class_names:
        texts = [_fill(t, name, k) for k, t in enumerate(templates)]
        tokens = tokenizer(texts)
        emb = encode_text(tokens.to(dev) if isinstance(tokens, Tensor) else tokens)
        if emb.dim() != 2 or emb.shape[0] != len(texts):
            raise ValueError(
                f"model.encode_text returned shape {tuple(emb.shape)}, "
                f"expected [{len(texts)}, D] for {len(texts)} texts"
            )
        emb = F.normalize(emb.float(), dim=-1)
        columns.append(F.normalize(emb.mean(dim=0), dim=0))
    return torch.stack(columns, dim=1)


@torch.no_grad()
def zero_shot_predict(model: nn.Module, classifier: Tensor, images: Tensor, *, temperature: float = 100.0) -> Tensor:
    """Return class probabilities ``softmax(temperature * normalise(encode_image(images)) @ W)`` ``[N, K]``.

    Source: Radford et al. 2021 (CLIP) zero-shot evaluation.  ``classifier`` ``W`` is
    ``[D, K]`` from :func:`zero_shot_classifier`; ``images`` ``[N, C, H, W]`` are already
    preprocessed for the model; ``temperature`` is CLIP's logit scale (100).  Runs under
    ``torch.no_grad()``.

    >>> class Toy(nn.Module):
    ...     def encode_image(self, x): return x.flatten(1)
    >>> W = torch.eye(2)
    >>> zero_shot_predict(Toy(), W, torch.tensor([[[[3.0]], [[0.0]]]]), temperature=1.0)  # softmax([1, 0])
    tensor([[0.7311, 0.2689]])
    """
    if not isinstance(classifier, Tensor) or classifier.dim() != 2:
        raise ValueError(
            f"classifier must be a [D, K] tensor from zero_shot_classifier, got "
            f"{tuple(classifier.shape) if isinstance(classifier, Tensor) else type(classifier).__name__}"
        )
    if not isinstance(images, Tensor):
        raise TypeError(f"images must be a tensor [N, C, H, W], got {type(images).__name__}")
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not (
        math.isfinite(temperature) and temperature > 0
    ):
        raise ValueError(f"temperature must be a finite float > 0 (CLIP uses 100), got {temperature!r}")
    if not hasattr(model, "encode_image"):
        raise TypeError(f"model must have an encode_image(images) method (a CLIP model), got {type(model).__name__}")
    # a CLIP model's method (checked above); nn.Module's attribute type says "a tensor or a module"
    encode_image = cast("Callable[[Tensor], Tensor]", model.encode_image)
    feats = encode_image(images.to(classifier.device))
    if feats.dim() != 2 or feats.shape[1] != classifier.shape[0]:
        raise ValueError(
            f"image features have shape {tuple(feats.shape)} but the classifier is {tuple(classifier.shape)}: "
            f"the feature size D must match (was the classifier built with the same model?)"
        )
    logits = float(temperature) * F.normalize(feats.float(), dim=-1) @ classifier.float()
    return logits.softmax(dim=-1)


class LoadedClip(NamedTuple):
    """What :func:`load_clip` returns: the model in eval mode, its evaluation transform and its tokenizer.

    ``tokenizer`` is None for models whose tokenizer is fetched from the Hugging Face
    hub (build it yourself from a local copy).
    """

    model: nn.Module
    preprocess: Callable[[Any], Tensor]
    tokenizer: Callable[[list[str]], Tensor] | None


def load_clip(
    model_name: str, weights_path: str | os.PathLike[str], *, device: str | torch.device = "cpu"
) -> LoadedClip:
    """Build open_clip model ``model_name`` and load its weights from the local file ``weights_path``.

    Calls ``open_clip.create_model_and_transforms(model_name, pretrained=<absolute path>)``
    with the image and text towers' own pretrained downloads turned off, so nothing is
    fetched: a missing file is a :class:`trickbag.errors.CheckpointError`, a name with a
    ``hf-hub:`` schema or a model whose text tower comes from the Hugging Face hub is a
    ``ValueError``.  ``model_name`` is one of ``open_clip.list_models()`` (or a config
    registered with ``open_clip.add_model_config``).  Returns a :class:`LoadedClip`.

    >>> load_clip("ViT-B-32", "/no/such/weights.pt")
    Traceback (most recent call last):
    ...
    trickbag.errors.CheckpointError: CLIP weights file not found: '/no/such/weights.pt' ...
    """
    if not isinstance(model_name, str) or not model_name:
        raise TypeError(f"model_name must be a non-empty str such as 'ViT-B-32', got {model_name!r}")
    if model_name.startswith(("hf-hub:", "local-dir:")):
        raise ValueError(
            f"model_name={model_name!r}: schema names are not supported because they may download; "
            "pass a built-in architecture name (open_clip.list_models()) and a local weights file"
        )
    path = Path(weights_path).expanduser()
    if not path.is_file():
        raise CheckpointError(
            f"CLIP weights file not found: {str(path)!r} (trickbag never downloads weights; "
            f"download them yourself and pass the file path)"
        )
    open_clip = require("open_clip", extra="clip")
    config = open_clip.get_model_config(model_name)
    if config is None:
        close = difflib.get_close_matches(model_name, open_clip.list_models(), n=3)
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else "; see open_clip.list_models()"
        raise ValueError(f"model_name={model_name!r} is not an open_clip architecture{hint}")
    if "hf_model_name" in config.get("text_cfg", {}):
        raise ValueError(
            f"model_name={model_name!r} has a Hugging Face text tower ({config['text_cfg']['hf_model_name']!r}) "
            "whose construction may download; it is not supported by load_clip"
        )
    # An absolute path can never be mistaken for one of open_clip's pretrained tags.
    model, _, preprocess = open_clip.create_model_and_transforms(
        model_name,
        pretrained=str(path.resolve()),
        device=device,
        pretrained_image=False,
        pretrained_text=False,
    )
    model.eval()
    tokenizer = None
    if "hf_tokenizer_name" not in config.get("text_cfg", {}):
        tokenizer = open_clip.get_tokenizer(model_name)
    return LoadedClip(model=model, preprocess=preprocess, tokenizer=tokenizer)
