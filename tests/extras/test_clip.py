"""Zero-shot CLIP maths on a tiny randomly initialised open_clip model built here; nothing is downloaded."""

from __future__ import annotations

import json
import socket

import pytest
import torch
import torch.nn.functional as F

open_clip = pytest.importorskip("open_clip")

from trickbag.errors import CheckpointError  # noqa: E402
from trickbag.extras.clip import LoadedClip, load_clip, zero_shot_classifier, zero_shot_predict  # noqa: E402

TINY_CFG = {
    "embed_dim": 16,
    "vision_cfg": {"image_size": 16, "patch_size": 8, "width": 32, "layers": 1, "head_width": 16},
    "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1},
}
CLASSES = ["cat", "dog", "school bus"]
TEMPLATES = ["a photo of a {}.", "a blurry photo of a {}.", "a drawing of the {}."]


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    model = open_clip.CLIP(**json.loads(json.dumps(TINY_CFG))).eval()
    # the BPE vocabulary ships inside the open_clip wheel: no download
    tokenizer = open_clip.SimpleTokenizer(context_length=TINY_CFG["text_cfg"]["context_length"])
    return model, tokenizer


def test_classifier_shape_and_unit_columns(tiny):
    model, tok = tiny
    W = zero_shot_classifier(model, tok, CLASSES, TEMPLATES)
    assert W.shape == (TINY_CFG["embed_dim"], len(CLASSES))
    torch.testing.assert_close(W.norm(dim=0), torch.ones(len(CLASSES)))
    assert not W.requires_grad


def test_ensembling_equals_naive_per_text_loop(tiny):
    model, tok = tiny
    W = zero_shot_classifier(model, tok, CLASSES, TEMPLATES)
    with torch.no_grad():
        for k, name in enumerate(CLASSES):
            acc = torch.zeros(TINY_CFG["embed_dim"])
            for t in TEMPLATES:
                e = model.encode_text(tok([t.format(name)]))[0]
                acc += e / e.norm()
            ref = acc / len(TEMPLATES)
            ref = ref / ref.norm()
            torch.testing.assert_close(W[:, k], ref, atol=1e-5, rtol=1e-5)
    # and agrees with open_clip's own implementation
    ref_oc = open_clip.build_zero_shot_classifier(model, tok, CLASSES, TEMPLATES, num_classes_per_batch=None)
    torch.testing.assert_close(W, ref_oc, atol=1e-5, rtol=1e-5)


def test_ensembling_is_not_mean_of_raw_embeddings(tiny):
    """The classic slip: averaging un-normalised embeddings lets long-norm prompts dominate."""
    model, tok = tiny
    W = zero_shot_classifier(model, tok, ["cat"], TEMPLATES)[:, 0]
    with torch.no_grad():
        raw = model.encode_text(tok([t.format("cat") for t in TEMPLATES]))
    norms = raw.norm(dim=1)
    assert (norms.max() - norms.min()) / norms.mean() > 1e-3  # the prompts' norms differ
    wrong = F.normalize(raw.mean(0), dim=0)
    assert not torch.allclose(W, wrong, atol=1e-6)


def test_callable_templates_match_string_templates(tiny):
    model, tok = tiny
    as_str = zero_shot_classifier(model, tok, CLASSES, TEMPLATES)
    as_fn = zero_shot_classifier(model, tok, CLASSES, [lambda c, t=t: t.format(c) for t in TEMPLATES])
    torch.testing.assert_close(as_str, as_fn)


