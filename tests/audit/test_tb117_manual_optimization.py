"""TB117 manual-optimization-scheduler: a LightningModule that optimizes manually and builds a scheduler nothing steps
(real mistake 180). Each exception a planted right shape that stays silent beside the wrong shape still reported."""

from __future__ import annotations

import pytest

from tests.audit.helpers import found

MODULE = """
    import torch
    import lightning as L

    class GAN(L.LightningModule):
        def __init__(self):
            super().__init__()
            {manual}

        def configure_optimizers(self):
            opt = torch.optim.Adam(self.parameters(), lr=2e-4)
            return [opt], [{scheduler}]

        def training_step(self, batch, batch_idx):
            opt = self.optimizers()
            opt.zero_grad()
            self.manual_backward(self.loss(batch))
            opt.step()
            {step}
"""


def module(manual="self.automatic_optimization = False",
           scheduler="torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.999)", step="pass"):
    return MODULE.format(manual=manual, scheduler=scheduler, step=step)


def test_a_scheduler_nothing_steps_is_reported_at_its_construction():
    assert found(module(), "TB117") == [12]


@pytest.mark.parametrize("scheduler", [
    "torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=100)",
    "get_cosine_schedule_with_warmup(opt, 10, 100)",
])
def test_other_schedulers(scheduler):
    assert found(module(scheduler=scheduler), "TB117") == [12]


@pytest.mark.parametrize("change", [
    {"step": "self.lr_schedulers().step()"},
    {"step": "sch = self.lr_schedulers()\n            sch.step()"},
    {"manual": "pass"},  # automatic optimization: Lightning steps it
    {"manual": "self.automatic_optimization = True"},
])
def test_what_is_not_reported(change):
    assert found(module(**change), "TB117", show_all=True) == []


def test_a_property_turning_it_off_and_a_scheduler_kept_on_self():
    src = """
        import torch
        import pytorch_lightning as pl

        class Vits(pl.LightningModule):
            @property
            def automatic_optimization(self):
                return False

            def __init__(self):
                super().__init__()
                self.optim_g = torch.optim.AdamW(self.parameters(), 2e-4)
                self.scheduler_g = torch.optim.lr_scheduler.ExponentialLR(self.optim_g, gamma=0.999)

            def training_step(self, batch, batch_idx):
                self.optim_g.zero_grad()
                self.manual_backward(self.loss(batch))
                self.optim_g.step()
                {step}
    """
    assert found(src.format(step="pass"), "TB117") == [13]
    assert found(src.format(step="self.scheduler_g.step()"), "TB117", show_all=True) == []
