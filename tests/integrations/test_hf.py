"""trickbag's tricks in the Hugging Face Trainer: each trick alone and a combination equal trickbag's own Trainer
(same network, initial weights, data order and seed; fp32 CPU, 1e-5), the loss normalisation of transformers
#34191, the collisions and refusals one by one, bf16, and the state in HF's checkpoints."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("accelerate")
sys.path.insert(0, str(Path(__file__).parent))

from hf_models import HFNet, data, hf_args, hf_dataset, max_diff, run_hf, run_reference  # noqa: E402

from trickbag.errors import ConflictError, RecipeError  # noqa: E402
from trickbag.integrations import hf  # noqa: E402

TOL = 1e-5
#: (tricks, weight decay): a trick that rebuilds the groups runs with decay (its groups are the same in both
#: trainers); the others without, as HF keeps biases out of decay and a plain AdamW does not
ALONE: list[tuple[dict[str, Any], float]] = [
    ({"ema": {"decay": 0.9}}, 0.0),
    ({"label_smoothing": {"eps": 0.1}}, 0.0),
    ({"focal": {}}, 0.0),
    ({"robust_loss": {"kind": "gce"}}, 0.0),
    ({"sam": {"rho": 0.05}}, 0.0),
    ({"l1": {"weight": 1e-3}}, 0.0),
    ({"clip": {"max_norm": 0.05}}, 0.0),
    ({"clip": {"mode": "agc", "clip_factor": 0.01}}, 0.0),
    ({"grad_norm": {}}, 0.0),
    ({"layer_decay": {"decay": 0.5, "depth": 2}}, 0.05),
    ({"param_groups": {}}, 0.05),
    ({"freeze": {"patterns": ["blocks.1.*"]}}, 0.0),
    ({"mix": {"mixup_alpha": 0.4, "cutmix_alpha": 1.0}}, 0.0),
    ({"cutout": {"size": 2}}, 0.0),
    ({"random_erasing": {}}, 0.0),
]


def hf_groups(tricks: dict[str, Any], weight_decay: float) -> dict[str, Any]:
    """The reference's tricks for the adapter's: layer_decay with weight decay keeps HF's no-decay split for biases
    and norms (param_groups.no_decay_bias_norm), which the adapter adds."""
    if "layer_decay" in tricks and weight_decay > 0 and "param_groups" not in tricks:
        return {**tricks, "param_groups": {"no_decay_bias_norm": True}}
    return tricks


@pytest.fixture(scope="module")
def plain() -> torch.nn.Module:
    """trickbag's Trainer without tricks: every trick must move the weights away from it."""
    return run_reference({}, accumulate=2)


@pytest.mark.parametrize(("tricks", "wd"), ALONE, ids=[next(iter(t)) + "-" + str(i) for i, (t, _) in enumerate(ALONE)])
def test_each_trick_alone_equals_trickbag_trainer(tricks: dict[str, Any], wd: float, plain: Any, tmp_path: Path
                                                 ) -> None:
    # 44 samples in batches of 8, accumulation 2: the last update has 12 samples (exact weighting matters)
    ours = run_hf(tricks, str(tmp_path), gradient_accumulation_steps=2, weight_decay=wd)
    ref = run_reference(hf_groups(tricks, wd), accumulate=2, weight_decay=wd)
    assert max_diff(ours, ref) < TOL
    if wd == 0.0 and "grad_norm" not in tricks:  # grad_norm only logs
        assert max_diff(ref, plain) > 1e-4  # the trick did something


def test_drop_path_equals_trickbag_trainer(tmp_path: Path) -> None:
    from hf_models import HFResNet

    tricks = {"drop_path": {"rate": 0.5, "blocks": ["Res"]}}
    torch.manual_seed(0)
    ours = run_hf(tricks, str(tmp_path), model=HFResNet(), gradient_accumulation_steps=2)
    ref = run_reference(tricks, accumulate=2, residual=True)
    assert max_diff(ours, ref) < TOL
    assert max_diff(ref, run_reference({}, accumulate=2, residual=True)) > 1e-4


