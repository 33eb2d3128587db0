"""``trickbag eval``, ``trickbag predict`` and ``trickbag export``: use a trained run."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from trickbag.cli._common import positive_int

__all__ = ["register"]

_TRUST_HELP = "allow a checkpoint whose recipe names model code (package.module:function) to run it"
_PLAIN_HELP = "leave out the recipe's evaluation tricks (flip TTA, the multi-scale test size)"


def cmd_eval(args: argparse.Namespace) -> int:
    from trickbag.runs.inference import evaluate_run

    tricks: list[str] = []
    m = evaluate_run(Path(args.run), split=args.split, device=args.device, trust_code=args.trust_model_code,
                     plain=args.plain, tricks=tricks, data=args.data)
    floats = {k: v for k, v in m.items() if isinstance(v, float) and k not in ("loss", "n")}
    first = next(iter(floats), "loss")
    where = args.split if args.data is None else args.data
    print(f"{where} {first} {m.get(first, m['loss']):.4f}  loss {m['loss']:.4f}  ({int(m['n'])} samples)")
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
    import sys

    from trickbag.runs.inference import predict, prediction_rows

    tricks: list[str] = []
    skipped: list[tuple[str, str]] | None = None if args.strict else []
    task, names, outputs = predict(Path(args.checkpoint), args.inputs, top_k=args.top_k,
                                   trust_code=args.trust_model_code, plain=args.plain, tricks=tricks,
                                   id_column=args.id_column, skipped=skipped)
    if len(names) == 1 and not skipped and args.out is None and task.name == "classification":  # a ranking
        ranked = task.describe(outputs, top=args.top_k)[0]
        print(f"class {ranked[0][0]}  (p={ranked[0][1]:.4f})")
        for name, p in ranked:
            print(f"  {name:>12s}  {p:.4f}")
        _say_eval_tricks(tricks, args.plain)
        return 0
    header, rows = prediction_rows(task, names, outputs, args.top_k)
    if args.id_column is not None:
        header[0] = args.id_column
    if skipped:
        header, rows = header + ["skipped"], [r + [""] for r in rows]
        rows += [[name] + [""] * (len(header) - 2) + [reason] for name, reason in skipped]
    _write_rows(header, rows, args.out)
    _say_eval_tricks(tricks, args.plain)
    for name, reason in skipped or []:
        print(f"trickbag: skipped {name}: {reason}", file=sys.stderr)
    if skipped:
        print(f"trickbag: {len(skipped)} of {len(skipped) + len(names)} inputs skipped (listed in the 'skipped' "
              "column); --strict stops at the first one instead", file=sys.stderr)
        return 1
    return 0


def _write_rows(header: list[str], rows: list[list[Any]], out: str | None) -> None:
    import csv
    import io

    from trickbag._files import atomic_write_text

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    if out is None:
        print(buf.getvalue(), end="")
    else:
        atomic_write_text(Path(out), buf.getvalue())
        print(f"{len(rows)} rows written to {out}")


def cmd_export(args: argparse.Namespace) -> int:
    from trickbag.runs.export import export_run

    tricks: list[str] = []
    out = export_run(Path(args.run), args.format, Path(args.out) if args.out else None, plain=args.plain,
                     trust_code=args.trust_model_code, tricks=tricks)
    print(f"exported {args.run} as {args.format} to {out} (model file, preprocess.json, README.md, recipe.yaml)")
    if tricks and args.format != "safetensors":
        print(f"  inside the model: {'; '.join(tricks)} (--plain leaves them out)")
    elif tricks:
        print(f"  safetensors holds the weights only: apply {'; '.join(tricks)} yourself (see README.md)")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    e = sub.add_parser("eval", help="metrics of a run's best.pt (or a checkpoint file)")
    e.add_argument("run", metavar="RUN_DIR_OR_CHECKPOINT")
    e.add_argument("--split", choices=["test", "val", "train"], default="test")
    e.add_argument("--data", metavar="CSV_OR_FOLDER", help="evaluate on new labelled data instead of a split: a CSV "
                   "with the run's columns (table runs) or a folder of class sub-folders (image-folder runs); "
                   "prepared with the run's stored preprocessing, the training data are not needed")
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
    pr.add_argument("--id-column", metavar="NAME", help="CSV inputs: name each output row by this column of the "
                    "input (e.g. a customer id) instead of FILE:ROW")
    pr.add_argument("--strict", action="store_true", help="stop at the first input that cannot be read (exit 2, "
                    "nothing written); by default such inputs are skipped, listed, and the exit status is 1")
    pr.add_argument("--trust-model-code", action="store_true", help=_TRUST_HELP)
    pr.add_argument("--plain", action="store_true", help=_PLAIN_HELP)
    pr.set_defaults(func=cmd_predict)

    ex = sub.add_parser("export", help="a run's model as a file that loads without trickbag, with preprocess.json",
                        description="Export a run's best.pt (or a checkpoint file) to a folder: the model file, "
                        "preprocess.json (input preparation, classes, output), README.md (how to load it) and the "
                        "recipe. torchscript / exported / onnx hold the whole prediction (table encoding, evaluation "
                        "tricks, softmax); safetensors holds the weights only (rebuild the architecture).")
    ex.add_argument("run", metavar="RUN_DIR_OR_CHECKPOINT")
    ex.add_argument("--format", required=True, choices=["torchscript", "onnx", "exported", "safetensors"],
                    help="torchscript: torch.jit.load; onnx: onnxruntime (pip install 'trickbag[export]'); exported: "
                    "torch.export.load; safetensors: weights only")
    ex.add_argument("--out", metavar="DIR", help="the folder to write (default: RUN_DIR/export-FORMAT); must not exist "
                    "or be empty")
    ex.add_argument("--trust-model-code", action="store_true", help=_TRUST_HELP)
    ex.add_argument("--plain", action="store_true", help=_PLAIN_HELP)
    ex.set_defaults(func=cmd_export)
