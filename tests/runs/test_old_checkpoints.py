"""A run folder written by an earlier trickbag (tests/runs/old_main_run, see its README) resumes with today's code
and ends bit for bit where that version's straight run ended."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

OLD = Path(__file__).parent / "old_main_run"


def test_a_step_checkpoint_of_the_previous_release_resumes_to_its_straight_runs_last_pt(tmp_path):
    from trickbag.runs.run import resume_run
    from trickbag.runs.verify import compare_checkpoints

    run = tmp_path / "r"
    (run / "checkpoints").mkdir(parents=True)
    recipe = yaml.safe_load((OLD / "recipe.yaml").read_text())
    recipe["run"].update(dir=str(tmp_path), name="r")
    (run / "recipe.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    shutil.copy(OLD / "checkpoints" / "step-00000020.pt", run / "checkpoints" / "step-00000020.pt")

    result = resume_run(run)
    assert result.run_dir == run
    # what this release's checkpoint adds (the loader's position, "loader") the old one cannot hold: compared
    # is everything the old run's last.pt holds
    import torch

    new = torch.load(run / "checkpoints" / "last.pt", weights_only=True)
    added = set(new) - set(torch.load(OLD / "final_last.pt", weights_only=True))
    assert added <= {"loader"}, added
    (tmp_path / "same").mkdir()
    torch.save({k: v for k, v in new.items() if k not in added}, tmp_path / "same" / "last.pt")
    tensors, differences = compare_checkpoints(OLD / "final_last.pt", tmp_path / "same" / "last.pt")
    # recipe keys a later release added (at their defaults: the old recipe does not set them) are no difference
    new_keys = [d for d in differences if d.where.startswith("last.pt recipe/")
                and d.detail.startswith("keys only in the resumed run")]
    assert all(_at_defaults(d) for d in new_keys), new_keys
    differences = [d for d in differences if d not in new_keys]
    # the old run was recorded on another machine: a CPU with other vector units rounds float32 kernels
    # differently, which leaves differences of a few ulps in the weights after the resumed updates (4.5e-8 on an
    # AVX2-only CPU). A resume that restores anything wrongly (RNG, position, optimizer or schedule state) moves the
    # weights by orders of magnitude more; those and every non-tensor difference still fail.
    differences = [d for d in differences if not _rounding(d.detail)]
    assert tensors > 20 and differences == [], "\n".join(f"{d.where}: {d.detail}" for d in differences[:10])


def _rounding(detail: str) -> bool:
    """A tensor differing by at most 1e-6, or two numbers (a logged loss) within 1e-7 of each other relatively."""
    import re

    m = re.fullmatch(r"max abs difference ([0-9.e+-]+) \(\d+ of \d+ elements\)", detail)
    if m:
        return float(m.group(1)) <= 1e-6
    m = re.fullmatch(r"(-?[0-9.e+-]+) vs (-?[0-9.e+-]+)", detail)
    if m:
        a, b = float(m.group(1)), float(m.group(2))
        return abs(a - b) <= 1e-7 * max(1.0, abs(a), abs(b))
    return False


def _at_defaults(d) -> bool:
    """Whether the keys a difference names are at their defaults in today's recipe section."""
    import ast

    from trickbag.recipe import load_recipe

    section = d.where.removeprefix("last.pt recipe/")
    names = ast.literal_eval(d.detail.split(": ", 1)[1])
    default = load_recipe("digits").model_dump(mode="json")[section]
    fields = type(getattr(load_recipe("digits"), section)).model_fields
    def field_default(n):  # a whole new section (a new trick) is a model made by a default factory: dump it
        value = fields[n].get_default(call_default_factory=True)
        return value.model_dump(mode="json") if hasattr(value, "model_dump") else value

    return all(default[n] == field_default(n) for n in names)
