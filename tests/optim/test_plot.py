"""plot_lr: writes a PNG, returns the LR sequence, and never mutates the caller's optimizer/scheduler."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from trickbag.optim import SAM, build_scheduler, plot_lr

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _opt() -> torch.optim.SGD:
    return torch.optim.SGD(
        [
            {"params": [torch.zeros(2, requires_grad=True)], "lr": 0.1},
            {"params": [torch.zeros(2, requires_grad=True)], "lr": 0.01},
        ],
        lr=0.1,
        momentum=0.9,
    )


def _cosine_warmup(t: int, b: float, total: int = 12, w: int = 3) -> float:
    if t < w:
        return b * (t + 1) / (w + 1)
    return b * (1 + math.cos(math.pi * (t - w) / (total - w))) / 2


def test_plot_scheduler_copy_leaves_original_untouched(tmp_path: Path) -> None:
    opt = _opt()
    sched = build_scheduler(opt, "cosine", total_steps=12, warmup_steps=3)
    lrs_before = [g["lr"] for g in opt.param_groups]
    state_before = {k: v for k, v in sched.state_dict().items() if k != "_schedulers"}
    path, lrs = plot_lr(sched, 12, tmp_path / "sub" / "lr.png")
    assert path == tmp_path / "sub" / "lr.png"
    assert path.read_bytes()[:8] == PNG_MAGIC
    assert len(lrs) == 12 and all(len(row) == 2 for row in lrs)
    for t, row in enumerate(lrs):
        assert row == pytest.approx([_cosine_warmup(t, 0.1), _cosine_warmup(t, 0.01)], rel=1e-9)
    # the caller's optimizer and scheduler did not move
    assert [g["lr"] for g in opt.param_groups] == lrs_before
    assert {k: v for k, v in sched.state_dict().items() if k != "_schedulers"} == state_before
    rows = []
    for _ in range(12):
        rows.append([g["lr"] for g in opt.param_groups])
        opt.step()
        sched.step()
    # ... and stepping the original afterwards gives the plotted sequence
    torch.testing.assert_close(torch.tensor(rows), torch.tensor(lrs))


def test_plot_from_factory_and_from_sam(tmp_path: Path) -> None:
    def factory():
        return build_scheduler(_opt(), "step", step_size=2, gamma=0.5)

    _, lrs = plot_lr(factory, 6, tmp_path / "f.png")
    assert [row[0] for row in lrs] == pytest.approx([0.1 * 0.5 ** (t // 2) for t in range(6)])

    params = [torch.zeros(3, requires_grad=True)]
    sam = SAM(params, torch.optim.SGD, lr=0.2)
    sched = build_scheduler(sam, "linear", total_steps=4)
    _, lrs = plot_lr(sched, 4, tmp_path / "sam.png")
    assert [row[0] for row in lrs] == pytest.approx([0.2, 0.15, 0.1, 0.05])
    assert sam.base_optimizer.param_groups[0]["lr"] == 0.2


def test_plot_rejects_bad_input(tmp_path: Path) -> None:
    opt = _opt()
    with pytest.raises(TypeError, match="ReduceLROnPlateau"):
        plot_lr(build_scheduler(opt, "plateau"), 5, tmp_path / "p.png")
    with pytest.raises(ValueError, match="steps"):
        plot_lr(lambda: build_scheduler(_opt(), "constant"), 0, tmp_path / "p.png")
    with pytest.raises(ValueError, match=r"\.png"):
        plot_lr(lambda: build_scheduler(_opt(), "constant"), 3, tmp_path / "p.jpg")
    with pytest.raises(TypeError, match="factory must return"):
        plot_lr(lambda: 3, 3, tmp_path / "p.png")
