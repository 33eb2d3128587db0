"""The ``trickbag`` command line: argument parsing only; the work happens in the library.

Every user error ends with one line on stderr (``trickbag: error: ...``) and exit status 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Callable, NoReturn, Optional, Sequence

from trickbag.errors import TrickbagError

__all__ = ["main", "build_parser"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2
        # "trickbag: error: ..." for sub-commands too (self.prog is then "trickbag eval")
        self.exit(2, f"trickbag: error: {message} (see {self.prog} --help)\n")


def _split_recipe_and_overrides(items: list[str]) -> tuple[Optional[str], list[str]]:
    if items and "=" not in items[0]:
        return items[0], items[1:]
    return None, items


# --------------------------------------------------------------------------- commands
def cmd_train(args: argparse.Namespace) -> int:
    from trickbag.config import load_recipe

    recipe_name, overrides = _split_recipe_and_overrides(args.items)
    if args.resume:
        if recipe_name is not None:
            raise TrickbagError(
                f"--resume takes the recipe from the run directory; drop {recipe_name!r} (overrides are allowed)"
            )
        from trickbag.config import load_run_recipe

        recipe = load_run_recipe(Path(args.resume), overrides)
    else:
        recipe = load_recipe(recipe_name, overrides)  # bad input fails here, before the heavy imports
    if recipe.dist.nproc > 1 and "LOCAL_RANK" not in os.environ:
        from trickbag.launch import launch_torchrun

        return launch_torchrun(recipe_name, overrides, recipe.dist.nproc, quiet=args.quiet, resume=args.resume)
    from trickbag.train.run import resume_run, train_recipe

    if args.resume:
        result = resume_run(Path(args.resume), overrides, quiet=args.quiet)
    else:
        result = train_recipe(recipe, quiet=args.quiet)
    if result.interrupted:
        print(f"trickbag: interrupted; continue with: trickbag train --resume {result.run_dir}", file=sys.stderr)
        return 130
    from trickbag.train.nonfinite import STOP_PREFIX

    if result.stop_reason and result.stop_reason.startswith(STOP_PREFIX):
        print(f"trickbag: error: training stopped: {result.stop_reason}; the last good state is in "
              f"{result.run_dir}/checkpoints/last.pt (trickbag train --resume {result.run_dir})", file=sys.stderr)
        return 1
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from trickbag.train.run import evaluate_run

    tricks: list[str] = []
    m = evaluate_run(Path(args.run), split=args.split, device=args.device, trust_code=args.trust_model_code,
                     plain=args.plain, tricks=tricks)
    print(f"{args.split} acc {m['acc']:.4f}  loss {m['loss']:.4f}  ({int(m['n'])} samples)")
    _say_eval_tricks(tricks, args.plain)
    return 0


def _say_eval_tricks(applied: list[str], plain: bool) -> None:
    """Name the recipe's evaluation tricks: applied, or left out with --plain."""
    if applied:
        verb = "left out (--plain)" if plain else "applied, as in training"
        print(f"  evaluation tricks {verb}: {'; '.join(applied)}")


def cmd_predict(args: argparse.Namespace) -> int:
    from trickbag.train.run import predict_image

    tricks: list[str] = []
    ranked = predict_image(Path(args.checkpoint), Path(args.image), top=args.top, trust_code=args.trust_model_code,
                           plain=args.plain, tricks=tricks)
    print(f"class {ranked[0][0]}  (p={ranked[0][1]:.4f})")
    for name, p in ranked:
        print(f"  {name:>12s}  {p:.4f}")
    _say_eval_tricks(tricks, args.plain)
    return 0


def cmd_recipes(args: argparse.Namespace) -> int:
    import yaml

    from trickbag.config import builtin_recipes

    for name, path in builtin_recipes().items():
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        print(f"{name:22s} {data.get('description', '')}")
    if args.show:
        from trickbag.config import resolve_recipe_path

        print(resolve_recipe_path(args.show).read_text(encoding="utf-8"))
    return 0


