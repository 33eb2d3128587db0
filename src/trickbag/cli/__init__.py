"""The ``trickbag`` command line: one module per command group, the parser built from a literal list.

Every user error ends with one line on stderr (``trickbag: error: ...``) and exit status 2; a run
that fails while training exits 1, an interrupted one 130 (SIGINT) or 143 (SIGTERM).  Command modules
import their heavy dependencies (torch, the trainer) inside the command functions, so ``--help``,
``--version`` and the listing commands answer without importing torch.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from trickbag.cli import doctor, evaluate, experiments, info, tools, train, verify
from trickbag.cli._common import Parser, exit_torchrun_worker, in_torchrun_worker
from trickbag.errors import TrickbagError

__all__ = ["main", "build_parser", "GROUPS"]

#: the command groups, in the order ``trickbag --help`` lists them; each has ``register(subparsers)``
GROUPS = (train, evaluate, info, tools, experiments, verify, doctor)


def build_parser() -> argparse.ArgumentParser:
    """The ``trickbag`` argument parser with every command of :data:`GROUPS`."""
    import trickbag

    p = Parser(prog="trickbag", description="Training tricks for PyTorch, from a recipe.")
    p.add_argument("--version", action="version", version=f"trickbag {trickbag.__version__}")
    p.add_argument("--debug", action="store_true",
                   help="on an error, print the Python traceback under the one-line message (anywhere on the line; "
                        "or TRICKBAG_DEBUG=1)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for group in GROUPS:
        group.register(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """The ``trickbag`` command (``argv`` None: ``sys.argv``, as a program; a torchrun worker then
    ends through :func:`~trickbag.cli._common.exit_torchrun_worker`)."""
    code = _main(argv)
    if argv is None and in_torchrun_worker():
        exit_torchrun_worker(code)
    return code


def _main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv or os.environ.get("TRICKBAG_DEBUG", "") not in ("", "0")
    argv = [a for a in argv if a != "--debug"]  # accepted after the command too: `trickbag train x --debug`
    args, unknown = parser.parse_known_args(argv)
    # `trickbag train --quiet a.b=1`: overrides may come after options
    stray = [u for u in unknown if u.startswith("-") or not hasattr(args, "items")]
    if stray:
        parser.error(f"unrecognized arguments: {' '.join(stray)}")
    if unknown:
        args.items = list(args.items) + unknown
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except TrickbagError as exc:
        msg = " ".join(str(exc).split("\n"))
        code = int(getattr(exc, "exit_code", 2))
        if code == 0:  # not an error: a run that has nothing left to do says so
            print(f"trickbag: {msg}")
            return 0
        if debug:
            import traceback

            traceback.print_exception(exc, file=sys.stderr)
        print(f"trickbag: error: {msg}", file=sys.stderr)
        return code
    except KeyboardInterrupt:
        print("trickbag: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `trickbag tricks | head`: the reader left; no traceback, no flush error at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
