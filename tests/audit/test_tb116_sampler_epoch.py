"""TB116 sampler-epoch-not-set: a shuffling DistributedSampler whose epoch loop never calls set_epoch (real mistakes
176 and 185; found by 176's shape, 185's sampler is built in another module). Each exception a planted right shape
that stays silent beside the wrong shape still reported."""

from __future__ import annotations

import pytest

from tests.audit.helpers import fires, found

SCRIPT = """
    import torch
    {imports}
    from torch.utils.data import DataLoader

    def main(args, model, optimizer, train_set):
        sampler = {sampler}
        loader = DataLoader(train_set, batch_size=32, sampler=sampler)
        for epoch in range(args.epochs):
            {first}
            for x, y in loader:
                optimizer.zero_grad()
                model(x).sum().backward()
                optimizer.step()
            {last}
"""


def script(sampler="DistributedSampler(train_set)", imports="from torch.utils.data import DistributedSampler",
           first="pass", last="pass"):
    return SCRIPT.format(sampler=sampler, imports=imports, first=first, last=last)


def test_an_epoch_loop_without_set_epoch_is_reported_at_the_loop():
    fires("TB116", script(), [9], script(first="sampler.set_epoch(epoch)"))
    assert found(script(first="loader.sampler.set_epoch(epoch)"), "TB116", show_all=True) == []


@pytest.mark.parametrize("sampler, imports", [
    ("torch.utils.data.distributed.DistributedSampler(train_set, num_replicas=2, rank=0)", ""),
    ("dist_sampler(train_set)", "from torch.utils.data.distributed import DistributedSampler as dist_sampler"),
    ("BatchSampler(DistributedSampler(train_set), 32, True)",
     "from torch.utils.data import DistributedSampler, BatchSampler"),
])
def test_every_spelling_of_the_sampler(sampler, imports):
    assert found(script(sampler=sampler, imports=imports), "TB116") == [9]


@pytest.mark.parametrize("change", [
    {"sampler": "DistributedSampler(train_set, shuffle=False)"},  # nothing to reshuffle
    {"sampler": "DistributedSampler(val_set)"},  # an evaluation's order does not matter
    {"imports": "from torch.utils.data import DistributedSampler\nimport lightning as L"},  # its loop sets it
    {"imports": "from torch.utils.data import DistributedSampler\nfrom accelerate import Accelerator"},
    {"first": "trainer.train_epoch(loader, epoch)"},  # a function of another module is handed the epoch
])
def test_what_is_not_reported(change):
    assert found(script(**change), "TB116", show_all=True) == []


def test_an_epoch_used_for_a_file_name_still_leaves_the_sampler_unset():
    assert found(script(last="torch.save(model.state_dict(), 'model_{}.pt'.format(epoch))"), "TB116") == [9]


def test_a_sampler_named_for_evaluation_is_left_alone():
    src = script(sampler="DistributedSampler(train_set)").replace("sampler = ", "val_sampler = ").replace(
        "sampler=sampler", "sampler=val_sampler")
    assert found(src, "TB116", show_all=True) == []


def test_a_sampler_built_by_a_data_function_is_not_judged():
    src = """
        from torch.utils.data import DataLoader, DistributedSampler

        def make_loader(train_set):
            return DataLoader(train_set, batch_size=32, sampler=DistributedSampler(train_set))

        def train(model, optimizer, loader, epochs):
            for epoch in range(epochs):
                for x, y in loader:
                    optimizer.zero_grad()
                    model(x).sum().backward()
                    optimizer.step()
    """
    assert found(src, "TB116", show_all=True) == []


def test_a_class_building_and_looping_in_one_method_is_reported():
    src = """
        import torch

        class Trainable:
            def _do_train(self, train_data, model, optimizer):
                train_sampler = torch.utils.data.distributed.DistributedSampler(train_data, shuffle=True)
                loader = torch.utils.data.DataLoader(train_data, batch_size=8, sampler=train_sampler)
                for epoch in range(self.num_epochs):
                    self._train_epoch(loader, model, optimizer)

            def _train_epoch(self, loader, model, optimizer):
                for x, y in loader:
                    optimizer.zero_grad()
                    model(x).sum().backward()
                    optimizer.step()
    """
    assert found(src, "TB116") == [8]
