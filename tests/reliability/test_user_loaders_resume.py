"""A hand-built Trainer on the user's own shuffling DataLoader resumes bit for bit.

For each sampler a user writes -- ``shuffle=True`` with and without ``generator=``, ``SubsetRandomSampler``,
``WeightedRandomSampler``, ``DistributedSampler`` and torchdata's ``StatefulDataLoader`` -- with ``num_workers`` 0
and 2, one run is killed with SIGKILL three times in a row (right after an update that was not checkpointed, during
an epoch's evaluation -- after the epoch's updates, before its checkpoint -- and while a checkpoint file is being
written) and resumed with ``fit(resume=True)`` after each; its final weights must equal those of a run that was
never interrupted (``torch.equal``). The model has dropout and the data a random transform in the workers, so the
RNG streams matter as much as the order.

Each run is a forked child process (torch already imported: no start-up cost), killed by the test's kill switch.
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest
import torch
from torch.utils.data import (
    DataLoader,
    Dataset,
    DistributedSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

from trickbag.train import Trainer
from trickbag.train.plugins.run_folder import RunFolder

from .killswitch import KillSwitch

N, BATCH, EVERY = 80, 16, 3  # 5 batches an epoch (the last full), a step checkpoint every 3 updates
KILLS = ("step:4", "write:step-00000006.pt", "eval:2")  # after update 4; writing step 6; epoch 2's evaluation


class Noisy(Dataset):
    """Fixed inputs plus noise drawn where the sample is read (a worker, or the main process)."""

    def __init__(self) -> None:
        g = torch.Generator().manual_seed(0)
        self.x, self.y = torch.randn(N, 1, 6, generator=g), torch.randint(0, 3, (N,), generator=g)

    def __len__(self) -> int:
        return N

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[i] + 0.1 * torch.randn(1, 6), self.y[i]


def _loader(kind: str, workers: int) -> DataLoader:
    ds = Noisy()
    common = {"batch_size": BATCH, "num_workers": workers}
    if kind == "shuffle":
        return DataLoader(ds, shuffle=True, **common)
    if kind == "shuffle_generator":
        return DataLoader(ds, shuffle=True, generator=torch.Generator().manual_seed(7), **common)
    if kind == "subset":
        return DataLoader(ds, sampler=SubsetRandomSampler(list(range(0, N, 1))), **common)
    if kind == "weighted":
        weights = torch.linspace(0.2, 1.0, N)
        return DataLoader(ds, sampler=WeightedRandomSampler(weights, N, replacement=True,
                                                            generator=torch.Generator().manual_seed(3)), **common)
    if kind == "distributed":
        return DataLoader(ds, sampler=DistributedSampler(ds, num_replicas=1, rank=0, shuffle=True, seed=5), **common)
    if kind == "stateful":
        from torchdata.stateful_dataloader import StatefulDataLoader

        return StatefulDataLoader(ds, shuffle=True, **common)
    raise ValueError(kind)


def _run(folder: str, kind: str, workers: int, kill: str, resume: bool, every: int = EVERY,
         tricks: dict | None = None) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(11)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Dropout(0.3),
                                torch.nn.Linear(16, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    val = DataLoader(Noisy(), batch_size=40)
    trainer = Trainer(model, opt, _loader(kind, workers), val, max_epochs=3, device="cpu",
                      plugins=[KillSwitch(kill)], seed=0, tricks=tricks,
                      run_dir=RunFolder(path=folder, checkpoint_every_steps=every, progress=False, plots=False))
    state = trainer.fit(resume=resume)
    torch.save({"weights": model.state_dict(), "history": state.history}, Path(folder) / "final.pt")


def _child(folder: Path, kind: str, workers: int, kill: str = "", resume: bool = False, **more: object) -> int:
    proc = multiprocessing.get_context("fork").Process(target=_run, args=(str(folder), kind, workers, kill, resume),
                                                       kwargs=more)
    proc.start()
    proc.join(timeout=120)
    if proc.is_alive():
        proc.kill()
        pytest.fail(f"{kind}: a run did not finish in 120 s")
    return proc.exitcode or 0


CASES = [(k, 0) for k in ("shuffle", "shuffle_generator", "subset", "weighted", "distributed", "stateful")]
CASES += [(k, 2) for k in ("shuffle", "shuffle_generator", "weighted", "stateful")]


@pytest.mark.parametrize(("kind", "workers"), CASES)
def test_the_users_own_loader_resumes_bit_for_bit_after_three_kills(tmp_path: Path, kind: str, workers: int) -> None:
    if kind == "stateful":
        pytest.importorskip("torchdata.stateful_dataloader")
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    assert _child(straight, kind, workers) == 0
    for i, kill in enumerate(KILLS):
        code = _child(killed, kind, workers, kill, resume=i > 0)
        assert code == -9, f"{kind}: the run was to be killed at {kill} (exit {code})"
    assert _child(killed, kind, workers, resume=True) == 0
    a, b = torch.load(straight / "final.pt")["weights"], torch.load(killed / "final.pt")["weights"]
    different = [k for k in a if not torch.equal(a[k], b[k])]
    assert not different, f"{kind}, num_workers={workers}: {different} differ after the resumes"
    resumes = sorted(p.name for p in (killed / "checkpoints").iterdir())
    assert "last.pt" in resumes


def test_a_resume_at_an_epochs_last_update_keeps_what_the_epoch_logged(tmp_path: Path) -> None:
    """With mixed targets the epoch has no training accuracy; a checkpoint at the epoch's last update, resumed,
    adds no batch that would say so: the checkpoint does."""
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    mix = {"mix": {"mixup_alpha": 0.4}}
    assert _child(straight, "shuffle", 0, every=5, tricks=mix) == 0
    # killed while epoch 1's last.pt is written: the resume starts from step-5.pt, written at its last update
    assert _child(killed, "shuffle", 0, "write:last.pt", every=5, tricks=mix) == -9
    assert (killed / "checkpoints" / "step-00000005.pt").exists() and not (killed / "checkpoints" / "last.pt").exists()
    assert _child(killed, "shuffle", 0, resume=True, every=5, tricks=mix) == 0
    a, b = torch.load(straight / "final.pt"), torch.load(killed / "final.pt")
    assert [sorted(h) for h in a["history"]] == [sorted(h) for h in b["history"]]
    assert "train/acc" not in b["history"][0]
    assert all(torch.equal(a["weights"][k], b["weights"][k]) for k in a["weights"])


def test_a_sampler_without_saved_state_is_named_once_at_fit_start(tmp_path: Path, capfd) -> None:
    class Own(torch.utils.data.Sampler):
        def __init__(self) -> None:
            self.order = list(range(N))

        def __iter__(self):
            return iter(self.order)

        def __len__(self) -> int:
            return N

    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(6, 3))
    loader = DataLoader(Noisy(), batch_size=BATCH, sampler=Own())
    Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), loader, max_epochs=1, device="cpu",
            run_dir=RunFolder(path=tmp_path / "r", progress=False, plots=False)).fit()
    err = capfd.readouterr().err
    assert err.count("keeps no state trickbag can save") == 1 and "(Own)" in err
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(6, 3))
    Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), _loader("shuffle", 0), max_epochs=1, device="cpu",
            run_dir=RunFolder(path=tmp_path / "s", progress=False, plots=False)).fit()
    assert "keeps no state" not in capfd.readouterr().err