def test_combination_equals_trickbag_trainer(plain: Any, tmp_path: Path) -> None:
    tricks = {"ema": {"decay": 0.9}, "clip": {"max_norm": 0.1}, "layer_decay": {"decay": 0.5, "depth": 2},
              "sam": {"rho": 0.05},
              "mix": {"mixup_alpha": 0.4, "cutmix_alpha": 1.0}, "label_smoothing": {"eps": 0.1}}
    ours = run_hf(tricks, str(tmp_path), gradient_accumulation_steps=2, weight_decay=0.05, max_grad_norm=1.0)
    ref = run_reference(hf_groups(tricks, 0.05), accumulate=2, weight_decay=0.05)
    assert max_diff(ours, ref) < TOL
    assert max_diff(ref, plain) > 1e-3


def test_clip_takes_over_hf_max_grad_norm(tmp_path: Path, capsys: Any) -> None:
    """HF's default max_grad_norm=1.0 against tricks.clip: trickbag's rule takes over (one line), HF's is off."""
    tricks = {"clip": {"max_norm": 0.05}}
    from trickbag.integrations.hf import TricksCallback, TricksTrainer

    x, y = data()
    trainer = TricksTrainer(model=HFNet(), args=hf_args(str(tmp_path), max_grad_norm=1.0),
                            train_dataset=hf_dataset(x, y), callbacks=[TricksCallback(tricks)])
    torch.manual_seed(0)
    cast(torch.nn.Module, trainer.model).load_state_dict(HFNet().state_dict())
    trainer.train()
    assert trainer.args.max_grad_norm == 0.0
    assert "tricks.clip takes over gradient clipping (max_grad_norm=1.0 -> 0)" in capsys.readouterr().err
    assert max_diff(trainer.model, run_reference(tricks)) < TOL


# ---------------------------------------------------------------- transformers #34191: token-level loss, padding
def _lm_data(n: int = 16, length: int = 12) -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    rows = []
    for i in range(n):
        ids = torch.randint(1, 50, (length,), generator=g)
        keep = 2 + (i * 7 + i * i) % (length - 2)  # very different lengths: padding varies a lot between micro-batches
        labels = ids.clone()
        labels[keep:] = -100
        mask = (labels != -100).long()
        rows.append({"input_ids": ids, "attention_mask": mask, "labels": labels})
    return rows


