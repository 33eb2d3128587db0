"""Tuning on round 15's lessons (benchmarks/lint_corpus/heldout_round15.md, "Next"): TB403 on a resume of the
program's own training state, TB115 on a scheduler built in two branches, TB202 on a model rebuilt by an outer
loop; the true shapes still reported."""

from __future__ import annotations

import textwrap

from tests.audit.helpers import found
from trickbag.audit.lint import lint_file

TRAINER_STATE = """
    import torch

    class CQL:
        def __init__(self, actor, actor_optimizer):
            self.actor, self.actor_optimizer = actor, actor_optimizer

        def state_dict(self):
            return {{"actor": self.actor.state_dict(), "actor_optim": self.actor_optimizer.state_dict()}}

        def load_state_dict(self, state):
            self.actor.load_state_dict(state["actor"])
            {restore}

        def train(self, batch):
            loss = self.actor(batch).mean()
            self.actor_optimizer.zero_grad()
            loss.backward()
            self.actor_optimizer.step()

    def main(config, actor, opt, batches):
        trainer = CQL(actor, opt)
        if config.load_model != "":
            trainer.load_state_dict(torch.load(config.load_model))
        for t, batch in enumerate(batches):
            trainer.train(batch)
            torch.save(trainer.state_dict(), f"checkpoint_{{t}}.pt")
"""


def test_tb403_resume_of_a_trainer_class_with_its_optimizers_is_the_programs_own():
    """The trainer object's state holds its optimizers: only this program's runs write such a file: --all."""
    src = TRAINER_STATE.format(restore='self.actor_optimizer.load_state_dict(state["actor_optim"])')
    assert found(src, "TB403", torch="old") == []
    assert found(src, "TB403", torch="old", show_all=True) == [24]


def test_tb403_a_class_that_restores_weights_only_is_still_reported():
    """Without optimizer state the file may be released weights: default."""
    assert found(TRAINER_STATE.format(restore="pass"), "TB403", torch="old") == [24]


RESUME = """
    import argparse
    import torch

    def main():
        parser = argparse.ArgumentParser()
        parser.add_argument("--resume", default="")
        parser.add_argument("--eval", action="store_true")
        args = parser.parse_args()
        model, opt, loader = build()
        if args.resume:
            {load}
        for x, y in loader:
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
"""


def test_tb403_resume_in_a_training_script_is_the_programs_own_checkpoint():
    src = RESUME.format(load="model.load_state_dict(torch.load(args.resume))")
    assert found(src, "TB403", torch="old") == []
    assert found(src, "TB403", torch="old", show_all=True) == [12]


def test_tb403_resume_that_may_be_a_url_or_evaluated_alone_is_still_reported():
    """The same option also taken as a URL, or an evaluation-only flag deciding what is restored: a released
    checkpoint may be passed there (DINO's model zoo as --resume): default."""
    url = ("ckpt = torch.load(args.resume) if not args.resume.startswith('https') else None\n"
           "            model.load_state_dict(ckpt)")
    assert found(RESUME.format(load=url), "TB403", torch="old") == [12]
    with_eval = ("ckpt = torch.load(args.resume)\n"
                 "            model.load_state_dict(ckpt['model'])\n"
                 "            if not args.eval:\n"
                 "                opt.load_state_dict(ckpt['opt'])")
    assert found(RESUME.format(load=with_eval), "TB403", torch="old") == [12]


TWO_BRANCHES = """
    import torch

    def train(args, model, opt, loader):
        if args.lradj == "COS":
            scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max={tmax})
        else:
            scheduler = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-3, steps_per_epoch=len(loader),
                                                            epochs=args.epochs)
        for epoch in range(args.epochs):
            for x, y in loader:
                opt.zero_grad()
                model(x).sum().backward()
                opt.step()
                if args.lradj == "TST":
                    scheduler.step()
            if args.lradj == "COS":
                scheduler.step()
"""


def test_tb115_scheduler_built_in_two_branches_with_a_unitless_length_is_not_judged():
    """Time-LLM: the per-epoch step belongs to the branch's CosineAnnealingLR(T_max=20) (a bare number)."""
    assert found(TWO_BRANCHES.format(tmax="20"), "TB115") == []


def test_tb115_one_onecycle_stepped_per_epoch_is_still_reported():
    src = """
        import torch

        def train(args, model, opt, loader):
            scheduler = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-3, steps_per_epoch=len(loader),
                                                            epochs=args.epochs)
            for epoch in range(args.epochs):
                for x, y in loader:
                    opt.zero_grad()
                    model(x).sum().backward()
                    opt.step()
                scheduler.step()
    """
    assert found(src, "TB115") == [12]


REBUILT = """
    import torch
    from utils import test

    def run(args, model, loader, test_loader):
        for ii in range(args.itr):
            {build}
            opt = torch.optim.Adam(model.parameters())
            for epoch in range(args.epochs):
                for x, y in loader:
                    opt.zero_grad()
                    model(x).sum().backward()
                    opt.step()
            test(model, test_loader)
"""

UTILS = """
    import torch

    def test(model, loader):
        model.eval()
        with torch.no_grad():
            for x, y in loader:
                model(x)
"""


def _lint_pair(tmp_path, build):
    (tmp_path / "utils.py").write_text(textwrap.dedent(UTILS))
    main = tmp_path / "main.py"
    main.write_text(textwrap.dedent(REBUILT.format(build=build)))
    findings = lint_file(main)
    assert not [f for f in findings if f.rule == "TB001"]
    return [f.line for f in findings if f.rule == "TB202"]


def test_tb202_model_rebuilt_by_the_outer_loop_is_in_training_mode(tmp_path):
    """One-Fits-All: test() leaves run ii's model in eval mode, run ii+1 trains a new one (a class or a factory):
    silent."""
    assert _lint_pair(tmp_path, "pass") == [14]  # the same model trained again after test(): reported
    assert _lint_pair(tmp_path, "model = GPT4TS(args)") == []
    assert _lint_pair(tmp_path, "model = build_model(args)") == []


def test_tb202_the_same_model_wrapped_again_is_still_reported(tmp_path):
    """``model = prepare(model)`` / ``model.to(dev)`` re-bind the same module, still in eval mode from test():
    reported on the switch."""
    assert _lint_pair(tmp_path, "model = prepare(model)") == [14]
    assert _lint_pair(tmp_path, "model = model.to(args.device)") == [14]
