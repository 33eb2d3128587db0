"""Tuning on round 12's misses (real mistakes 98, 100, 101, 104) and on its OpenNRE TB403 false alarms
(benchmarks/lint_corpus/heldout_round12.md): the true shape reported, the false-alarm shape silent."""

from __future__ import annotations

from tests.audit.helpers import found

TEST_HELPER = """
    import torch

    class Algo:
        def __init__(self, phi, opt, val_dataset):
            self.phi, self.opt, self.val_dataset = phi, opt, val_dataset

        def get_test_accuracy(self):
            acc = 0
            for x, y in self.val_dataset["data_loader"]:
                with torch.no_grad():
                    {switch}
                    acc += (self.phi(x).argmax(1) == y).sum().item()
            return acc

        def train(self, loader):
            self.phi.train()
            for x, y in loader:
                self.opt.zero_grad()
                torch.nn.functional.cross_entropy(self.phi(x), y).backward()
                self.opt.step()
            self.get_test_accuracy()
"""


def test_tb201_a_module_switched_with_train_is_a_model_whatever_its_name():
    """Real mistake 101: ``self.phi.train()`` makes ``phi`` a module, so its forward over the validation data under
    no_grad, with no eval() anywhere, is an evaluation in train mode."""
    assert found(TEST_HELPER.format(switch="pass"), "TB201") == [13]
    assert found(TEST_HELPER.format(switch="self.phi.eval()"), "TB201") == []


DATALOADERS = """
    import torch

    def dnn_test_model(dataloaders, model):
        preds = []
        with torch.no_grad():
            {switch}
            for stimuli, targets in dataloaders:
                preds.extend(model(stimuli).argmax(1).tolist())
        return preds

    def dnn_train_model(dataloaders, model, criterion, optimizer, test_loader):
        model.train()
        for inputs, targets in dataloaders:
            optimizer.zero_grad()
            criterion(model(inputs), targets).backward()
            optimizer.step()
        dnn_test_model(test_loader, model)
"""


def test_tb201_a_loop_over_dataloaders_is_a_data_loop():
    """Real mistake 100: ``for stimuli, targets in dataloaders`` under no_grad is a pass over a data set."""
    assert found(DATALOADERS.format(switch="pass"), "TB201") == [9]
    assert found(DATALOADERS.format(switch="model.eval()"), "TB201") == []


LR_FINDER = """
    import torch

    class Trainer:
        def __init__(self, model, loader, criterion, optimizer, gradient_acc=1):
            self.model, self.loader, self.criterion, self.optimizer = model, loader, criterion, optimizer
            self.gradient_acc, self._grad_count = gradient_acc, 0

        def _backprop_step(self, loss):
            (loss / self.gradient_acc).backward()
            self._grad_count += 1
            if self._grad_count == self.gradient_acc:
                self.optimizer.step()
                self.optimizer.zero_grad()
                self._grad_count = 0
                return True
            return False

        def find_lr(self, scheduler):
            for x, y in self.loader:
                loss = self.criterion(self.model(x), y)
                {step}
"""


def test_tb102_scheduler_beside_a_helper_that_backpropagates_and_steps_under_its_count():
    """Real mistake 104: the helper back-propagates every micro-batch and steps when its ``gradient_acc`` count is
    full; a scheduler stepped beside it on every call runs per micro-batch, one run only when it reports a step
    does not."""
    assert found(LR_FINDER.format(step="self._backprop_step(loss)\n                scheduler.step()"), "TB102") == [23]
    guarded = "if self._backprop_step(loss):\n                    scheduler.step()"
    assert found(LR_FINDER.format(step=guarded), "TB102") == []


ENCODER_DECODER = """
    def validate(val_loader, encoder, decoder, criterion):
        decoder.eval()
        if encoder is not None:
            encoder.eval()
        losses = []
        for imgs, caps in val_loader:
            if encoder is not None:
                imgs = encoder(imgs)
            scores = decoder(imgs, caps)
            losses.append(criterion(scores, caps).item())
        return losses
"""


def test_tb203_reported_on_the_forward_that_always_runs():
    """Real mistake 98: the encoder runs only when there is one; the decoder forward runs on every batch."""
    assert found(ENCODER_DECODER, "TB203") == [10]
    assert found("import torch\n@torch.no_grad()\n" + ENCODER_DECODER.strip("\n").replace("    ", "", 1), "TB203") == []


SCRIPT = """
    import argparse
    import torch
    from framework import SentenceRE

    parser = argparse.ArgumentParser()
    parser.add_argument("--ckpt", default="")
    args = parser.parse_args()
    ckpt = "ckpt/{{}}.pth.tar".format(args.ckpt)
    framework = SentenceRE(train_path="train.txt", ckpt=ckpt)
    {train}
    framework.load_state_dict(torch.load(ckpt)["state_dict"])
"""


def test_tb403_the_path_a_trained_object_was_given_is_its_checkpoint():
    """OpenNRE: the framework is built with ``ckpt=ckpt``, trained by ``framework.train_model()``, and the script
    reloads ``ckpt`` for the test: the checkpoint that training saved (``--all``, with the reason)."""
    assert found(SCRIPT.format(train="framework.train_model()"), "TB403", torch="old") == []
    assert found(SCRIPT.format(train="pass"), "TB403", torch="old") == [12]
