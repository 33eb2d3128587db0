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
    from trickbag.train.checkpoint_files import load_checkpoint
    from trickbag.train.parts import model_for

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


def _quiet_run(tmp_path, *overrides):
    from trickbag.runs.run import run_recipe

    return run_recipe(load_recipe("digits", ["run.progress=false", "run.plots=false", "log.tensorboard=false",
                                             f"run.dir={tmp_path / 'runs'}", "run.name=p", *overrides]), quiet=True)


def _rows(path, header, rows):
    path.write_text("\n".join(",".join(r) for r in [header, *rows]) + "\n")
    return path


@pytest.fixture(scope="module")
def table_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("predict-table")
    rows = [[f"id{i}", f"{(i * 7) % 10 / 3:.3f}", ["cash", "card"][i % 2], ["no", "yes"][(i // 2) % 2]]
            for i in range(60)]
    data = _rows(tmp / "train.csv", ["customer", "amount", "payment_method", "label"], rows)
    result = _quiet_run(tmp, "data.name=csv", f"data.root={data}", "data.label_column=label",
                        "data.feature_columns=[amount, payment_method]", "train.epochs=1")
    return tmp, data, result.run_dir


def test_predict_time_bad_cells_and_missing_columns_name_the_predicted_file(table_run, tmp_path, capsys):
    from trickbag.cli import main

    _, data, run = table_run
    bad = _rows(tmp_path / "new.csv", ["customer", "amount", "payment_method"],
                [["a", "1.5", "cash"], ["b", "lots", "card"], ["c", "?", "card"], ["d", "many", "cash"]])
    assert main(["predict", str(run), str(bad), "--strict"]) == 2
    err = capsys.readouterr().err.strip()
    assert str(bad) in err and str(data) not in err and "'amount' holds 'lots' on line 3 (and 1 more cells)" in err
    lacking = _rows(tmp_path / "lacking.csv", ["customer", "amount"], [["a", "1.5"]])
    assert main(["predict", str(run), str(lacking), "--strict"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "lacks the run's feature column 'payment_method'" in err[0] and "not in list" not in err[0]


def test_predict_carries_an_id_column_through(table_run, tmp_path):
    import csv

    from trickbag.cli import main

    _, _, run = table_run
    new = _rows(tmp_path / "new.csv", ["payment_method", "customer", "amount"],
                [["cash", "x-17", "1.0"], ["card", "x-03", ""], ["cash", "x-99", "3.3"]])
    out = tmp_path / "p.csv"
    assert main(["predict", str(run), str(new), "--id-column", "customer", "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert [r["customer"] for r in rows] == ["x-17", "x-03", "x-99"]
    assert {r["prediction"] for r in rows} <= {"no", "yes"}
    assert main(["predict", str(run), str(new), "--id-column", "nope"]) == 2


def test_predict_skips_unreadable_images_lists_them_and_exits_1(tmp_path, capsys):
    import csv

    import numpy as np
    from PIL import Image

    from trickbag.cli import main

    rng = np.random.default_rng(0)
    for cls, base in (("a", 40), ("b", 210)):
        (tmp_path / "imgs" / cls).mkdir(parents=True)
        for i in range(6):
            img = np.clip(base + rng.normal(0, 30, (10, 10)), 0, 255).astype(np.uint8)
            Image.fromarray(img, mode="L").convert("RGB").save(tmp_path / "imgs" / cls / f"{i}.png")
    run = _quiet_run(tmp_path, "data.name=imagefolder", f"data.root={tmp_path / 'imgs'}", "data.image_size=8",
                     "train.epochs=1", "data.batch_size=4", "data.test_fraction=0.25", "data.val_fraction=0.2").run_dir
    queries = tmp_path / "q"
    queries.mkdir()
    for name in ("1.png", "3.png"):
        (queries / name).write_bytes((tmp_path / "imgs" / "a" / name).read_bytes())
    (queries / "2.png").write_bytes(b"\x89PNG\r\n\x1a\n truncated")
    out = tmp_path / "p.csv"
    capsys.readouterr()
    assert main(["predict", str(run), str(queries), "--out", str(out)]) == 1
    rows = list(csv.DictReader(out.open()))
    assert [r["input"] for r in rows] == [str(queries / "1.png"), str(queries / "3.png"), str(queries / "2.png")]
    assert [bool(r["skipped"]) for r in rows] == [False, False, True] and rows[0]["prediction"] in ("a", "b")
    assert str(queries / "2.png") in capsys.readouterr().err
    strict = tmp_path / "strict.csv"
    assert main(["predict", str(run), str(queries), "--out", str(strict), "--strict"]) == 2 and not strict.exists()
