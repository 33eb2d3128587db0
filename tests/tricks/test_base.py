"""What the trick modules share: generator state across a resume, per rank."""

from __future__ import annotations

import pytest
import torch

from trickbag.recipe import load_recipe

from . import helpers as h

BASE, C, Hook, build_run, record_losses, onehot = h.BASE, h.C, h.Hook, h.build_run, h.record_losses, h.onehot


def test_mix_and_cutout_resume_draws_the_same_batches(tmp_path):
    """The tricks' generators travel in checkpoints: 1 epoch + resume equals 2 epochs straight."""
    from trickbag.runs.run import resume_run, run_recipe
    from trickbag.train.checkpoint_files import load_checkpoint

    tricks = ["tricks.mix.enabled=true", "tricks.cutout.enabled=true", "schedule.name=constant", f"run.dir={tmp_path}"]
    run_recipe(load_recipe("digits", [*BASE, *tricks, "train.epochs=2", "run.name=straight"]), quiet=True)
    run_recipe(load_recipe("digits", [*BASE, *tricks, "train.epochs=1", "run.name=resumed"]), quiet=True)
    resume_run(tmp_path / "resumed", ["train.epochs=2"], quiet=True)
    a = load_checkpoint(tmp_path / "straight" / "checkpoints" / "last.pt")
    b = load_checkpoint(tmp_path / "resumed" / "checkpoints" / "last.pt")
    assert set(a["plugins"]) >= {"mix", "cutout"}
    for k, v in a["model"].items():
        torch.testing.assert_close(b["model"][k], v, rtol=0, atol=0)


@pytest.mark.parametrize("trick", ["mix", "cutout"])
def test_a_resumed_rank_above_0_forks_the_trick_generator_rank_0_continues_it(trick):
    """A checkpoint holds rank 0's generator; after loading it, rank 1 must not repeat rank 0's draws."""
    import hashlib

    from trickbag.tricks import build_sections

    recipe = load_recipe("digits", [f"tricks.{trick}.enabled=true"])
    make = lambda: build_sections(recipe.tricks)[0]  # noqa: E731

    saved = torch.Generator().manual_seed(123)
    torch.rand(5, generator=saved)  # somewhere mid-stream
    state = {"generator": saved.get_state()}
    expected_rank0 = torch.rand(4, generator=torch.Generator().set_state(saved.get_state()))
    draws = {}
    for rank in (0, 1, 2):
        p = make()
        p.rank, p.generator = rank, torch.Generator().manual_seed(999)
        p.load_state_dict(state)
        draws[rank] = torch.rand(4, generator=p.generator)
    assert torch.equal(draws[0], expected_rank0)  # rank 0: exactly the saved stream
    # rank 1: seeded from one draw of the saved stream and its rank (written out here independently)
    ref = torch.Generator().set_state(saved.get_state())
    base = int(torch.randint(0, 2**62, (1,), generator=ref).item())
    seed = int.from_bytes(hashlib.sha256(f"{base}/1".encode()).digest()[:8], "little") & (2**63 - 1)
    assert torch.equal(draws[1], torch.rand(4, generator=torch.Generator().manual_seed(seed)))
    assert not torch.equal(draws[1], draws[0]) and not torch.equal(draws[1], draws[2])


# ---------------------------------------------------------------------- run order from declared constraints
def _satisfied(order: list[str]) -> list[str]:
    from trickbag.tricks import TRICKS

    pos = {n: i for i, n in enumerate(order)}
    broken = [f"{t.name} after {a}" for t in TRICKS.values() for a in t.after if pos[a] > pos[t.name]]
    broken += [f"{t.name} last" for t in TRICKS.values() if t.last and pos[t.name] != len(order) - 1]
    return broken


def test_the_run_order_keeps_every_declared_constraint_whatever_the_module_order():
    import random

    from trickbag.tricks import MODULES, TRICKS, run_order

    assert _satisfied(list(TRICKS)) == []
    assert list(TRICKS) == [m.TRICK.name for m in MODULES]  # the registry's order already satisfies them
    rng = random.Random(0)
    for _ in range(200):
        shuffled = [m.TRICK for m in MODULES]
        rng.shuffle(shuffled)
        assert _satisfied([t.name for t in run_order(shuffled)]) == []


def test_the_checker_sees_a_broken_order_and_run_order_refuses_circles_and_unknown_names():
    import dataclasses

    from trickbag.tricks import TRICKS, run_order

    names = list(TRICKS)
    names.remove("cutout")
    assert _satisfied(names + ["cutout"]) == ["mix after cutout", "profile last"]
    backwards = ["cutout", *names[::-1]]  # cutout first: only mix's constraint kept
    assert sorted(_satisfied(backwards)) == sorted([
        "compile after channels_last", "ema after compile", "ema after freeze", "swa after compile", "swa after freeze",
        "sam after grad_norm", "l1 after distillation", "param_groups after freeze", "profile last",
        "mix after random_erasing"])
    a, b = (dataclasses.replace(TRICKS["l1"], name=n) for n in "ab")
    with pytest.raises(ValueError, match="circle among: a, b"):
        run_order([dataclasses.replace(a, after=("b",)), dataclasses.replace(b, after=("a",))])
    with pytest.raises(ValueError, match="unknown tricks: a -> zzz"):
        run_order([dataclasses.replace(a, after=("zzz",))])
