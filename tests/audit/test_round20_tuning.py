"""Tuning on round 19's lesson (benchmarks/lint_corpus/heldout_round19.md): the determinism branch that turns
cudnn.benchmark off again; the true shape still reported."""

from __future__ import annotations

from tests.audit.helpers import found

PVCNN = """
    import torch.backends.cudnn as cudnn

    def prepare(configs):
        if configs.device == "cuda":
            cudnn.benchmark = True
            if configs.get("deterministic", False):
                cudnn.deterministic = True
                {after}
"""


def test_tb405_benchmark_turned_off_in_the_determinism_branch():
    assert found(PVCNN.format(after="cudnn.benchmark = False"), "TB405") == []


def test_tb405_benchmark_left_on_with_determinism_still_reported():
    assert found(PVCNN.format(after="pass"), "TB405") == [6]
