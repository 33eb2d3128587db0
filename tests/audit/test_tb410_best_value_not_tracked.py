"""TB410 best-value-not-tracked: the best value a loop compares against never updated (real mistake 224; PyG's
proteins_mincut_pool example, MONAI's DAE pre-training) or updated on every pass (225).  The wrong shapes reported,
the right ones and thresholds silent with ``--all`` too."""

from __future__ import annotations

from tests.audit.helpers import found

LOOP = """
    import torch

    def fit(model, loader, val_loader, optimizer, epochs):
        min_loss = float("inf")
        for epoch in range(epochs):
            train_one_epoch(model, loader, optimizer)
            val_loss = evaluate(model, val_loader)
            if val_loss < min_loss:
                torch.save(model.state_dict(), "best.pt")
                {inside}
            {after}
"""


def test_updated_on_every_pass():
    assert found(LOOP.format(inside="pass", after="min_loss = val_loss"), "TB410") == [12]


def test_never_updated():
    assert found(LOOP.format(inside="pass", after="pass"), "TB410") == [9]


def test_updated_in_the_winning_branch():
    for inside in ["min_loss = val_loss", "min_loss, best_epoch = val_loss, epoch"]:
        assert found(LOOP.format(inside=inside, after="pass"), "TB410", show_all=True) == [], inside
    assert found(LOOP.format(inside="pass", after="min_loss = min(min_loss, val_loss)"), "TB410",
                 show_all=True) == []


def test_a_threshold_is_no_running_best():
    src = """
        def keep(boxes, scores, min_score):
            out = []
            for box, score in zip(boxes, scores):
                if score > min_score:
                    out.append(box)
            return out
    """
    assert found(src, "TB410", show_all=True) == []


CLASS = """
    class Trainer:
        def __init__(self):
            self.best_val_loss = None

        def train(self, loader, val_loader):
            for epoch in range(self.epochs):
                self.train_epoch(loader)
                val_loss = self.validate(val_loader)
                if self.best_val_loss is None or val_loss < self.best_val_loss:
                    self.save_model(epoch, "best.pt")

        def {helper}(self, epoch, path):
            {body}
"""


def test_an_attribute_never_updated_unless_a_called_method_does():
    assert found(CLASS.format(helper="save_model", body="torch.save(self.model.state_dict(), path)"),
                 "TB410") == [10]
    assert found(CLASS.format(helper="save_model", body="self.best_val_loss = self.last_val\n"
                                                         "            torch.save(self.model.state_dict(), path)"),
                 "TB410", show_all=True) == []
