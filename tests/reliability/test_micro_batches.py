"""``micro_batch_size``: a loader batch split into micro-batches gives the whole batch's update (checked against a
hand-written full-batch loop), and ``auto`` recovers from an out-of-memory error in the forward or the backward with
the weights of explicit micro-batches of the size it ends at (BatchNorm, dropout and mixing on)."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tests.reliability.oom_models import OOMAbove, net
from trickbag.errors import RecipeError, TrickbagError
from trickbag.recipe import load_recipe
from trickbag.train.build import build
from trickbag.train.micro import split_batch
from trickbag.train.trainer import Trainer

MIX = {"mix": {"mixup_alpha": 0.4, "cutmix_alpha": 0.0}}


def _data(n: int = 40, seed: int = 0) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 2, 4, generator=g)
    return TensorDataset(x, (x[:, 0, 0] > 0).long() + (x[:, 1, 0] > 0.5).long())


def _loader(ds: TensorDataset, batch: int) -> DataLoader:
    return DataLoader(ds, batch_size=batch, shuffle=True, generator=torch.Generator().manual_seed(7))


def _run(model: nn.Module, *, micro, epochs: int = 2, batch: int = 16, accumulate: int = 2, tricks=None,
         ds: TensorDataset | None = None, **kw) -> Trainer:
    torch.manual_seed(1)  # dropout's stream
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    t = Trainer(model, opt, _loader(ds or _data(), batch), max_epochs=epochs, accumulate=accumulate,
                device="cpu", progress=False, micro_batch_size=micro, tricks=tricks, seed=0, **kw)
    t.fit()
    return t


def _fresh(limit: int, where: str = "backward", first: int = 1) -> nn.Module:
    torch.manual_seed(0)
    return net(limit, where, first)


def _assert_same(a: nn.Module, b: nn.Module, tol: float = 1e-6) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        torch.testing.assert_close(sa[k], sb[k], rtol=0, atol=tol, msg=k)


def test_split_batch_cuts_every_tensor_of_the_batch_length_and_keeps_the_rest() -> None:
    x, y, w = torch.randn(5, 3), torch.arange(5), torch.ones(2)
    pieces = split_batch(({"a": x, "b": w}, y, "name"), 3)
    assert [p[1].tolist() for p in pieces] == [[0, 1, 2], [3, 4]]
    assert torch.equal(torch.cat([p[0]["a"] for p in pieces]), x)
    assert all(p[0]["b"] is w and p[2] == "name" for p in pieces)
    assert split_batch((x, y), 5)[0][0] is x and len(split_batch((x, y), None)) == 1


def test_micro_batches_give_the_whole_batch_update_of_a_hand_written_loop() -> None:
    """Uneven pieces (23 samples, batches of 5, micro-batches of 2, 2 batches per update): each update equals the
    mean loss over all of its samples, computed in one forward by a plain loop."""
    ds = _data(23)

    def model() -> nn.Module:
        torch.manual_seed(0)
        return nn.Sequential(nn.Flatten(), nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))

    split = model()
    _run(split, micro=2, epochs=3, batch=5, ds=ds)
    ref = model()
    opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    loader = _loader(ds, 5)
    for _ in range(3):
        batches = list(loader)
        for u in range(0, len(batches), 2):
            x = torch.cat([b[0] for b in batches[u:u + 2]])
            y = torch.cat([b[1] for b in batches[u:u + 2]])
            nn.functional.cross_entropy(ref(x), y).backward()
            opt.step()
            opt.zero_grad()
    _assert_same(split, ref, 1e-6)


@pytest.mark.parametrize("where", ["backward", "forward"])
def test_auto_recovers_from_out_of_memory_with_the_weights_of_explicit_micro_batches(where, capsys) -> None:
    """The second micro-batch of the first update runs out of memory (16 > 5), then again at 8: ``auto`` ends at 4
    and its weights, BatchNorm statistics included, are those of ``micro_batch_size=4`` from the start."""
    auto = _fresh(5, where, first=2)
    t = _run(auto, micro="auto", tricks=MIX)
    gate = auto[5]
    assert isinstance(gate, OOMAbove) and gate.raised == [16, 8]
    assert t.micro.size == 4 and t.micro.halvings == 2
    err = capsys.readouterr().err
    assert "out of memory at update 1 with micro-batches of 16" in err and "micro-batches of 4" in err
    explicit = _fresh(5, where)
    e = _run(explicit, micro=4, tricks=MIX)
    assert explicit[5].raised == []
    _assert_same(auto, explicit)
    for mine, theirs in zip(t.state.history, e.state.history, strict=True):  # the failed attempts are not counted
        assert mine["train/loss"] == pytest.approx(theirs["train/loss"], abs=1e-6)


def test_auto_size_is_checkpointed_and_a_resumed_run_goes_on_at_it() -> None:
    straight = _fresh(5, first=2)
    _run(straight, micro="auto", epochs=3)
    first = _fresh(5, first=2)
    sd = _run(first, micro="auto", epochs=1).state_dict()
    assert sd["micro_batch"] == {"size": 4, "halvings": 2}
    resumed = _fresh(5, first=1)  # any micro-batch over 5 would run out of memory
    torch.manual_seed(1)
    opt = torch.optim.SGD(resumed.parameters(), lr=0.1, momentum=0.9)
    t = Trainer(resumed, opt, _loader(_data(), 16), max_epochs=3, accumulate=2, device="cpu", progress=False,
                micro_batch_size="auto", seed=0)
    t.load_state_dict(sd)
    t.fit()
    assert resumed[5].raised == [] and t.micro.size == 4
    _assert_same(resumed, straight)


def test_auto_on_the_cpu_says_it_keeps_the_whole_batch(capsys) -> None:
    t = _run(_fresh(100), micro="auto", epochs=1)
    assert t.micro.size is None and t.micro.halvings == 0
    assert "micro_batch_size=auto on the CPU: each loader batch is one micro-batch" in capsys.readouterr().err


def test_a_model_that_does_not_fit_one_sample_stops_in_one_line() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(8, 4), OOMAbove(0), nn.Linear(4, 3))  # no BatchNorm: 1 sample runs
    with pytest.raises(TrickbagError, match="out of memory with micro-batches of 1 sample"):
        _run(model, micro="auto", epochs=1)


def test_an_explicit_split_says_what_differs_from_the_whole_batch(capsys) -> None:
    _run(_fresh(100), micro=4, epochs=1)
    err = capsys.readouterr().err
    assert "micro-batches of at most 4 samples: BatchNorm normalises each micro-batch" in err


def test_without_auto_the_out_of_memory_error_is_the_users() -> None:
    with pytest.raises(torch.OutOfMemoryError):
        _run(_fresh(5), micro=None, epochs=1)


@pytest.mark.parametrize("bad", [0, -2, 1.5, "half", True])
def test_bad_micro_batch_sizes_are_refused(bad) -> None:
    with pytest.raises(ValueError, match="micro_batch_size must be an int >= 1, 'auto' or None"):
        Trainer(nn.Linear(2, 2), torch.optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1), [], micro_batch_size=bad)


def test_the_recipe_key_reaches_the_trainer_and_auto_is_refused_with_fsdp() -> None:
    base = ["data.name=fake", "data.num_samples=40", "data.shape=[1,4,4]", "train.epochs=1", "run.progress=false"]
    trainer, _ = build(load_recipe("digits", [*base, "train.micro_batch_size=auto"]))
    assert trainer.micro.auto
    trainer, _ = build(load_recipe("digits", [*base, "train.micro_batch_size=3"]))
    assert trainer.micro.size == 3 and not trainer.micro.auto
    with pytest.raises(RecipeError, match="micro_batch_size=auto is refused with dist.strategy=fsdp"):
        build(load_recipe("digits", [*base, "train.micro_batch_size=auto", "dist.strategy=fsdp"]))
