"""``trickbag eval`` and ``trickbag predict``: use a trained run."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["register"]

_TRUST_HELP = "allow a checkpoint whose recipe names model code (package.module:function) to run it"
_PLAIN_HELP = "leave out the recipe's evaluation tricks (flip TTA, the multi-scale test size)"


def cmd_eval(args: argparse.Namespace) -> int:
    from trickbag.runs.inference import evaluate_run

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
    from trickbag.runs.inference import predict_image

    tricks: list[str] = []
    ranked = predict_image(Path(args.checkpoint), Path(args.image), top=args.top, trust_code=args.trust_model_code,
                           plain=args.plain, tricks=tricks)
    print(f"class {ranked[0][0]}  (p={ranked[0][1]:.4f})")
    for name, p in ranked:
        print(f"  {name:>12s}  {p:.4f}")
    _say_eval_tricks(tricks, args.plain)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    e = sub.add_parser("eval", help="metrics of a run's best.pt (or a checkpoint file)")
    e.add_argument("run", metavar="RUN_DIR_OR_CHECKPOINT")
    e.add_argument("--split", choices=["test", "val", "train"], default="test")
    e.add_argument("--device", default="auto")
    e.add_argument("--trust-model-code", action="store_true", help=_TRUST_HELP)
    e.add_argument("--plain", action="store_true", help=_PLAIN_HELP)
    e.set_defaults(func=cmd_eval)

    pr = sub.add_parser("predict", help="classify one image with a checkpoint")
    pr.add_argument("checkpoint")
    pr.add_argument("image")
    pr.add_argument("--top", type=int, default=5)
    pr.add_argument("--trust-model-code", action="store_true", help=_TRUST_HELP)
    pr.add_argument("--plain", action="store_true", help=_PLAIN_HELP)
    pr.set_defaults(func=cmd_predict)
