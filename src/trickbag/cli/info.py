"""``trickbag recipes``, ``trickbag tricks``, ``trickbag env``: what is available here."""

from __future__ import annotations

import argparse
import os

__all__ = ["register"]


def cmd_recipes(args: argparse.Namespace) -> int:
    import yaml

    from trickbag.config import builtin_recipes, resolve_recipe_path

    if args.show:  # only the YAML: `trickbag recipes --show digits > my.yaml` is a valid recipe
        print(resolve_recipe_path(args.show).read_text(encoding="utf-8"), end="")
        return 0
    if args.keys:
        from trickbag.config.reference import keys_markdown, keys_text
        from trickbag.recipe import Recipe

        print(keys_markdown(Recipe) if args.markdown else keys_text(Recipe), end="")
        return 0
    for name, path in builtin_recipes().items():
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        print(f"{name:22s} {data.get('description', '')}")
    print("\nshow one: trickbag recipes --show NAME; every key: trickbag recipes --keys")
    return 0


def cmd_tricks(args: argparse.Namespace) -> int:
    from trickbag.tricks import describe_tricks

    print(describe_tricks())
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


def register(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("recipes", help="list the built-in recipes, print one, or every recipe key")
    r.add_argument("--show", metavar="NAME", help="print one recipe's YAML (nothing else: redirect it to a file)")
    r.add_argument(
        "--keys", action="store_true", help="every recipe key with its type, default, allowed values and help"
    )
    r.add_argument("--markdown", action="store_true", help="with --keys: as the Markdown of docs/recipes.md")
    r.set_defaults(func=cmd_recipes)

    tr = sub.add_parser("tricks", help="list every trick and its recipe keys")
    tr.set_defaults(func=cmd_tricks)

    ev = sub.add_parser("env", help="torch / CUDA / cuDNN / device report")
    ev.set_defaults(func=cmd_env)