def _lm_run(tmp: Path, tricks: dict[str, Any], batch: int, accumulate: int) -> torch.nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    from trickbag.integrations.hf import TricksCallback, TricksTrainer

    torch.manual_seed(0)
    cfg = GPT2Config(n_embd=16, n_layer=1, n_head=2, vocab_size=50, n_positions=16, resid_pdrop=0.0,
                     embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(cfg)
    args = hf_args(str(tmp), per_device_train_batch_size=batch, gradient_accumulation_steps=accumulate,
                   num_train_epochs=2, learning_rate=0.5, optim="sgd")
    # SGD: Adam turns the rounding noise of a gradient that is exactly zero in theory (GPT-2's key bias: softmax
    # ignores it) into learning-rate-sized steps, whatever the weighting
    TricksTrainer(model=model, args=args, train_dataset=_lm_data(), callbacks=[TricksCallback(tricks)]).train()
    return model


@pytest.mark.parametrize("tricks", [{"label_smoothing": {"eps": 0.1}}, {"ema": {"decay": 0.5}}],
                         ids=["loss-trick", "model-loss"])
def test_token_loss_with_padding_accumulation_equals_big_batch(tricks: dict[str, Any], tmp_path: Path) -> None:
    """Micro-batches of 2 with 4 accumulated give the update of one batch of 8, though their label counts differ
    (the naive mean of micro-batch means would not)."""
    counts = [int((r["labels"][1:] != -100).sum()) for r in _lm_data()]
    assert len({sum(counts[i:i + 2]) for i in range(0, 8, 2)}) > 1  # the micro-batches' counts really differ
    small = _lm_run(tmp_path / "a", tricks, batch=2, accumulate=4)
    big = _lm_run(tmp_path / "b", tricks, batch=8, accumulate=1)
    assert max_diff(small, big) < TOL


# ---------------------------------------------------------------- refusals, one by one
REFUSED_CONFIG = {"multiscale": {"train_sizes": [8]}, "distillation": {"teacher": "pkg.mod:fn"}}


@pytest.mark.parametrize("name", sorted(hf.REFUSED))
def test_framework_owned_tricks_are_refused(name: str) -> None:
    with pytest.raises(RecipeError, match=f"^tricks.{name} is refused (in|under) the HF Trainer: .+") as e:
        hf.TricksCallback({name: REFUSED_CONFIG.get(name, {})})
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"tricks": {"ema": {"decay_typo": 1}}}, "decay_typo"),
    ({"tricks": {"no_such_trick": {}}}, "no_such_trick"),
    ({"schedule": {"name": "cosinus"}}, "schedule.name"),
    ({"audit": "yes"}, "allowed are True"),
    ({"nonfinite": "explode"}, "allowed are 'skip', 'stop' or None"),
])
def test_bad_arguments_are_one_line(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(RecipeError, match=match) as e:
        hf.TricksCallback(**kwargs)
    assert "\n" not in str(e.value)


def _args(**kw: Any) -> Any:
    base = dict(lr_scheduler_type="constant", warmup_steps=0, deepspeed=None, fp16=False, label_smoothing_factor=0.0,
                world_size=1, average_tokens_across_devices=True)
    return SimpleNamespace(**{**base, **kw})


@pytest.mark.parametrize(("kw", "tricks", "match"), [
    ({"deepspeed": "ds.json"}, {}, "^DeepSpeed owns the optimizer step"),
    ({"label_smoothing_factor": 0.1}, {"label_smoothing": {}}, "^label_smoothing_factor and tricks.label_smoothing"),
    ({"world_size": 2, "average_tokens_across_devices": False}, {}, "^average_tokens_across_devices=False"),
])
def test_colliding_training_arguments_are_refused(kw: dict[str, Any], tricks: dict[str, Any], match: str) -> None:
    with pytest.raises(ConflictError, match=match) as e:
        hf.refuse_args(_args(**kw), hf.TricksCallback(tricks).section)
    assert "\n" not in str(e.value)
    hf.refuse_args(_args(), hf.TricksCallback(tricks).section)  # the same tricks with HF's defaults pass


@pytest.mark.parametrize("kw", [{"lr_scheduler_type": "linear"}, {"warmup_steps": 3}])
def test_schedule_and_hf_lr_scheduler_collide(kw: dict[str, Any]) -> None:
    cb = hf.TricksCallback({}, schedule={"name": "cosine"})
    with pytest.raises(ConflictError, match="^schedule= and lr_scheduler_type=.* both set the learning rate") as e:
        hf.refuse_args(_args(**kw), cb.section, cb.schedule)
    assert "\n" not in str(e.value)
    hf.refuse_args(_args(), cb.section, cb.schedule)


def test_schedule_equals_trickbag_trainer_with_the_same_schedule(plain: Any, tmp_path: Path) -> None:
    """schedule= (cosine with a warm-up epoch) is stepped once per update by HF: the run equals trickbag's Trainer
    stepping the same schedule (3 updates an epoch)."""
    from trickbag.train.parts import build_schedule

    section = {"name": "cosine", "warmup_epochs": 1}
    cb = hf.TricksCallback({"ema": {"decay": 0.9}}, schedule=section)
    x, y = data()
    torch.manual_seed(0)
    model = HFNet()
    hf.TricksTrainer(model=model, args=hf_args(str(tmp_path), gradient_accumulation_steps=2),
                     train_dataset=hf_dataset(x, y), callbacks=[cb]).train()
    recipe = SimpleNamespace(schedule=cb.schedule, optim=SimpleNamespace(name="sgd"), train=SimpleNamespace(epochs=2))
    ref = run_reference({"ema": {"decay": 0.9}}, accumulate=2,
                        scheduler=lambda opt: build_schedule(recipe, opt, 3, [], "min"))  # type: ignore[arg-type]
    assert max_diff(model, ref) < TOL
    assert max_diff(ref, run_reference({"ema": {"decay": 0.9}}, accumulate=2)) > 1e-4  # the schedule mattered


def test_plain_hf_trainer_is_refused_with_the_reason(tmp_path: Path) -> None:
    from transformers import Trainer

    x, y = data()
    t = Trainer(model=HFNet(), args=hf_args(str(tmp_path)), train_dataset=hf_dataset(x, y),
                callbacks=[hf.TricksCallback({"ema": {}})])
    with pytest.raises(RecipeError, match="^TricksCallback needs trickbag.integrations.hf.TricksTrainer: "):
        t.train()


def test_a_trainer_that_ignores_the_handed_over_loss_is_refused(tmp_path: Path) -> None:
    class OwnLoss(hf.TricksTrainer):
        def compute_loss(self, model: Any, inputs: Any, return_outputs: bool = False, num_items_in_batch: Any = None
                         ) -> Any:
            return model(**inputs)["loss"]  # the model's own loss: the mixed targets would be ignored

    x, y = data()
    t = OwnLoss(model=HFNet(), args=hf_args(str(tmp_path)), train_dataset=hf_dataset(x, y),
                callbacks=[hf.TricksCallback({"label_smoothing": {}})])
    with pytest.raises(RecipeError, match="^a loss trick is on but the Trainer never called its compute_loss_func"):
        t.train()


def test_a_loss_trick_and_a_users_compute_loss_func_collide(tmp_path: Path) -> None:
    x, y = data()
    t = hf.TricksTrainer(model=HFNet(), args=hf_args(str(tmp_path)), train_dataset=hf_dataset(x, y),
                         callbacks=[hf.TricksCallback({"label_smoothing": {}})],
                         compute_loss_func=lambda out, labels, num_items_in_batch=None: out["logits"].sum())
    with pytest.raises(ConflictError, match="^a trick changes the loss and the Trainer already has compute_loss_func"):
        t.train()


def test_a_loss_trick_on_a_regression_model_is_refused(tmp_path: Path) -> None:
    from transformers import BertConfig, BertForSequenceClassification

    cfg = BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, vocab_size=100)
    cfg.num_labels, cfg.problem_type = 1, "regression"
    rows = [{"input_ids": torch.arange(1, 9), "labels": torch.tensor(0.5)} for _ in range(4)]
    t = hf.TricksTrainer(model=BertForSequenceClassification(cfg), args=hf_args(str(tmp_path)), train_dataset=rows,
                         callbacks=[hf.TricksCallback({"label_smoothing": {}})])
    with pytest.raises(RecipeError, match="problem_type=regression is not one: turn the loss tricks off"):
        t.train()