def cmd_env(args: argparse.Namespace) -> int:
    import platform

    import torch

    import trickbag

    print(f"trickbag     {trickbag.__version__}")
    print(f"python       {platform.python_version()} ({platform.platform()})")
    print(f"torch        {torch.__version__} (CUDA build {torch.version.cuda or 'none'})")
    try:
        import torchvision

        print(f"torchvision  {torchvision.__version__}")
    except Exception as exc:  # pragma: no cover - environment dependent
        print(f"torchvision  not importable ({exc})")
    cuda = torch.cuda.is_available()
    print(f"CUDA         {'available' if cuda else 'not available'}")
    if cuda:
        print(f"cuDNN        {torch.backends.cudnn.version()} (enabled={torch.backends.cudnn.enabled})")
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            print(f"  cuda:{i}     {p.name}, {p.total_memory / 2**30:.1f} GiB, capability {p.major}.{p.minor}")
    else:
        print(f"cuDNN        {'n/a (no CUDA device)'}")
    mps = bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())
    print(f"MPS          {'available' if mps else 'not available'}")
    print(f"CPU threads  {torch.get_num_threads()} (cores: {os.cpu_count()})")
    print("bf16 on CPU  supported" if hasattr(torch, "bfloat16") else "bf16 on CPU  no")
    from trickbag.runtime import select_device

    print(f"device auto  {select_device('auto')}")
    return 0


def cmd_tricks(args: argparse.Namespace) -> int:
    from trickbag.train.tricks import describe_tricks

    print(describe_tricks())
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="trickbag", description="Training tricks for PyTorch, from a recipe.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    t = sub.add_parser("train", help="train a recipe (default: digits)",
                       description="Train a recipe. ITEMS: [RECIPE] [key.sub=value ...]")
    t.add_argument("items", nargs="*", metavar="ITEMS", help="a recipe name or YAML file, then key.sub=value overrides")
    t.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR from its newest checkpoint")
    t.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    t.set_defaults(func=cmd_train)

    e = sub.add_parser("eval", help="metrics of a run's best.pt (or a checkpoint file)")
    e.add_argument("run", metavar="RUN_DIR_OR_CHECKPOINT")
    e.add_argument("--split", choices=["test", "val", "train"], default="test")
    e.add_argument("--device", default="auto")
    e.add_argument("--trust-model-code", action="store_true",
                   help="allow a checkpoint whose recipe names model code (package.module:function) to run it")
    e.add_argument("--plain", action="store_true",
                   help="leave out the recipe's evaluation tricks (flip TTA, the multi-scale test size)")
    e.set_defaults(func=cmd_eval)

    pr = sub.add_parser("predict", help="classify one image with a checkpoint")
    pr.add_argument("checkpoint")
    pr.add_argument("image")
    pr.add_argument("--top", type=int, default=5)
    pr.add_argument("--trust-model-code", action="store_true",
                    help="allow a checkpoint whose recipe names model code (package.module:function) to run it")
    pr.add_argument("--plain", action="store_true",
                    help="leave out the recipe's evaluation tricks (flip TTA, the multi-scale test size)")
    pr.set_defaults(func=cmd_predict)

    r = sub.add_parser("recipes", help="list the built-in recipes")
    r.add_argument("--show", metavar="NAME", help="print one recipe")
    r.set_defaults(func=cmd_recipes)

    ev = sub.add_parser("env", help="torch / CUDA / cuDNN / device report")
    ev.set_defaults(func=cmd_env)

    tr = sub.add_parser("tricks", help="list every trick and its recipe keys")
    tr.set_defaults(func=cmd_tricks)

    for register in _EXTRA_COMMANDS:
        register(sub)
    return p


#: functions ``register(subparsers)`` adding more commands (experiments, extras)
_EXTRA_COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = []


def _register_tools(sub: argparse._SubParsersAction) -> None:
    from trickbag.tools_cli import register

    register(sub)


_EXTRA_COMMANDS.append(_register_tools)


def _in_torchrun_worker() -> bool:
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


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The ``trickbag`` command (``argv`` None: ``sys.argv``, as a program; a torchrun worker then
    ends through :func:`exit_torchrun_worker`)."""
    code = _main(argv)
    if argv is None and _in_torchrun_worker():
        exit_torchrun_worker(code)
    return code


def _main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
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
        print(f"trickbag: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("trickbag: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `trickbag tricks | head`: the reader left; no traceback, no flush error at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


import trickbag.experiments.cli  # noqa: E402,F401  (ablate, sweep, lr-find, report; light imports only)

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
