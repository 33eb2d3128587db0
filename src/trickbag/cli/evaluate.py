"""``trickbag eval`` and ``trickbag predict``: use a trained run."""

from __future__ import annotations

import argparse
from pathlib import Path

from trickbag.cli._common import positive_int

__all__ = ["register"]

_TRUST_HELP = "allow a checkpoint whose recipe names model code (package.module:function) to run it"
_PLAIN_HELP = "leave out the recipe's evaluation tricks (flip TTA, the multi-scale test size)"


def cmd_eval(args: argparse.Namespace) -> int:
    from trickbag.runs.inference import evaluate_run

    tricks: list[str] = []
    m = evaluate_run(Path(args.run), split=args.split, device=args.device, trust_code=args.trust_model_code,
                     plain=args.plain, tricks=tricks)
    floats = {k: v for k, v in m.items() if isinstance(v, float) and k not in ("loss", "n")}
    first = next(iter(floats), "loss")
    print(f"{args.split} {first} {m.get(first, m['loss']):.4f}  loss {m['loss']:.4f}  ({int(m['n'])} samples)")
    rest = "  ".join(f"{k} {v:.4f}" for k, v in floats.items() if k != first)
    if rest:
        print(f"  {rest}")
    _say_eval_tricks(tricks, args.plain)
    return 0


def _say_eval_tricks(applied: list[str], plain: bool) -> None:
    """Name the recipe's evaluation tricks: applied, or left out with --plain."""
    if applied:
        verb = "left out (--plain)" if plain else "applied, as in training"
        print(f"  evaluation tricks {verb}: {'; '.join(applied)}")


def cmd_predict(args: argparse.Namespace) -> int:
    import csv
    import io

    from trickbag._files import atomic_write_text
    from trickbag.runs.inference import predict, prediction_rows

    tricks: list[str] = []
    task, names, outputs = predict(Path(args.checkpoint), args.inputs, top_k=args.top_k,
                                   trust_code=args.trust_model_code, plain=args.plain, tricks=tricks)
    if len(names) == 1 and args.out is None and task.name == "classification":  # one image: a readable ranking
        ranked = task.describe(outputs, top=args.top_k)[0]
        print(f"class {ranked[0][0]}  (p={ranked[0][1]:.4f})")
        for name, p in ranked:
            print(f"  {name:>12s}  {p:.4f}")
        _say_eval_tricks(tricks, args.plain)
        return 0
    header, rows = prediction_rows(task, names, outputs, args.top_k)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    if args.out is None:
        print(buf.getvalue(), end="")
    else:
        atomic_write_text(Path(args.out), buf.getvalue())
        print(f"{len(rows)} predictions written to {args.out}")
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

    pr = sub.add_parser("predict", help="predictions of a run (or checkpoint) for images, folders, globs or CSV rows",
                        description="Predict with a run's best.pt (or a checkpoint file). INPUT: image files, "
                        "folders (their images), glob patterns, or CSV files of feature rows (tabular runs). "
                        "One output row per input; one image alone prints its ranking.")
    pr.add_argument("checkpoint", metavar="RUN_DIR_OR_CHECKPOINT")
    pr.add_argument("inputs", nargs="+", metavar="INPUT")
    pr.add_argument("--top-k", "--top", dest="top_k", type=positive_int, default=5,
                    help="classes listed per input (default 5)")
    pr.add_argument("--out", metavar="CSV", help="write the predictions to this CSV file (default: print them)")
    pr.add_argument("--trust-model-code", action="store_true", help=_TRUST_HELP)
    pr.add_argument("--plain", action="store_true", help=_PLAIN_HELP)
    pr.set_defaults(func=cmd_predict)
