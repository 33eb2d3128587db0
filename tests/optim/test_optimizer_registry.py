"""The optimizer registry (trickbag.optim.optimizers): every optim.name builds exactly the optimizer written out
here, each entry declares the keys it reads and what it refuses, nothing outside the registry compares optimizer
names, and a new optimizer module added to MODULES reaches the recipe, ``trickbag recipes --keys``,
docs/recipes.md and the FSDP / SAM / SWA / Lookahead refusals with no other edit (CONTRIBUTING's "How to add an
optimizer" is what ``test_a_new_optimizer_module_reaches_every_place_that_names_optimizers`` does)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from trickbag.config import OptimConfig, Section
from trickbag.errors import RecipeError
from trickbag.optim import optimizers
from trickbag.optim.muon import MuonAdamW
from trickbag.recipe import load_recipe

SRC = Path(__file__).resolve().parents[2] / "src" / "trickbag"
NAMES = ("sgd", "adamw", "adam", "rmsprop", "muon", "schedulefree_adamw", "schedulefree_sgd", "lion", "lamb")


def _expected(name: str, o: Any) -> tuple[type, dict[str, Any]]:
    """The class and keyword arguments each optim.name built before the registry (the old if-chain, written out)."""
    import pytorch_optimizer as po
    import schedulefree as sf

    adam = dict(lr=o.lr, betas=o.betas, eps=o.eps, weight_decay=o.weight_decay)
    return {
        "sgd": (torch.optim.SGD, dict(lr=o.lr, momentum=o.momentum, nesterov=o.nesterov and o.momentum > 0,
                                      weight_decay=o.weight_decay)),
        "adamw": (torch.optim.AdamW, adam),
        "adam": (torch.optim.Adam, adam),
        "rmsprop": (torch.optim.RMSprop, dict(lr=o.lr, momentum=o.momentum, eps=o.eps, weight_decay=o.weight_decay)),
        "muon": (MuonAdamW, dict(lr=o.lr, weight_decay=o.weight_decay, momentum=o.muon_momentum, betas=o.betas,
                                 eps=o.eps)),
        "schedulefree_adamw": (sf.AdamWScheduleFree, adam),
        "schedulefree_sgd": (sf.SGDScheduleFree, dict(lr=o.lr, momentum=o.momentum, weight_decay=o.weight_decay)),
        "lion": (po.Lion, dict(lr=o.lr, betas=o.betas, weight_decay=o.weight_decay)),
        "lamb": (po.Lamb, adam),
    }[name]


def test_the_names_and_their_order_are_the_recipes():
    assert optimizers.names() == NAMES
    assert load_recipe("digits", []).optim.name == optimizers.DEFAULT == "sgd"
    with pytest.raises(RecipeError, match="optim.name"):
        load_recipe("digits", ["optim.name=adagrad"])


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("extra", [[], ["optim.momentum=0", "optim.nesterov=false", "optim.lr=0.003",
                                        "optim.betas=[0.8,0.99]", "optim.eps=1e-6", "optim.weight_decay=0.01",
                                        "optim.muon_momentum=0.9"]])
def test_every_name_builds_the_class_and_arguments_it_always_did(name, extra):
    from trickbag.train.parts import optimizer_spec

    recipe = load_recipe("digits", [f"optim.name={name}", *extra])
    cls, kwargs = optimizer_spec(recipe)
    want_cls, want = _expected(name, recipe.optim)
    assert cls is want_cls and kwargs == want and list(kwargs) == list(want)


def test_every_module_of_the_folder_is_in_modules_once():
    folder = SRC / "optim" / "optimizers"
    files = {p.stem for p in folder.glob("*.py")} - {"__init__", "base"}
    listed = [m.__name__.rsplit(".", 1)[-1] for m in optimizers.MODULES]
    assert sorted(listed) == sorted(files) and len(set(listed)) == len(listed)


def test_a_name_declared_twice_is_refused(monkeypatch):
    from trickbag.optim.optimizers import sgd

    monkeypatch.setattr(optimizers, "MODULES", (*optimizers.MODULES, sgd))
    with pytest.raises(ValueError, match="'sgd' is declared twice"):
        optimizers.names()


class _LrAgain(Section):
    lr: float = 0.1  # another lr


def test_an_optimizer_key_defined_twice_is_refused(monkeypatch):
    entry = optimizers.Optimizer(name="twice", spec=lambda o: (object, {}), options=_LrAgain)
    monkeypatch.setattr(optimizers, "MODULES", (*optimizers.MODULES, SimpleNamespace(OPTIMIZERS=(entry,))))
    with pytest.raises(ValueError, match="optim.lr of _LrAgain is also defined by the shared optim keys"):
        optimizers.option_sections()
    assert optimizers.names()[-1] == "twice"


class _Reads:
    """An optim section that records which keys are read."""

    def __init__(self, section: Any) -> None:
        self._section, self.read = section, set()

    def __getattr__(self, key: str) -> Any:
        self.read.add(key)
        return getattr(self._section, key)


@pytest.mark.parametrize("name", NAMES)
def test_each_entry_declares_the_keys_its_builder_reads(name):
    section = _Reads(load_recipe("digits", [f"optim.name={name}"]).optim)
    optimizers.get(name).spec(section)
    route_keys = {"adamw_params"} if optimizers.get(name).route else set()
    assert section.read - {"name"} | route_keys == set(optimizers.get(name).keys)


def test_what_each_entry_refuses():
    entries = optimizers.optimizers()
    free = {"schedulefree_adamw", "schedulefree_sgd"}
    assert {n for n, e in entries.items() if e.schedule_free} == free
    assert {n for n, e in entries.items() if e.no_fsdp} == {"muon", "lamb"}
    assert {n for n, e in entries.items() if e.no_sam} == free | {"muon"}
    assert {n for n, e in entries.items() if e.no_swa} == free
    assert {n for n, e in entries.items() if e.no_lookahead} == free
    assert {n for n, e in entries.items() if e.route} == {"muon"}


@pytest.mark.parametrize("overrides, words", [
    (["optim.name=muon", "tricks.sam.enabled=true"],
     "tricks.sam with optim.name=muon is not supported: SAM's second pass has not been checked against Muon's "
     "orthogonalised updates; use optim.name=adamw or sgd with SAM"),
    (["optim.name=schedulefree_sgd", "schedule.name=none", "tricks.sam.enabled=true"],
     "tricks.sam with optim.name=schedulefree_sgd is not supported: SAM steps the optimizer's own weights, a "
     "schedule-free optimizer steps an interpolation of its iterates; use optim.name=adamw or sgd with SAM"),
    (["optim.name=schedulefree_adamw", "schedule.name=none", "tricks.swa.enabled=true"],
     "tricks.swa with optim.name=schedulefree_adamw: a schedule-free optimizer already evaluates an average of its "
     "iterates, and SWA's own LR schedule would fight it; turn one of them off"),
])
def test_the_sam_and_swa_refusals_keep_their_words(overrides, words):
    from trickbag.errors import ConflictError
    from trickbag.tricks import build_tricks

    with pytest.raises(ConflictError) as err:
        build_tricks(load_recipe("digits", overrides))
    assert str(err.value) == words


def test_the_fsdp_refusal_keeps_its_words():
    from trickbag.train.build import build

    with pytest.raises(RecipeError) as err:
        build(load_recipe("digits", ["optim.name=muon", "dist.strategy=fsdp", "data.name=imagefolder",
                                     "data.root=/nonexistent"]))
    assert str(err.value) == (
        "optim.name=muon is refused with dist.strategy=fsdp: Muon orthogonalises each whole weight matrix, and FSDP2 "
        "holds row slices of it (each update would gather every matrix); use adamw, sgd, lion or schedulefree_adamw, "
        "or dist.strategy=ddp")


def _name_comparisons(path: Path, names: tuple[str, ...], root: Path) -> list[str]:
    """``x == "adamw"``, ``x in ("lion", "lamb")``, ``x.startswith("schedulefree_")`` and ``case "muon":`` in one
    file: a comparison with a string that is an optimizer name (or the start of one)."""
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"))

    def strings(node: ast.AST) -> list[str]:
        return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]

    for node in ast.walk(tree):
        hits: list[str] = []
        if isinstance(node, ast.Compare):
            hits = [s for s in strings(node) if s in names]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                "startswith", "endswith"):
            hits = [s for a in node.args for s in strings(a) if any(n.startswith(s) or n.endswith(s) for n in names)]
        elif isinstance(node, ast.match_case):
            hits = [s for s in strings(node.pattern) if s in names]
        found += [f"{path.relative_to(root)}:{getattr(node, 'lineno', '?')}: {s!r}" for s in hits]
    return found


def test_no_comparison_on_optimizer_names_outside_the_registry(tmp_path):
    registry = SRC / "optim" / "optimizers"
    found = [hit for path in sorted(SRC.rglob("*.py")) if registry not in path.parents
             for hit in _name_comparisons(path, NAMES, SRC)]
    assert found == []
    # the check sees the comparisons the registry replaced, and not a string that only holds a name
    old = tmp_path / "old.py"
    old.write_text('if o.name.startswith("schedulefree_"):\n    pass\nif o.name in ("lion", "lamb"):\n    pass\n'
                   'if o.name == "muon":\n    pass\nsplit = {"muon": [], "adamw": []}\n')
    assert len(_name_comparisons(old, NAMES, tmp_path)) == 4


FAKE_MODULE = '''
"""``fakeopt``: plain SGD with a momentum of its own, refused by FSDP, SAM, SWA and Lookahead (a test's optimizer)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from trickbag.config import Section
from trickbag.optim.optimizers.base import Optimizer


class FakeOptions(Section):
    """The keys only fakeopt takes."""

    fakeopt_momentum: float = Field(0.0, ge=0.0, lt=1.0)  # fakeopt: momentum of its SGD


def _spec(o: Any) -> tuple[type, dict[str, Any]]:
    import torch

    return torch.optim.SGD, dict(lr=o.lr, momentum=o.fakeopt_momentum, weight_decay=o.weight_decay)


OPTIMIZERS = (Optimizer(name="fakeopt", spec=_spec, keys=("lr", "fakeopt_momentum", "weight_decay"),
                        options=FakeOptions, no_fsdp="fake shards break it", no_sam="fake sam breaks it",
                        no_swa="fake swa breaks it", no_lookahead="fake look breaks it"),)
'''

FAKE_RUN = '''
import contextlib, io, json, sys

sys.path.insert(0, sys.argv[1])
import fakeopt  # step 1: the module (here outside src/, for the test)
import trickbag.optim.optimizers as registry

registry.MODULES = (*registry.MODULES, fakeopt)  # step 2: its name in MODULES

from trickbag.cli import main
from trickbag.errors import TrickbagError
from trickbag.recipe import load_recipe
from trickbag.train.build import build
from trickbag.tricks import build_tricks

out = {}
for flag in (["--keys"], ["--keys", "--markdown"]):
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        main(["recipes", *flag])
    out[" ".join(flag)] = [line for line in text.getvalue().splitlines() if "optim." in line]
FAKE = ["optim.name=fakeopt", "optim.lr=0.05", "optim.fakeopt_momentum=0.5", "data.name=fake", "data.num_samples=32",
        "data.shape=[1,8,8]", "data.batch_size=8", "model.name=mlp", "train.epochs=1", "train.threads=1"]
for what, extra in {"fsdp": ["dist.strategy=fsdp"], "sam": ["tricks.sam.enabled=true"],
                    "swa": ["tricks.swa.enabled=true"], "lookahead": ["optim.lookahead_k=3"]}.items():
    try:
        recipe = load_recipe("digits", [*FAKE, *extra])
        build_tricks(recipe)
        build(recipe)
        out[what] = None
    except TrickbagError as exc:
        out[what] = str(exc)
trainer, _ = build(load_recipe("digits", FAKE))
opt = trainer.optimizer
out["optimizer"] = [type(opt).__name__, opt.defaults["lr"], opt.defaults["momentum"], opt.defaults["weight_decay"]]
print(json.dumps(out))
'''


def test_a_new_optimizer_module_reaches_every_place_that_names_optimizers(tmp_path):
    """What CONTRIBUTING's "How to add an optimizer" says, step for step: a module ending with ``OPTIMIZERS``, its
    name in ``MODULES`` (in a fresh process: the recipe reads the names when it is first imported); no other edit."""
    with pytest.raises(RecipeError, match="optim.name"):  # without the module, the name is refused
        load_recipe("digits", ["optim.name=fakeopt"])
    (tmp_path / "fakeopt.py").write_text(textwrap.dedent(FAKE_MODULE))
    done = subprocess.run([sys.executable, "-c", FAKE_RUN, str(tmp_path)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.splitlines()[-1])
    names = ", ".join([*NAMES, "fakeopt"])
    assert names in out["--keys"][0] and "optim.name" in out["--keys"][0]
    assert "optim.fakeopt_momentum" in out["--keys"][-1] and "fakeopt: momentum of its SGD" in out["--keys"][-1]
    markdown = out["--keys --markdown"]
    assert markdown[0] == (
        f"| `optim.name` | choice | `sgd` | {names} | the optimizer (muon: Muon on hidden matrices, AdamW on the rest; "
        "schedulefree_*: with schedule.name=none) |")
    assert markdown[-1] == "| `optim.fakeopt_momentum` | float | `0.0` | >= 0.0, < 1.0 | fakeopt: momentum of its SGD |"
    # the shared keys as before, the new key after them
    assert [line.split("`")[1] for line in markdown[:-1]] == [f"optim.{k}" for k in OptimConfig.model_fields]
    assert out["fsdp"] == ("optim.name=fakeopt is refused with dist.strategy=fsdp: fake shards break it; use adamw, "
                           "sgd, lion or schedulefree_adamw, or dist.strategy=ddp")
    assert out["sam"] == ("tricks.sam with optim.name=fakeopt is not supported: fake sam breaks it; use "
                          "optim.name=adamw or sgd with SAM")
    assert out["swa"] == "tricks.swa with optim.name=fakeopt: fake swa breaks it; turn one of them off"
    assert out["lookahead"] == "optim.lookahead_k with optim.name=fakeopt: fake look breaks it; set optim.lookahead_k=0"
    assert out["optimizer"] == ["SGD", 0.05, 0.5, 5e-4]
