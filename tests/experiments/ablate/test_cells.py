"""One cell's metric: test/* from the test of best.pt, other keys at the last epoch that has them, and a
clear error naming what the run did produce."""

from __future__ import annotations

import pytest

from trickbag.errors import TrickbagError
from trickbag.experiments.ablate.cells import metric_value
from trickbag.runs.summary import RunResult


def test_metric_value_reads_the_test_or_the_last_epoch_that_has_the_key():
    history = [{"train/loss": 1.0, "val/acc": 0.5}, {"train/loss": 0.8, "val/acc": 0.7}, {"train/loss": 0.6}]
    result = RunResult(run_dir=None, history=history, best=0.7, test={"test/acc": 0.75, "test/loss": 0.9},
                       wall_time_s=1.0)
    assert metric_value(result, "test/acc") == 0.75
    assert metric_value(result, "train/loss") == 0.6
    assert metric_value(result, "val/acc") == 0.7  # the last epoch without validation is skipped
    with pytest.raises(TrickbagError, match=r"--metric 'test/f1' was not produced by the run; available: "
                                            r"test/acc, test/loss"):
        metric_value(result, "test/f1")
    with pytest.raises(TrickbagError, match="available: train/loss, val/acc"):
        metric_value(result, "val/f1")
