"""The README's hand-written-loop example runs as written, and the recipe example validates."""

import re
from pathlib import Path

import torch
import yaml
from torch.utils.data import DataLoader, TensorDataset

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def _block(lang: str, contains: str) -> str:
    for body in re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S):
        if contains in body:
            return body
    raise AssertionError(f"no ```{lang} block containing {contains!r} in README.md")


def test_readme_loop_example_runs_and_uses_the_averaged_weights():
    torch.manual_seed(0)
    x, y = torch.randn(64, 3, 8, 8), torch.randint(0, 10, (64,))
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(192, 10))
    seen = {}

    def evaluate(m):
        seen["weight"] = m[1].weight.detach().clone()

    env = {"model": model, "loader": DataLoader(TensorDataset(x, y), batch_size=16), "epochs": 2,
           "evaluate": evaluate}
    exec(compile(_block("python", "MixupCutmix"), "README.md", "exec"), env)
    ema = env["ema"]
    # inside `swapped` the model held the EMA weights; afterwards the raw weights are back
    assert torch.equal(seen["weight"], ema.module[1].weight)
    assert not torch.equal(model[1].weight, ema.module[1].weight)


def test_readme_recipe_example_validates():
    from trickbag.recipe import recipe_from_dict

    recipe = recipe_from_dict(yaml.safe_load(_block("yaml", "tricks:")))
    assert recipe.tricks.label_smoothing.enabled and recipe.tricks.ema.enabled
    assert recipe.train.epochs == 15


def test_readme_loop_pasted_as_is_gives_averaged_weights_as_good_as_the_raw_ones():
    """The EMA of the README (its defaults) follows a short run: its weights are not left near the random start."""
    torch.manual_seed(0)
    x = torch.randn(256, 3, 8, 8)
    y = x.mean(dim=(1, 2, 3)).gt(0).long() + 2 * x[:, 0].mean(dim=(1, 2)).gt(0).long()  # 4 learnable classes
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(192, 10))
    acc = {}

    def evaluate(m):
        with torch.no_grad():
            acc["ema"] = float((m(x).argmax(1) == y).float().mean())

    env = {"model": model, "loader": DataLoader(TensorDataset(x, y), batch_size=32), "epochs": 5,
           "evaluate": evaluate}
    exec(compile(_block("python", "MixupCutmix"), "README.md", "exec"), env)
    with torch.no_grad():
        raw = float((model(x).argmax(1) == y).float().mean())
    assert raw > 0.6, raw  # the set-up learns
    assert acc["ema"] > raw - 0.1, (acc, raw)  # 40 updates: without warm-up a 0.999 average stays near chance
