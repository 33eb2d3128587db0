"""Worker of ``test_gpu_nccl``: a one-process NCCL group (``env://`` on localhost, set up by the test) driving
trickbag's DDP paths on one GPU. Prints ``RESULT {json}`` on its last line."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _net():
    import torch
    from torch import nn

    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(8, 4))


def _train(model, wrap) -> tuple[dict, dict]:
    """Three updates of two micro-batches (DDP's no_sync on the first) and one evaluation, on cuda:0."""
    import torch

    from trickbag.train.trainer import Trainer

    g = torch.Generator().manual_seed(1)
    data = [(torch.randn(8, 3, 8, 8, generator=g), torch.randint(0, 4, (8,), generator=g)) for _ in range(6)]
    model = model.cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    t = Trainer(wrap(model), opt, data, data[:2], accumulate=2, device=torch.device("cuda", 0))
    t.fit()
    return {k: v.detach().cpu() for k, v in model.state_dict().items()}, t.state.history[-1]


def main() -> dict:
    import torch
    import torch.distributed as dist

    from trickbag import runtime
    from trickbag.train import distributed as tdist
    from trickbag.train.parts import wrap_ddp

    torch.cuda.set_device(0)
    dist.init_process_group("nccl", init_method="env://")
    info = runtime.dist_info()
    out: dict = {"backend": dist.get_backend(), "dist_info": [info.rank, info.local_rank, info.world_size],
                 "initialized": runtime.torch_distributed_initialized(), "is_distributed": tdist.is_distributed()}
    t = torch.arange(4.0, device="cuda")
    dist.all_reduce(t)
    out["all_reduce"] = t.tolist()
    c = torch.ones(2)
    dist.all_reduce(c, group=tdist._control_group())  # the gloo side group trickbag uses for control messages
    out["gloo_all_reduce"] = c.tolist()
    dist.barrier(device_ids=[0])

    ddp_state, ddp_hist = _train(_net(), lambda m: wrap_ddp(m, torch.device("cuda", 0)))
    plain_state, plain_hist = _train(_net(), lambda m: m)
    out["ddp_max_abs_diff"] = max(float((ddp_state[k].double() - plain_state[k].double()).abs().max())
                                  for k in plain_state)
    out["ddp_val_loss"], out["plain_val_loss"] = ddp_hist["val/loss"], plain_hist["val/loss"]

    sync = tdist.convert_sync_batchnorm(_net().cuda())
    out["sync_bn_type"] = type(sync[1]).__module__ + "." + type(sync[1]).__name__
    x = torch.randn(8, 3, 8, 8, device="cuda")
    reference = _net().cuda()
    out["sync_bn_max_abs_diff"] = float((sync(x) - reference(x)).abs().max())
    runtime.shutdown_distributed()
    out["initialized_after_shutdown"] = runtime.torch_distributed_initialized()
    return out


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
    print("RESULT " + json.dumps(main()), flush=True)
