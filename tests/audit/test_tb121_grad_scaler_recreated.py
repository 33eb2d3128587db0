"""TB121 grad-scaler-recreated: a GradScaler created inside the epoch loop, or at the top of a per-epoch function,
restarts its loss scale at 2**16 every epoch (real mistake 218; RecBole's ``_train_epoch`` and DN-DETR's
``train_one_epoch`` have the same shape).  Wrong shapes reported at the ``GradScaler(...)`` call, right ones silent
with ``--all``."""

from __future__ import annotations

from tests.audit.helpers import found

EPOCH_FN = """
    import torch
    import torch.nn.functional as F

    def train_one_epoch(model, loader, optimizer, {params}):
        {make}
        for x, y in loader:
            with torch.autocast("cuda", dtype=torch.float16):
                loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()

    def main(model, loader, optimizer, epochs):
        for epoch in range(epochs):
            train_one_epoch(model, loader, optimizer, {call})
"""
MAKE = "scaler = torch.amp.GradScaler('cuda')"


def test_created_at_every_call_of_a_per_epoch_function():
    assert found(EPOCH_FN.format(params="epoch", make=MAKE, call="epoch"), "TB121") == [6]
    # called inside the epoch loop, even without an epoch parameter
    assert found(EPOCH_FN.format(params="log=True", make=MAKE, call="log=True"), "TB121") == [6]


def test_created_once_and_passed_in():
    right = EPOCH_FN.format(params="scaler", make="pass", call="scaler").replace(
        "    def main(model, loader, optimizer, epochs):\n",
        "    def main(model, loader, optimizer, epochs):\n        scaler = torch.amp.GradScaler('cuda')\n")
    assert found(right, "TB121", show_all=True) == []


def test_lazy_creation_restore_or_disabled_is_silent():
    lazy = EPOCH_FN.format(params="epoch", make="if scaler is None:\n            scaler = torch.amp.GradScaler()",
                           call="epoch").replace("epoch):\n        if", "epoch, scaler=None):\n        if")
    assert found(lazy, "TB121", show_all=True) == []
    restored = EPOCH_FN.format(params="epoch, state", make=MAKE + "\n        scaler.load_state_dict(state)",
                               call="epoch, state")
    assert found(restored, "TB121", show_all=True) == []
    off = EPOCH_FN.format(params="epoch", make="scaler = torch.amp.GradScaler(enabled=False)", call="epoch")
    assert found(off, "TB121", show_all=True) == []


LOOP = """
    import torch

    def train(model, loader, epochs, lr):
        {before}
        for epoch in range(epochs):
            {inside}
            for x, y in loader:
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = model(x, y)
                optimizer.zero_grad()
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
"""


def test_created_inside_the_epoch_loop():
    src = LOOP.format(before="optimizer = torch.optim.AdamW(model.parameters(), lr)", inside=MAKE)
    assert found(src, "TB121") == [7]


def test_whole_training_function_or_a_new_run_per_pass():
    once = LOOP.format(before="optimizer = torch.optim.AdamW(model.parameters(), lr)\n        " + MAKE,
                       inside="pass")
    assert found(once, "TB121", show_all=True) == []
    # a training function that takes the epoch count and loops over epochs itself: one scaler per training
    whole = LOOP.format(before=MAKE, inside="pass").replace("def train(model, loader, epochs, lr)",
                                                            "def train(model, loader, optimizer, epochs, lr)")
    assert found(whole, "TB121", show_all=True) == []
    # every pass of the outer loop builds a new optimizer: a new training (a fold, a sweep), a new scaler is right
    fold = LOOP.format(before="pass", inside="optimizer = torch.optim.AdamW(model.parameters(), lr)\n            "
                                              + MAKE)
    assert found(fold, "TB121", show_all=True) == []
