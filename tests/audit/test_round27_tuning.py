"""Tuned on round 27's false findings (benchmarks/lint_corpus/heldout_round27.md), after its measurement.  Each test
of a false finding fails on the rules measured there (647d50c); the TB403 test of what stays high guards the true
findings of earlier rounds (released models, a pretrained option, a project that saves nothing)."""

from __future__ import annotations

import textwrap

from tests.audit.helpers import found
from trickbag.audit import _project
from trickbag.audit.lint import lint_file, lint_source

PLAY = """
    import argparse
    import torch

    parser = argparse.ArgumentParser()
    parser.add_argument("-m", "--model", required=True, help="{help}")
    args = parser.parse_args()
    net = Net()
    net.load_state_dict(torch.load(args.model, map_location="cpu"))
"""
TRAIN = "import torch\n\ndef train(net):\n    torch.save(net.state_dict(), 'saves/best.dat')\n"


def _tb403(tmp_path, help_text="Model file to load", readme=None, train=TRAIN):
    for f in (_project._project_saves, _project._project_releases, _project._option_texts):
        f.cache_clear()
    (tmp_path / "requirements.txt").write_text("torch==1.4.0\n")
    (tmp_path / "play.py").write_text(textwrap.dedent(PLAY.format(help=help_text)))
    if train:
        (tmp_path / "train.py").write_text(train)
    if readme:
        (tmp_path / "README.md").write_text(readme)
    return [f.confidence for f in lint_file(tmp_path / "play.py", show_all=True) if f.rule == "TB403"]


def test_tb403_a_play_script_of_the_projects_own_checkpoints_is_low(tmp_path):
    # Deep-Reinforcement-Learning-Hands-On: `-m` is the .dat the chapter's training script saves; no model released
    assert _tb403(tmp_path) == ["low"]


def test_tb403_stays_high_when_the_project_releases_models_or_the_option_says_so(tmp_path):
    (tmp_path / "a").mkdir()
    readme = "Download the pretrained models from https://example.org/models/net.pth"
    assert _tb403(tmp_path / "a", readme=readme) == ["high"]
    (tmp_path / "b").mkdir()
    assert _tb403(tmp_path / "b", help_text="path to the pretrained model") == ["high"]
    (tmp_path / "c").mkdir()
    assert _tb403(tmp_path / "c", train=None) == ["high"]  # the project writes no checkpoint of its own


def test_tb411_an_entry_replaced_before_a_lighter_save():
    src = """
        import torch

        def main(args, model, loader):
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, [10, 20])
            if args.resume:
                ckpt = torch.load(args.resume)
                optimizer.load_state_dict(ckpt["optimizer"])
            for epoch in range(args.epochs):
                train_one_epoch(model, loader, optimizer)
                scheduler.step()
                checkpoint = {"epoch": epoch, "model": model.state_dict(), "optimizer": optimizer.state_dict()}
                torch.save(checkpoint, "latest.pt")
                checkpoint["optimizer"] = []
                torch.save(checkpoint, f"weights_{epoch}.pt")
    """
    assert found(src, "TB411") == [14]  # latest.pt (resumed from) only


def test_tb410_an_upper_case_threshold_is_not_a_best_value():
    src = """
        BEST_NET_WIN_RATIO = 0.60

        def train(net, best_net):
            for step in range(1000):
                win_ratio = evaluate(net, best_net)
                if win_ratio > BEST_NET_WIN_RATIO:
                    best_net.sync()
                    save(net, "best.dat")
    """
    assert found(src, "TB410", show_all=True) == []


def test_tb302_requires_grad_on_a_parameter_made_in_this_branch():
    src = """
        import torch.nn as nn

        class Gen(nn.Module):
            def __init__(self, kind, size):
                super().__init__()
                if kind == "alpha":
                    self.skip_k = nn.Parameter(torch.ones(size))
                elif kind == "constant":
                    self.skip_k = nn.Parameter(torch.ones(size))
                    self.skip_k.requires_grad = False
                else:
                    self.skip_k = nn.Conv1d(size, size, 1)
    """
    assert found(src, "TB302", show_all=True) == []


def test_tb001_async_in_a_comment_is_not_the_place_of_the_error():
    src = "import torch\n# old sync, async=False\nx = torch.zeros(1)\ny = x.cuda(async=True)\n"
    assert [(f.rule, f.line) for f in lint_source(src) if f.rule == "TB001"] == [("TB001", 4)]


def test_tb115_multisteplr_milestones_named_lr_step_have_no_unit():
    # DEKR / HRNet configs: MultiStepLR(optimizer, cfg.TRAIN.LR_STEP, ...) in epochs, stepped once per epoch
    src = """
        import torch

        def main(cfg, model, loader, optimizer):
            lr_scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, cfg.TRAIN.LR_STEP, cfg.TRAIN.LR_FACTOR)
            for epoch in range(cfg.TRAIN.END_EPOCH):
                for x, y in loader:
                    loss = model(x, y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                lr_scheduler.step()
    """
    assert found(src, "TB115", show_all=True) == []


def test_project_evidence_is_not_read_for_source_text_without_a_file():
    # lint_source("...") has no project: the folder it runs from must not decide TB403 / TB205
    for f in (_project._project_saves, _project._project_releases, _project._option_texts):
        f.cache_clear()
    assert not _project.project_saves_checkpoints("<string>")
    assert _project.project_releases_models("<string>")
    assert _project.option_texts("<string>", "ckpt") == ()
    assert _project.project_sets_reduction("<string>")
