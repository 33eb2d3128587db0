"""Findings that depend on what the whole file says: the unit a schedule's horizon is counted in (TB102), and
comments that state intent (any rule: demoted to --all, never dropped).  Each case is a planted pair."""

from tests.audit.helpers import found

ACCUM_LOOP = """
import torch
from transformers import get_linear_schedule_with_warmup

def train(model, loader, optimizer, epochs, accum):
    total_steps = {horizon}
    scheduler = get_linear_schedule_with_warmup(optimizer, 100, total_steps)
    for _epoch in range(epochs):
        for i, (x, y) in enumerate(loader):
            (loss_fn(model(x), y) / accum).backward()
            scheduler.step()
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
"""


def test_tb102_horizon_in_updates_is_a_mistake_in_batches_uncertain():
    in_updates = ACCUM_LOOP.format(horizon="epochs * len(loader) // accum")
    in_batches = ACCUM_LOOP.format(horizon="epochs * len(loader)")
    assert found(in_updates, "TB102") == [11]
    assert found(in_batches, "TB102") == []
    assert found(in_batches, "TB102", show_all=True) == [11]  # uncertain, never dropped


EVAL_LOOP = """
def fit(model, loader, val_loader, optimizer, epochs):
    for _epoch in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
        {comment}
        model.eval()
        evaluate(model, val_loader)
"""


def test_a_comment_stating_intent_demotes_never_drops():
    plain = EVAL_LOOP.format(comment="# evaluate")
    meant = EVAL_LOOP.format(comment="# stay in eval mode on purpose: BatchNorm statistics are frozen")
    assert found(plain, "TB202") == [9]
    assert found(meant, "TB202") == []
    assert found(meant, "TB202", show_all=True) == [9]


def test_noqa_and_wrong_code_comments_are_not_intent():
    noqa = EVAL_LOOP.format(comment="# noqa: E501  (wrong code on purpose)")
    assert found(noqa, "TB202") == [9]
