"""Settings of the CUDA-only tests: one CUDA context is shared by every test of the process.

cuBLAS reads ``CUBLAS_WORKSPACE_CONFIG`` once, when the context's first handle is made, and a test
that turns deterministic algorithms on may run after others used cuBLAS; so the variable is set here,
before any CUDA work (as ``trickbag train`` sets it before its first CUDA call). Every test gets the
global switches it may change (deterministic algorithms, cuDNN and TF32 flags) back afterwards.
"""

from __future__ import annotations

import os

import pytest
import torch

if torch.cuda.is_available():  # (a CPU-only test session keeps its environment as it is)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


@pytest.fixture(autouse=True)
def _restore_backend_switches():
    saved = (torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.deterministic,
             torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    yield
    if torch.are_deterministic_algorithms_enabled() != saved[0]:
        torch.use_deterministic_algorithms(saved[0])
    (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32,
     torch.backends.cuda.matmul.allow_tf32) = saved[1:]


@pytest.fixture
def no_tf32():
    """Full fp32 convolutions and matmuls on the GPU, for comparisons with the CPU at fp32 tolerances."""
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
