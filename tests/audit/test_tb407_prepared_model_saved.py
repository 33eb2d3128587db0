"""TB407 prepared-model-saved: the state_dict of a model ``accelerator.prepare`` wrapped, saved without unwrapping
(real mistake 192).  The wrong shapes reported at the ``state_dict()`` call, the right ones silent with ``--all``
too."""

from __future__ import annotations

from tests.audit.helpers import fires, found

TUPLE = """
    import torch
    from accelerate import Accelerator

    def train(model, optimizer, loader, steps):
        accelerator = Accelerator()
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        for step, (x, y) in enumerate(loader):
            loss = model(x, y)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
        torch.save({{"model": {saved}, "optimizer": optimizer.state_dict()}}, "ckpt.pt")
"""


def test_tuple_target_saved_wrapped_and_unwrapped():
    fires("TB407", TUPLE.format(saved="model.state_dict()"), [13],
          TUPLE.format(saved="accelerator.unwrap_model(model).state_dict()"))
    assert found(TUPLE.format(saved="accelerator.get_state_dict(model)"), "TB407", show_all=True) == []


def test_only_the_model_optimizer_state_is_the_inner_one():
    assert found(TUPLE.format(saved="1"), "TB407", show_all=True) == []  # optimizer.state_dict() is left alone


HOLDER = """
    import torch

    def train(accelerator, vae, dataloader, optimizers):
        objs = accelerator.prepare(vae, dataloader, *optimizers)
        vae = objs[0]
        dataloader = objs[1]
        for batch in dataloader:
            pass
        {unwrap}
        state = {{"model_state_dict": vae.state_dict(), "step": 1}}
        torch.save(state, "vae.pt")
"""


def test_item_of_the_prepared_result_saved_through_a_name():
    fires("TB407", HOLDER.format(unwrap=""), [11], HOLDER.format(unwrap="vae = accelerator.unwrap_model(vae)"))


def test_the_original_module_is_not_wrapped():
    src = """
        import torch

        def train(accelerator, model, optimizer):
            ddp_model, optimizer = accelerator.prepare(model, optimizer)
            torch.save(model.state_dict(), "plain.pt")
    """
    assert found(src, "TB407", show_all=True) == []  # ``model`` itself stays the plain module


CLASS = """
    import torch

    class Trainer:
        def __init__(self, model, opt, accelerator):
            self.accelerator = accelerator
            self.model, self.opt = self.accelerator.prepare(model, opt)

        def save(self, path):
            {body}
"""


def test_a_prepared_attribute_saved_by_another_method():
    fires("TB407", CLASS.format(body="self.accelerator.save({'model': self.model.state_dict()}, path)"), [10],
          CLASS.format(body="self.accelerator.save({'model': self.accelerator.unwrap_model(self.model)"
                            ".state_dict()}, path)"))


def test_no_accelerator_no_finding():
    src = """
        import torch

        def train(model, trainer):
            model = trainer.prepare(model)
            torch.save(model.state_dict(), "m.pt")
    """
    assert found(src, "TB407", show_all=True) == []
