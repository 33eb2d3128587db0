"""`trickbag summary / stats / profile` on tiny recipes, checked against independent computations."""

import json
import re

import torch

from trickbag.cli import main
from trickbag.data.sources import build_data
from trickbag.models import build_model
from trickbag.recipe import load_recipe

FAKE = ["data.name=fake", "data.num_samples=64", "data.num_classes=3", "data.shape=[2,6,6]"]


def test_summary_counts_parameters(capsys):
    assert main(["summary", "digits", *FAKE, "--depth", "1"]) == 0
    out = capsys.readouterr().out
    model = build_model("digits_cnn", (2, 6, 6), 3)
    expected = sum(p.numel() for p in model.parameters())
    assert f"parameters: {expected:,}" in out


def test_stats_matches_all_pixels(capsys):
    assert main(["stats", "digits", *FAKE]) == 0
    out = capsys.readouterr().out
    recipe = load_recipe("digits", FAKE)
    ds = build_data(recipe.data).eval_train
    x = torch.stack([ds[i][0] for i in range(len(ds))]).double()  # [N, C, H, W]
    pixels = x.transpose(0, 1).reshape(x.shape[1], -1)
    mean = [float(v) for v in re.search(r"mean: \[(.*)\]", out).group(1).split(",")]
    std = [float(v) for v in re.search(r"std: \[(.*)\]", out).group(1).split(",")]
    assert torch.allclose(torch.tensor(mean, dtype=torch.float64), pixels.mean(1), atol=1e-4)
    assert torch.allclose(torch.tensor(std, dtype=torch.float64), pixels.std(1, unbiased=False), atol=1e-4)


def test_profile_writes_chrome_trace(tmp_path, capsys):
    out_dir = tmp_path / "prof"
    assert main(["profile", "digits", *FAKE, "--steps", "2", "--top", "5", "--out", str(out_dir)]) == 0
    out = capsys.readouterr().out
    assert "aten::" in out
    trace = json.loads((out_dir / "trace.json").read_text())
    assert trace["traceEvents"]


def test_profile_refuses_existing_output(tmp_path, capsys):
    out_dir = tmp_path / "prof"
    out_dir.mkdir()
    (out_dir / "keep.txt").write_text("user data")
    assert main(["profile", "digits", *FAKE, "--steps", "1", "--out", str(out_dir)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("trickbag: error:")
    assert (out_dir / "keep.txt").read_text() == "user data"


def test_recipes_show_prints_only_the_yaml_and_keys_lists_every_key(capsys, tmp_path):
    import yaml

    from trickbag.config import builtin_recipes
    from trickbag.recipe import load_recipe, recipe_keys

    assert main(["recipes", "--show", "digits"]) == 0
    out = capsys.readouterr().out
    assert out == builtin_recipes()["digits"].read_text(encoding="utf-8")
    (tmp_path / "my.yaml").write_text(out)
    assert load_recipe(str(tmp_path / "my.yaml")).model_dump() == load_recipe("digits").model_dump() | {"name": "my"}
    assert isinstance(yaml.safe_load(out), dict)
    assert main(["recipes", "--keys"]) == 0
    listed = capsys.readouterr().out
    assert all(f"  {k} " in listed for k in recipe_keys())


def test_version_prints_the_version(capsys):
    import pytest

    import trickbag

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out.strip() == f"trickbag {trickbag.__version__}"
