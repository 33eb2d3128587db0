"""Lightning ``strategy="ddp"``, 2 gloo processes on the CPU, against trickbag's Trainer in one process with the
same global batch. Lightning puts a shuffling ``DistributedSampler(seed=0)`` under the training loader: in epoch e
rank r gets ``perm_e[r::2]`` of the permutation ``perm_e``, so update j of the 2-process run with batch 4 sees
``perm_e[8j:8j+8]``, what a one-replica ``DistributedSampler(seed=0)`` with batch 8 gives the 1-process run; DDP
averages the ranks' mean-loss gradients, the gradient of the mean over the global batch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as torch_dist

from tests.integrations.conftest import Holder, data, flat, net

pytest.importorskip("lightning")
pytestmark = pytest.mark.skipif(not torch_dist.is_available() or not torch_dist.is_gloo_available(),
                                reason="torch built without distributed/gloo support")

DDP_TRICKS = {"ema": {"decay": 0.8}, "clip": {"max_norm": 0.3}, "layer_decay": {"decay": 0.6, "depth": 2}}


def lightning_module(model: torch.nn.Module) -> Any:
    import lightning.pytorch as pl

    class Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            return self.trickbag_loss(self.model(batch[0]), batch[1])  # no forward: num_classes= tells

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.2, momentum=0.9)

    return Module()


def test_ddp_two_processes_equal_one_process(tmp_path: Path) -> None:
    from trickbag.train.trainer import Trainer

    out = tmp_path / "weights.pt"
    worker = Path(__file__).with_name("lightning_ddp_worker.py")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, str(worker), str(out)], capture_output=True, text=True, timeout=300,
                          env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    from torch.utils.data import DataLoader, DistributedSampler

    ds = data()
    one = DataLoader(ds, batch_size=8, sampler=DistributedSampler(ds, num_replicas=1, rank=0, shuffle=True, seed=0))
    model = Holder(net())
    Trainer(model, torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9), one, tricks=DDP_TRICKS,
            max_epochs=2, device="cpu", seed=0, progress=False).fit()
    torch.testing.assert_close(torch.load(out), flat(model.model), rtol=0, atol=1e-5)