def test_predict_is_softmax_of_scaled_cosine(tiny):
    model, tok = tiny
    W = zero_shot_classifier(model, tok, CLASSES, TEMPLATES)
    images = torch.randn(4, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    probs = zero_shot_predict(model, W, images)
    assert probs.shape == (4, len(CLASSES))
    with torch.no_grad():
        f = model.encode_image(images)
    cos = (f / f.norm(dim=1, keepdim=True)) @ W  # cosine similarity, W columns are unit
    e = torch.exp(100.0 * cos - (100.0 * cos).max(dim=1, keepdim=True).values)
    torch.testing.assert_close(probs, e / e.sum(dim=1, keepdim=True), atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(probs.sum(1), torch.ones(4))
    # temperature: log p_i - log p_j = T (cos_i - cos_j)
    p7 = zero_shot_predict(model, W, images, temperature=7.0)
    torch.testing.assert_close(p7.log()[:, 0] - p7.log()[:, 1], 7.0 * (cos[:, 0] - cos[:, 1]), atol=1e-4, rtol=1e-4)
    # scale of the raw image features does not matter (they are normalised)
    class Scaled(torch.nn.Module):
        def encode_image(self, x):
            return 1000.0 * model.encode_image(x)

    torch.testing.assert_close(zero_shot_predict(Scaled(), W, images), probs)


def test_validation(tiny):
    model, tok = tiny
    with pytest.raises(ValueError, match="class_names must be a non-empty"):
        zero_shot_classifier(model, tok, [], TEMPLATES)
    with pytest.raises(ValueError, match="templates must be a non-empty"):
        zero_shot_classifier(model, tok, CLASSES, "a photo of a {}")
    with pytest.raises(ValueError, match="placeholder"):
        zero_shot_classifier(model, tok, CLASSES, ["a photo"])
    with pytest.raises(TypeError, match="encode_text"):
        zero_shot_classifier(torch.nn.Linear(2, 2), tok, CLASSES, TEMPLATES)
    W = torch.eye(16)[:, :3]
    with pytest.raises(ValueError, match="temperature must be"):
        zero_shot_predict(model, W, torch.zeros(1, 3, 16, 16), temperature=0.0)
    with pytest.raises(ValueError, match="feature size D must match"):
        zero_shot_predict(model, torch.eye(8), torch.zeros(1, 3, 16, 16))
    with pytest.raises(ValueError, match="classifier must be a \\[D, K\\]"):
        zero_shot_predict(model, torch.ones(16), torch.zeros(1, 3, 16, 16))


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_load_clip_loads_local_weights_without_network(tmp_path, no_network):
    cfg_path = tmp_path / "trickbag-tiny-test.json"
    cfg_path.write_text(json.dumps(TINY_CFG))
    open_clip.add_model_config(cfg_path)
    torch.manual_seed(3)
    source = open_clip.CLIP(**json.loads(json.dumps(TINY_CFG)))
    weights = tmp_path / "tiny.pt"
    torch.save(source.state_dict(), weights)

    loaded = load_clip("trickbag-tiny-test", weights)
    assert isinstance(loaded, LoadedClip) and not loaded.model.training
    ref = source.state_dict()
    got = loaded.model.state_dict()
    assert got.keys() == ref.keys()
    for key in ref:
        torch.testing.assert_close(got[key], ref[key], msg=key)
    assert isinstance(loaded.tokenizer, open_clip.SimpleTokenizer)
    from PIL import Image

    x = loaded.preprocess(Image.new("RGB", (40, 30), (128, 64, 32)))
    assert x.shape == (3, 16, 16)


def test_load_clip_errors(tmp_path, no_network):
    with pytest.raises(CheckpointError, match="not found: .*missing.pt.*never downloads"):
        load_clip("ViT-B-32", tmp_path / "missing.pt")
    weights = tmp_path / "w.pt"
    weights.write_bytes(b"")
    with pytest.raises(ValueError, match="schema names are not supported"):
        load_clip("hf-hub:org/model", weights)
    with pytest.raises(ValueError, match="did you mean 'ViT-B-32'"):
        load_clip("ViT-B-32x", weights)
    with pytest.raises(CheckpointError, match="not found"):
        load_clip("ViT-B-32", tmp_path)  # a directory is not a weights file


def test_missing_extra_names_it(monkeypatch, tmp_path):
    import sys

    from trickbag.errors import MissingExtraError

    weights = tmp_path / "w.pt"
    weights.write_bytes(b"")
    monkeypatch.setitem(sys.modules, "open_clip", None)
    with pytest.raises(MissingExtraError, match=r"trickbag\[clip\]"):
        load_clip("ViT-B-32", weights)
