"""Using a trained run: eval and predict apply the recipe's evaluation tricks as the run did."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from trickbag.recipe import load_recipe


def _naive_tta(model, x, dims, average):
    """Average of the model's outputs (softmax probabilities as log, or logits) over x and its flips."""
    views = [x] + [torch.flip(x, dims=(d,)) for d in dims]
    outs = [model(v).double() for v in views]
    if average == "logits":
        return torch.stack(outs).mean(0)
    return torch.log(torch.stack([torch.softmax(o, 1) for o in outs]).mean(0))


def test_eval_and_predict_apply_the_recipes_tta_and_test_size_like_the_run(tmp_path):
    """`trickbag eval`/`predict` give the run's own test numbers: flip TTA at the FixRes test size."""
    import numpy as np
    from PIL import Image

    from trickbag.data.sources import build_data
    from trickbag.runs.inference import evaluate_run, predict_image
    from trickbag.runs.run import run_recipe
    from trickbag.train.build import model_for
    from trickbag.train.checkpoint import load_checkpoint

    recipe = load_recipe("digits", [
        "train.epochs=2", "model.kwargs={width: 4}", "log.tensorboard=false", "run.progress=false", "run.plots=false",
        f"run.dir={tmp_path}", "run.name=r", "tricks.tta.enabled=true", "tricks.tta.vflip=true",
        "tricks.multiscale.enabled=true", "tricks.multiscale.train_sizes=[8]", "tricks.multiscale.test_size=12",
    ])
    result = run_recipe(recipe, quiet=True)
    applied: list[str] = []
    m = evaluate_run(result.run_dir, device="cpu", tricks=applied)
    assert m["acc"] == pytest.approx(result.test["test/acc"], abs=0) and m["n"] == result.test["test/n"] == 360
    assert m["loss"] == pytest.approx(result.test["test/loss"], rel=1e-6)
    assert applied == ["test size 12x12 (tricks.multiscale)", "flip TTA: hflip + vflip, probs averaged (tricks.tta)"]

    # reference, written out here: best.pt's model, bilinear (antialiased) resize to 12, mean of 3 views' softmax
    ckpt = load_checkpoint(result.run_dir / "checkpoints" / "best.pt")
    data = build_data(recipe.data)
    model = model_for(recipe, data)
    model.load_state_dict(ckpt["model"])
    model.eval()
    x, y = (
        torch.stack([data.test[i][0] for i in range(len(data.test))]),
        torch.tensor([data.test[i][1] for i in range(len(data.test))]),
    )

    def naive(xb):
        xb = F.interpolate(xb, size=(12, 12), mode="bilinear", align_corners=False, antialias=True)
        return torch.log(_naive_tta(model, xb, (-1, -2), "probs").exp())

    with torch.no_grad():
        logp = naive(x)
        plain_logits = model(x)
    assert m["acc"] == pytest.approx(float((logp.argmax(1) == y).double().mean()), rel=1e-6)
    assert m["loss"] == pytest.approx(float(F.nll_loss(logp, y)), rel=1e-5)
    p = evaluate_run(result.run_dir, device="cpu", plain=True)
    assert p["acc"] == pytest.approx(float((plain_logits.argmax(1) == y).double().mean()), rel=1e-6)
    assert p["loss"] == pytest.approx(float(F.cross_entropy(plain_logits, y)), rel=1e-5)

    # predict: the same wrapping on one PNG
    from sklearn.datasets import load_digits

    png = tmp_path / "digit.png"
    Image.fromarray((load_digits().images[7] * 255 / 16).round().astype(np.uint8), mode="L").save(png)
    with Image.open(png) as im:
        xi = data.predict_transform(im.copy()).unsqueeze(0)
    with torch.no_grad():
        want_tta, want_plain = naive(xi).exp()[0], torch.softmax(model(xi), 1)[0]
    for plain, want in ((False, want_tta), (True, want_plain)):
        ranked = predict_image(result.run_dir / "checkpoints" / "best.pt", png, top=10, plain=plain)
        for c, prob in ranked:
            assert prob == pytest.approx(float(want[int(c)]), abs=1e-5)
