"""Shared pieces of the weight-averaging tests (EMA, SWA)."""

from __future__ import annotations

import io

import torch


def round_trip(state: dict) -> dict:
    """``state`` written with ``torch.save`` and read back with ``weights_only=True`` (as a checkpoint is)."""
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)
