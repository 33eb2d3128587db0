"""Findings that depend on what the whole file says: the unit a schedule's horizon is counted in (TB102), and
comments that state intent (any rule: demoted to --all, never dropped).  Each case is a planted pair."""

from pathlib import Path

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


# TB403 on a project that allows torch < 2.6: where the loaded path comes from decides.
OWN_SAVE = """
import argparse
import torch

parser = argparse.ArgumentParser()
parser.add_argument("--dataset_name")
parser.add_argument("--epoch", type=int)
opt = parser.parse_args()
G = build()
if opt.epoch:
    G.load_state_dict(torch.load("saved_models/%s/G_%d.pth" % (opt.dataset_name, opt.epoch)))
for epoch in range(10):
    train_one_epoch(G)
    torch.save(G.state_dict(), "saved_models/%s/G_%d.pth" % (opt.dataset_name, epoch))
"""

USER_GIVEN = """
import argparse
import torch

parser = argparse.ArgumentParser()
parser.add_argument("--checkpoint_file", required=True)
a = parser.parse_args()
G = build()
G.load_state_dict(torch.load(a.checkpoint_file))
"""

RESUME_FROM_OWN_FOLDER = """
import torch

def main(a):
    cp_g = scan_checkpoint(a.checkpoint_path, "g_")
    state = torch.load(cp_g)
    for step in range(100):
        path = "{}/g_{:08d}".format(a.checkpoint_path, step)
        torch.save({"generator": G.state_dict()}, path)
"""

HELPER_PAIR = """
import torch

def load_checkpoint(filepath, device):
    return torch.load(filepath, map_location=device)

def save_checkpoint(filepath, obj):
    torch.save(obj, filepath)
"""

LOAD_HELPER_ONLY = """
import torch

def load_checkpoint(filepath, device):
    return torch.load(filepath, map_location=device)
"""


def test_tb403_the_programs_own_save_path_is_uncertain_a_user_given_path_is_not():
    assert found(USER_GIVEN, "TB403", torch="old") == [9]
    assert found(OWN_SAVE, "TB403", torch="old") == []
    assert found(OWN_SAVE, "TB403", torch="old", show_all=True) == [11]
    assert found(RESUME_FROM_OWN_FOLDER, "TB403", torch="old") == []
    assert found(RESUME_FROM_OWN_FOLDER, "TB403", torch="old", show_all=True) == [6]
    # a path parameter: the callers (elsewhere) decide, nothing here shows it comes from outside: --all, with why
    assert found(LOAD_HELPER_ONLY, "TB403", torch="old") == []
    assert found(LOAD_HELPER_ONLY, "TB403", torch="old", show_all=True) == [5]
    assert found(HELPER_PAIR, "TB403", torch="old", show_all=True) == [5]


def test_tb403_reads_a_conda_pin_in_environment_yml(tmp_path):
    from trickbag.audit import _project
    from trickbag.audit.lint import lint_file

    script = tmp_path / "train.py"
    script.write_text("import sys, torch\nstate = torch.load(sys.argv[1])\n")
    (tmp_path / ".git").mkdir()
    for pin, reported in [("  - pytorch=1.7.1\n", True), ("  - pytorch=2.7.0\n", False), ("  - pytorch\n", False)]:
        (tmp_path / "environment.yml").write_text("name: x\ndependencies:\n  - python=3.8\n" + pin)
        _project._folder_support.cache_clear()
        assert [f.rule for f in lint_file(script)] == (["TB403"] if reported else []), pin


PY2_LOOP = """import torch
def fit(model, loader, val_loader, optimizer, epochs):
    for _epoch in range(epochs):
        for x, y in loader:
            x, y = x.cuda(async=True), y.cuda(async=True)
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
        model.eval()
        evaluate(model, val_loader)
"""


def test_python2_async_keyword_is_one_tb001_and_the_files_are_still_linted(tmp_path):
    from trickbag.audit.lint import lint_paths

    (tmp_path / "old.py").write_text(PY2_LOOP)
    (tmp_path / "new.py").write_text(PY2_LOOP.replace("async=", "non_blocking="))
    (tmp_path / "broken.py").write_text(PY2_LOOP.replace("for x, y in loader:", "for x, y in loader"))
    found = [(p.name, f.line, f.rule) for f in lint_paths([tmp_path, tmp_path / "old.py"]) for p in [Path(f.path)]]
    assert sorted(found) == [("broken.py", 4, "TB001"), ("new.py", 9, "TB202"), ("old.py", 5, "TB001"),
                             ("old.py", 9, "TB202")]
