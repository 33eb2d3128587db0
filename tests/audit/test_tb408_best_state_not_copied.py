"""TB408 best-state-not-copied: ``best = model.state_dict()`` inside a training loop, used after it (real mistake
204; CoCLR's linear probe has the same shape).  The wrong shapes reported where the dict is kept, the copies and
the uses that happen before training goes on silent with ``--all`` too."""

from __future__ import annotations

from tests.audit.helpers import found

LOOP = """
    import copy
    import torch

    def train_one_epoch(model, loader, optimizer):
        for x, y in loader:
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()

    def fit(model, loader, val_loader, optimizer, epochs):
        best_acc, best_state = 0.0, None
        for epoch in range(epochs):
            train_one_epoch(model, loader, optimizer)
            acc = evaluate(model, val_loader)
            if acc > best_acc:
                best_acc = acc
                best_state = {kept}
        {after}
"""


def test_kept_and_loaded_back_after_training():
    wrong = LOOP.format(kept="model.state_dict()", after="model.load_state_dict(best_state)")
    assert found(wrong, "TB408") == [18]
    for kept in ["copy.deepcopy(model.state_dict())",
                 "{k: v.detach().clone() for k, v in model.state_dict().items()}"]:
        assert found(LOOP.format(kept=kept, after="model.load_state_dict(best_state)"), "TB408",
                     show_all=True) == [], kept


def test_saved_or_returned_after_training_too():
    assert found(LOOP.format(kept="model.state_dict()", after="torch.save(best_state, 'best.pt')"), "TB408") == [18]
    assert found(LOOP.format(kept="model.state_dict()", after="return best_state"), "TB408") == [18]


def test_not_used_after_the_loop_or_an_optimizer_state():
    assert found(LOOP.format(kept="model.state_dict()", after="print(best_acc)"), "TB408", show_all=True) == []
    assert found(LOOP.format(kept="optimizer.state_dict()", after="optimizer.load_state_dict(best_state)"), "TB408",
                 show_all=True) == []


def test_saved_to_disk_inside_the_loop_and_not_used_after():
    src = LOOP.format(kept="model.state_dict()\n                torch.save(best_state, 'best.pt')",
                      after="print(best_acc)")
    assert found(src, "TB408", show_all=True) == []


def test_no_training_in_the_loop():
    src = """
        def pick(models, val_loader):
            best = None
            for model in models:
                if score(model, val_loader) > 0.5:
                    best = model.state_dict()
            return best
    """
    assert found(src, "TB408", show_all=True) == []


CLASS = """
    import torch

    class Trainer:
        def _train_model(self, loader, val_loader):
            for epoch in range(self.epochs):
                for x, y in loader:
                    self.optimizer.zero_grad()
                    self.loss(self.model(x), y).backward()
                    self.optimizer.step()
                if self.validate(val_loader) < self.best_loss:
                    self.best_model_dict = {kept}

        def fit(self, loader, val_loader):
            self._train_model(loader, val_loader)
            self.model.load_state_dict(self.best_model_dict)
"""


def test_an_attribute_loaded_back_by_another_method():
    assert found(CLASS.format(kept="self.model.state_dict()"), "TB408") == [12]
    assert found(CLASS.format(kept="copy.deepcopy(self.model.state_dict())"), "TB408", show_all=True) == []
