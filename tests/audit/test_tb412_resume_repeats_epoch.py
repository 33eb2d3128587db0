"""TB412 resume-repeats-epoch: the checkpoint stores the epoch just finished and the resume restarts at it (real
mistakes 208 and 244).  Reference: a plain simulation of the run in the test counts the epochs trained."""

from __future__ import annotations

from tests.audit.helpers import found

RUN = """
    import torch

    def main(args, model, loader, optimizer):
        start_epoch = 0
        if args.resume:
            ckpt = torch.load(args.resume)
            model.load_state_dict(ckpt["model"])
            start_epoch = ckpt["epoch"]{plus}
        for epoch in range(start_epoch, args.epochs):
            train_one_epoch(model, loader, optimizer)
            torch.save({{"epoch": epoch{save_plus}, "model": model.state_dict()}}, "last.pt")
"""


def _epochs_trained(save_plus: int, load_plus: int, stop_after: int, epochs: int) -> list[int]:
    trained, saved = [], None
    for e in range(0, epochs):  # the first run, interrupted after `stop_after` epochs
        if e == stop_after:
            break
        trained.append(e)
        saved = e + save_plus
    for e in range(saved + load_plus, epochs):  # the resumed run
        trained.append(e)
    return trained


def test_the_simulated_resume_repeats_an_epoch_only_in_the_wrong_shape():
    assert _epochs_trained(0, 0, 3, 6) == [0, 1, 2, 2, 3, 4, 5]
    assert _epochs_trained(1, 0, 3, 6) == _epochs_trained(0, 1, 3, 6) == [0, 1, 2, 3, 4, 5]


def test_reported_at_the_resume():
    assert found(RUN.format(plus="", save_plus=""), "TB412") == [9]


def test_either_offset_is_silent():
    assert found(RUN.format(plus=" + 1", save_plus=""), "TB412", show_all=True) == []
    assert found(RUN.format(plus="", save_plus=" + 1"), "TB412", show_all=True) == []


def test_through_a_helper_that_saves_the_epoch_it_receives():
    src = """
        import torch

        class Trainer:
            def __init__(self, path):
                self.start_epoch = 0
                ckpt = torch.load(path)
                self.start_epoch = ckpt["epoch"]

            def train(self, epochs):
                for epoch in range(self.start_epoch, epochs):
                    self.train_loop(epoch)
                    self.checkpoint(epoch)

            def checkpoint(self, epoch):
                torch.save(dict(epoch=epoch, model=self.model.state_dict()), "model.pth")
    """
    assert found(src, "TB412") == [8]
    assert found(src.replace("self.checkpoint(epoch)", "self.checkpoint(epoch + 1)"), "TB412", show_all=True) == []