def test_trainer_without_callback_is_refused(tmp_path: Path) -> None:
    x, y = data()
    with pytest.raises(RecipeError, match="exactly one TricksCallback"):
        hf.TricksTrainer(model=HFNet(), args=hf_args(str(tmp_path)), train_dataset=hf_dataset(x, y))


# ---------------------------------------------------------------- precision, non-finite guard
def test_bf16_on_cpu_trains_close_to_fp32(tmp_path: Path) -> None:
    tricks = {"ema": {"decay": 0.9}, "label_smoothing": {"eps": 0.1}}
    bf16 = run_hf(tricks, str(tmp_path / "bf16"), bf16=True)
    fp32 = run_hf(tricks, str(tmp_path / "fp32"))
    diff = max_diff(bf16, fp32)
    assert 0 < diff < 0.05  # autocast really ran in bfloat16, and the run is the same run
    assert all(torch.isfinite(p).all() for p in bf16.parameters())


def test_nonfinite_skip_leaves_the_weights_and_schedule(tmp_path: Path) -> None:
    """A NaN batch: its update is vetoed (no weight moves, the schedule is put back), the rest trains."""
    x, y = data(16)
    x[0, 0, 0, 0] = float("nan")  # the first batch's loss is NaN
    from trickbag.integrations.hf import TricksCallback, TricksTrainer

    torch.manual_seed(0)
    model = HFNet()
    cb = TricksCallback({"label_smoothing": {"eps": 0.0}}, nonfinite="skip")
    t = TricksTrainer(model=model, args=hf_args(str(tmp_path), num_train_epochs=1, lr_scheduler_type="linear"),
                      train_dataset=hf_dataset(x, y), callbacks=[cb])
    t.train()
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert cb.run is not None and cb.run.state.skipped_steps == 1 and cb.run.state.step == 1
    assert cast(Any, t.lr_scheduler).last_epoch == 1  # HF stepped its schedule twice; the vetoed step was taken back


