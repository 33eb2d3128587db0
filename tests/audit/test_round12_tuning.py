"""Tuning on round 12's false alarms (benchmarks/lint_corpus/heldout_round12.md), one kind each."""

from __future__ import annotations

from tests.audit.helpers import found

OPENNRE = """
    from tqdm import tqdm
    from transformers import get_linear_schedule_with_warmup

    class SentenceRE:
        def __init__(self, model, train_loader, optimizer, batch_size, max_epoch, warmup_step):
            self.model, self.train_loader, self.optimizer = model, train_loader, optimizer
            self.max_epoch = max_epoch
            training_steps = len(self.train_loader.dataset) // batch_size * max_epoch
            self.scheduler = get_linear_schedule_with_warmup(self.optimizer, num_warmup_steps=warmup_step,
                                                             num_training_steps=training_steps)

        def train_model(self):
            for epoch in range(self.max_epoch):
                self.model.train()
                t = tqdm(self.train_loader)
                for it, data in enumerate(t):
                    loss = self.model(*data)
                    loss.backward()
                    self.optimizer.step()
                    {step}
                    self.optimizer.zero_grad()
                {epoch_step}
"""


def test_tb115_a_step_in_a_loop_that_runs_backward_is_per_batch():
    """OpenNRE: ``t = tqdm(self.train_loader)`` then ``for it, data in enumerate(t)``: the loop over ``t`` runs a
    backward per iteration, so it is the batch loop, whatever its iterable is named."""
    assert found(OPENNRE.format(step="self.scheduler.step()", epoch_step="pass"), "TB115") == []
    assert found(OPENNRE.format(step="pass", epoch_step="self.scheduler.step()"), "TB115") == [23]
