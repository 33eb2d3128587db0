"""tricks.augment: torchvision's policy sits in the training images' pipeline after the crop and flip, draws from
the per-sample seeded RNG (so a sample of an epoch is the same everywhere), and is refused where there is no
image pipeline. The reference is torchvision's own policy applied by hand at that place."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision.transforms import v2

from trickbag.data.sampler import SampleIndex
from trickbag.errors import RecipeError
from trickbag.recipe import load_recipe
from trickbag.train.build import build

QUIET = ["run.progress=false", "run.plots=false", "log.tensorboard=false", "train.epochs=1"]


def image_folder(root: Path) -> Path:
    rng = np.random.default_rng(0)
    for cls in ("a", "b"):
        (root / cls).mkdir(parents=True)
        for i in range(6):
            Image.fromarray(rng.integers(0, 256, (14, 12, 3), dtype=np.uint8)).save(root / cls / f"{i}.png")
    return root


def _recipe(root: Path, *extra: str):
    return load_recipe("digits", ["data.name=imagefolder", f"data.root={root}", "data.image_size=8",
                                  "data.val_fraction=0.25", "data.augment=true", *QUIET, *extra])


POLICIES = {
    "randaugment": (["tricks.augment.num_ops=3", "tricks.augment.magnitude=12"],
                    lambda: v2.RandAugment(num_ops=3, magnitude=12, num_magnitude_bins=31)),
    "trivialaugment": ([], lambda: v2.TrivialAugmentWide(num_magnitude_bins=31)),
    "augmix": (["tricks.augment.severity=5"], lambda: v2.AugMix(severity=5, mixture_width=3, chain_depth=-1,
                                                                alpha=1.0)),
    "autoaugment": (["tricks.augment.autoaugment_policy=cifar10"],
                    lambda: v2.AutoAugment(v2.AutoAugmentPolicy.CIFAR10)),
}


@pytest.mark.parametrize("policy", list(POLICIES))
def test_the_policy_is_torchvisions_after_the_crop_and_flip_with_the_per_sample_seed(tmp_path, policy):
    keys, reference_policy = POLICIES[policy]
    root = image_folder(tmp_path / "img")
    _, ctx = build(_recipe(root, "tricks.augment.enabled=true", f"tricks.augment.policy={policy}", *keys))
    split = ctx.data.train
    folder = split.dataset
    steps = list(folder.transform.transforms)
    at = next(i for i, t in enumerate(steps) if isinstance(t, v2.ToDtype))
    assert type(steps[at - 1]) is type(reference_policy())  # right before the conversion to float
    reference = v2.Compose([*steps[:at - 1], reference_policy(), *steps[at:]])  # torchvision's own policy there
    plain = v2.Compose([*steps[:at - 1], *steps[at:]])
    changed = 0
    for i in range(len(split)):
        index = SampleIndex(i, epoch=1, seed=7)
        x, _ = split[index]
        image = folder.loader(folder.samples[split.indices[i]][0])
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(index.seed_for_sample())
            expected = reference(image)
        torch.testing.assert_close(x, expected, rtol=0, atol=0)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(index.seed_for_sample())
            changed += not torch.equal(x, plain(image))
    assert changed > 0  # the policy did something


def test_refused_in_one_line_without_an_image_pipeline_and_for_a_magnitude_out_of_range(tmp_path):
    with pytest.raises(RecipeError, match="tricks.augment works on image-folder data") as err:
        build(load_recipe("digits", [*QUIET, "tricks.augment.enabled=true"]))
    assert "\n" not in str(err.value)
    root = image_folder(tmp_path / "img")
    with pytest.raises(RecipeError, match="magnitude=31 must be below tricks.augment.num_magnitude_bins=31"):
        build(_recipe(root, "tricks.augment.enabled=true", "tricks.augment.magnitude=31"))