# ---------------------------------------------------------------- state in HF's own checkpoints, exact resume
SCRIPT = Path(__file__).parent / "hf_resume_script.py"


def _script(out: Path, *argv: object) -> int:
    import os
    import subprocess

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run([sys.executable, str(SCRIPT), str(out), *map(str, argv)], env=env, capture_output=True,
                          text=True, timeout=300)
    if done.returncode not in (0, -9):
        raise AssertionError(done.stderr[-3000:])
    return done.returncode


def _final(folder: Path) -> dict[str, torch.Tensor]:
    return torch.load(folder / "final.pt")


@pytest.mark.parametrize(("step", "workers"), [(4, 0), (6, 2)], ids=["mid-epoch-workers0", "epoch-end-workers2"])
def test_sigkill_after_a_checkpoint_then_resume_equals_the_straight_run(step: int, workers: int, tmp_path: Path,
                                                                         monkeypatch: Any) -> None:
    """EMA shadow, mix generator, clip, shuffled sampler: killed right after HF wrote checkpoint-<step> (6 updates
    make an epoch), resumed with train(resume_from_checkpoint=True): the final weights are the straight run's;
    resumed without trickbag's state (the negative control) they are not."""
    import shutil

    import hf_resume_script

    hf_resume_script.main(str(tmp_path / "straight"), "straight", step, workers, step)
    assert _script(tmp_path / "run", "kill", step, workers) == -9
    assert (tmp_path / "run" / f"checkpoint-{step}" / "trickbag-rank0.pt").is_file()
    assert not (tmp_path / "run" / "final.pt").exists()
    if workers == 0:
        shutil.copytree(tmp_path / "run", tmp_path / "control")
        monkeypatch.setenv("TRICKBAG_TEST_IGNORE_STATE", "1")
        assert _script(tmp_path / "control", "resume", step, workers, 100) == 0
        monkeypatch.delenv("TRICKBAG_TEST_IGNORE_STATE")
        control = _final(tmp_path / "control")
        assert not all(torch.equal(v, control[k]) for k, v in _final(tmp_path / "straight").items())
    assert _script(tmp_path / "run", "resume", step, workers, 100) == 0
    straight, resumed = _final(tmp_path / "straight"), _final(tmp_path / "run")
    assert all(torch.equal(straight[k], resumed[k]) for k in straight)


def test_resume_from_a_checkpoint_without_trickbag_state_is_refused(tmp_path: Path) -> None:
    assert _script(tmp_path, "kill", 2, 0) == -9
    (tmp_path / "checkpoint-2" / "trickbag-rank0.pt").unlink()
    with pytest.raises(AssertionError, match="checkpoint-2 holds no trickbag state"):
        _script(tmp_path, "resume", 2, 0, 100)


# ---------------------------------------------------------------- several processes
def test_torchrun_two_gloo_processes_equal_one_process_with_the_global_batch(tmp_path: Path) -> None:
    """EMA + label smoothing + clip + layer decay + SAM under torchrun (2 CPU processes, gloo, 8 samples each) equal one
    process with batches of 16 (the loss's count is the global one: average_tokens_across_devices)."""
    import os
    import subprocess

    script = Path(__file__).parent / "hf_ddp_script.py"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "OMP_NUM_THREADS": "1"}
    two = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", str(script),
                          str(tmp_path / "two")], env=env, capture_output=True, text=True, timeout=300)
    assert two.returncode == 0, two.stderr[-3000:]
    import hf_ddp_script

    hf_ddp_script.main(str(tmp_path / "one"), single=True)
    a, b = _final(tmp_path / "two"), _final(tmp_path / "one")
    assert max(float((a[k] - b[k]).abs().max()) for k in a) < TOL


DDP_RESUME = Path(__file__).parent / "hf_ddp_resume_script.py"


