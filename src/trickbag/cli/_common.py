"""Helpers shared by the command modules: the one-line-error parser, recipe/override splitting,
the torchrun worker exit."""

from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn

__all__ = ["Parser", "split_recipe_and_overrides", "positive_int", "positive_float", "in_torchrun_worker",
           "exit_torchrun_worker"]


class Parser(argparse.ArgumentParser):
    """``argparse`` with usage errors as one line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        # "trickbag: error: ..." for sub-commands too (self.prog is then "trickbag eval")
        self.exit(2, f"trickbag: error: {message} (see {self.prog} --help)\n")


def split_recipe_and_overrides(items: list[str], default: str | None = None) -> tuple[str | None, list[str]]:
    """``[RECIPE] key=value ...`` -> (recipe or ``default``, overrides)."""
    if items and "=" not in items[0]:
        return items[0], list(items[1:])
    return default, list(items)


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def in_torchrun_worker() -> bool:
    """True in a process started by torchrun for a job of more than one process."""
    if "LOCAL_RANK" not in os.environ:  # not under torchrun: keep torch out of the light commands
        return False
    from trickbag import runtime

    return runtime.dist_info().world_size > 1


def exit_torchrun_worker(code: int) -> NoReturn:
    """End a torchrun worker with ``code``: atexit handlers and flushed streams, then ``os._exit``.

    Gloo's worker threads can still hold a finished collective (and the Python tensors in it)
    for a moment after it returned; if the interpreter is being torn down by then, releasing
    those tensors needs the GIL and the process aborts ("terminate called without an active
    exception", SIGABRT), which torchrun reports as a failed job after a run that succeeded.
    A worker whose work is done therefore skips the interpreter's teardown, as
    ``multiprocessing`` does for its children: exit handlers run, streams are flushed, files
    were already closed by the run.
    """
    import atexit

    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # a closed or broken stream: nothing left to save
                pass
        os._exit(code)
