"""benchmarks/lint_corpus.py counts copies of one flagged snippet once (the 'distinct' columns of its verdict
table), so a report on copied scripts shows the mistakes (and false alarms) behind the raw counts."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "lint_corpus.py"

LEAK = """
    def train(model, optimizer, loader, loss_fn):
        total = 0.0
        for x, y in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss{tail}
        return total
"""


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def test_copies_of_one_snippet_count_once(tmp_path):
    corpus = tmp_path / "corpus"
    # one leak copied into three scripts of two repositories, and a different leak elsewhere
    for repo, rel in (("a", "train.py"), ("a", "scripts/train_copy.py"), ("b", "train.py")):
        _write(corpus / repo / rel, LEAK.format(tail=""))
    _write(corpus / "b" / "other.py", LEAK.format(tail="\n        print(total)").replace("total = 0.0", "total = 0"))
    rows = ["repo\trelpath\tline\tcode\tverdict\treason"]
    rows += [f"{repo}\t{rel}\t9\tTB204\tTP\tleak" for repo, rel in
             (("a", "train.py"), ("a", "scripts/train_copy.py"), ("b", "train.py"))]
    rows.append("b\tother.py\t9\tTB204\tFP\tjudged false for the test")
    verdicts = tmp_path / "verdicts.tsv"
    verdicts.write_text("\n".join(rows) + "\n")
    proc = subprocess.run([sys.executable, str(SCRIPT), str(corpus), "--verdicts", str(verdicts), "--rounds", "1",
                           "--warmup", "0"], capture_output=True, text=True, timeout=300, cwd=SCRIPT.parents[1])
    assert proc.returncode == 0, proc.stderr[-2000:]
    verdict_table = proc.stdout.split("## Verdicts per rule")[1]
    row = next(line for line in verdict_table.splitlines() if line.startswith("| TB204"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # rule, findings, TP, FP, ?, not judged, FP %, distinct TP / FP, distinct FP %
    assert cells[1:4] == ["4", "3", "1"]
    assert cells[7] == "1 / 1"
    assert cells[8] == "50 %"