def _torchrun(out: Path, *argv: object, ignore_state: bool = False, killed: bool = False) -> None:
    """hf_ddp_resume_script.py under torchrun, 2 gloo CPU processes on a free port; ``killed``: both processes are
    to end by SIGKILL (exit code -9 each), otherwise the run is to succeed."""
    import os
    import socket
    import subprocess

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "OMP_NUM_THREADS": "1"}
    env.pop("TRICKBAG_TEST_IGNORE_STATE", None)
    if ignore_state:
        env["TRICKBAG_TEST_IGNORE_STATE"] = "1"
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
                           str(port), str(DDP_RESUME), str(out), *map(str, argv)], env=env, capture_output=True,
                          text=True, timeout=300)
    if killed:
        assert done.returncode != 0 and done.stderr.count("exitcode  : -9") == 2, done.stderr[-3000:]
    else:
        assert done.returncode == 0, done.stderr[-3000:]


@pytest.fixture(scope="module")
def ddp_straight(tmp_path_factory: Any) -> dict[str, torch.Tensor]:
    out = tmp_path_factory.mktemp("ddp-straight")
    _torchrun(out, "straight", 0)
    return _final(out)


def _ddp_kill_and_resume(out: Path, step: int, ignore_state: bool = False) -> dict[str, torch.Tensor]:
    _torchrun(out, "kill", step, killed=True)  # every process SIGKILLed itself after checkpoint-<step>
    assert {p.name for p in (out / f"checkpoint-{step}").glob("*rank*")} >= {"trickbag-rank0.pt", "trickbag-rank1.pt"}
    assert not (out / "final.pt").exists()
    _torchrun(out, "resume", step, ignore_state=ignore_state)
    return _final(out)


@pytest.mark.skipif(not torch.distributed.is_available() or not torch.distributed.is_gloo_available(),
                    reason="torch built without distributed/gloo support")
@pytest.mark.parametrize("step", [2, 3, 5], ids=["inside-epoch-0", "epoch-end", "inside-epoch-1"])
def test_torchrun_sigkill_after_hfs_checkpoint_then_resume_equals_the_straight_run(
        step: int, tmp_path: Path, ddp_straight: dict[str, torch.Tensor]) -> None:
    """2 gloo processes, each with its own dropout stream and mix generator, HF's shuffling sampler, EMA and clip (3
    updates an epoch): SIGKILLed right after HF's checkpoint-<step>, resumed with train(resume_from_checkpoint=True),
    the final weights are the straight run's (torch.equal). Each process reads back the file it wrote, its own mix
    generator included (taken as it is, not forked from the saved one as a rank > 0 does with rank 0's)."""
    resumed = _ddp_kill_and_resume(tmp_path, step)
    assert all(torch.equal(ddp_straight[k], resumed[k]) for k in ddp_straight)


@pytest.mark.skipif(not torch.distributed.is_available() or not torch.distributed.is_gloo_available(),
                    reason="torch built without distributed/gloo support")
def test_torchrun_resume_without_trickbags_state_differs(tmp_path: Path, ddp_straight: dict[str, torch.Tensor]
                                                         ) -> None:
    """The negative control: the same DDP resume with trickbag's state ignored (fresh EMA shadow and generators) is
    not the straight run."""
    resumed = _ddp_kill_and_resume(tmp_path, 5, ignore_state=True)
    assert not all(torch.equal(ddp_straight[k], resumed[k]) for k in ddp_straight)


