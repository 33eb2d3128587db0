"""Tuning on round 14's lessons (benchmarks/lint_corpus/heldout_round14.md): TB204's list re-made on every batch;
the true shape reported, the false-alarm shape silent."""

from __future__ import annotations

from tests.audit.helpers import found

PER_BATCH = """
    import torch.nn as nn

    def train(loader, feats, classifiers, optimizers, epochs):
        for _epoch in range(epochs):
            {outer}
            for inp, target in loader:
                output = feats(inp)
                {inner}
                for clf, optimizer in zip(classifiers, optimizers):
                    loss = nn.CrossEntropyLoss()(clf(output), target)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    losses.append(loss)
                print([x.item() for x in losses])
"""


def test_tb204_list_remade_on_every_batch_holds_no_history():
    """A list re-made inside the data loop and filled by an inner loop over classifiers holds this batch's
    losses only (each already back-propagated): silent."""
    assert found(PER_BATCH.format(outer="pass", inner="losses = []"), "TB204") == []


def test_tb204_list_made_once_per_epoch_still_reported():
    """The same list made once per epoch keeps every batch's graphs all epoch long: reported."""
    assert found(PER_BATCH.format(outer="losses = []", inner="pass"), "TB204") == [15]


def test_tb204_sum_reset_per_epoch_over_the_data_still_reported():
    """A sum restarted per epoch and added to in the data loop is the classic leak: the per-batch exemption
    needs an inner loop over no data."""
    src = """
        def fit(model, loss_fn, optimizer, loader, epochs):
            for _epoch in range(epochs):
                total = 0.0
                for x, y in loader:
                    for _ in range(1):
                        pass
                    optimizer.zero_grad()
                    loss = loss_fn(model(x), y)
                    loss.backward()
                    optimizer.step()
                    total += loss
    """
    assert found(src, "TB204") == [12]