# ---------------------------------------------------------------- evaluation on the averaged weights
def test_evaluation_uses_the_ema_weights_and_training_goes_on_with_the_raw_ones(tmp_path: Path) -> None:
    """eval_strategy="epoch": HF's evaluation runs on the EMA weights (its loss is theirs), then the raw weights
    are back, so the run still equals trickbag's Trainer (which evaluates nothing)."""
    from transformers import TrainerCallback

    seen: list[tuple[float, float, float]] = []
    x, y = data()
    cb = hf.TricksCallback({"ema": {"decay": 0.9}})

    class Look(TrainerCallback):
        def on_evaluate(self, args: Any, state: Any, control: Any, metrics: Any = None, model: Any = None,
                        **kw: Any) -> None:
            assert cb.run is not None
            ema = cast(Any, next(p for p in cb.run.plugins if p.key == "ema")).ema.module
            with torch.no_grad():
                ema_loss = float(torch.nn.functional.cross_entropy(ema(pixel_values=x)["logits"], y))
                now = float(torch.nn.functional.cross_entropy(model(pixel_values=x)["logits"], y))
            seen.append((metrics["eval_loss"], ema_loss, now))

    torch.manual_seed(0)
    model = HFNet()
    t = hf.TricksTrainer(model=model, args=hf_args(str(tmp_path), eval_strategy="epoch",
                                                   per_device_eval_batch_size=44, gradient_accumulation_steps=2),
                         train_dataset=hf_dataset(x, y), eval_dataset=hf_dataset(x, y), callbacks=[cb, Look()])
    t.train()
    assert len(seen) == 2
    for eval_loss, ema_loss, now in seen:
        assert abs(eval_loss - ema_loss) < 1e-5 and abs(now - ema_loss) < 1e-6  # the model held the EMA weights
    assert max_diff(model, run_reference({"ema": {"decay": 0.9}}, accumulate=2)) < TOL


# ---------------------------------------------------------------- the runtime audit
def _audited(tmp_path: Path, trainer_class: Any) -> Any:
    x, y = data()
    cb = hf.TricksCallback({"ema": {"decay": 0.9}}, audit=True)
    torch.manual_seed(0)
    trainer_class(model=HFNet(), args=hf_args(str(tmp_path), num_train_epochs=1), train_dataset=hf_dataset(x, y),
                  callbacks=[cb]).train()
    return cb.audit_report


def test_audit_reports_a_planted_mistake_in_an_hf_run(tmp_path: Path) -> None:
    """The planted mistake: a training_step that puts the model in eval mode before HF's forward."""
    class EvalMode(hf.TricksTrainer):
        def compute_loss(self, model: Any, inputs: Any, *a: Any, **kw: Any) -> Any:
            model.eval()
            return super().compute_loss(model, inputs, *a, **kw)

    rules = {f.rule for f in _audited(tmp_path, EvalMode).findings}
    assert any("eval" in r for r in rules), rules


def test_a_clean_hf_run_has_no_audit_findings(tmp_path: Path) -> None:
    assert [f.rule for f in _audited(tmp_path, hf.TricksTrainer).findings] == []


def test_nonfinite_stop_ends_the_run_at_the_bad_update(tmp_path: Path) -> None:
    x, y = data(16)
    x[8, 0, 0, 0] = float("nan")  # the second batch's loss is NaN
    torch.manual_seed(0)
    model = HFNet()
    cb = hf.TricksCallback({}, nonfinite="stop")
    t = hf.TricksTrainer(model=model, args=hf_args(str(tmp_path), num_train_epochs=3), train_dataset=hf_dataset(x, y),
                         callbacks=[cb])
    t.train()
    assert cb.run is not None and cb.run.state.should_stop and cb.run.state.step == 1
    assert t.state.global_step == 2  # HF counted the vetoed update and stopped there, not after 6
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_state_written_before_the_session_layout_still_loads(tmp_path: Path) -> None:
    """trickbag-rank<r>.pt files written by the HF adapter before it ran on the core's session hold
    ``{"plugins", "step", "skipped_steps", "guard"}``; they load into the session's counters and plug-ins."""
    from trickbag.integrations.hf import TricksCallback, TricksTrainer

    x, y = data()
    cb = TricksCallback({"ema": {"decay": 0.9}}, nonfinite="skip")
    trainer = TricksTrainer(model=HFNet(), args=hf_args(str(tmp_path)), train_dataset=hf_dataset(x, y),
                            callbacks=[cb])
    trainer.create_optimizer()
    new = cb.state_dict()
    old = {"plugins": new["plugins"], "step": 7, "skipped_steps": 2, "guard": new["guard"]}
    cb.load_state_dict(old)
    assert cb.run is not None and (cb.run.state.step, cb.run.state.skipped_steps) == (7, 2)
