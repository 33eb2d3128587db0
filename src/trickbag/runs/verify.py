"""``trickbag verify-resume``: prove on a recipe that a run killed with SIGKILL and resumed ends bit-identical.

The recipe is trained twice, in real child processes (``python -m trickbag train``): once without
interruption (the reference) and once killed with SIGKILL at random points, each kill followed by
``trickbag train --resume``. The kill points come from ``random.Random(seed)``: kill ``i`` of ``N``
aims at a random point of the ``i``-th ``N``-th of training; it is a delay, counted from the moment the
child starts training (its ``recipe.yaml`` is written), of the reference's training time between the
checkpoint the child resumed from and that point. Nothing in the training code knows it is being
tested: the children are ordinary ``trickbag train`` processes.

The final ``checkpoints/last.pt`` and ``best.pt`` of both runs are compared in every entry (weights,
EMA weights, optimizer state, scheduler, counters, history, plug-in states, RNG states, the recipe
but its ``run.name``/``run.dir``), and ``metrics.csv`` in every row; only timings are ignored (the
columns ``train/samples_per_s``, ``train/epoch_time_s`` and the run's wall time ``plugins/clock``).
The result is a :class:`Certificate`.
"""

from __future__ import annotations

import csv
import io
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from trickbag.errors import TrickbagError

__all__ = ["Difference", "Kill", "Certificate", "VerifyError", "verify_resume", "compare_checkpoints",
           "compare_metrics", "compare_runs", "TIME_KEYS", "TIME_PATHS"]

#: metrics that measure time: the only values allowed to differ between two identical runs
TIME_KEYS = ("train/samples_per_s", "train/epoch_time_s")
#: entries of a checkpoint that measure time too (the run's wall time, summed over its sessions)
TIME_PATHS = ("plugins/clock/wall_time_s",)
#: the files of a run compared, relative to its directory
CHECKPOINTS = ("checkpoints/last.pt", "checkpoints/best.pt")
POLL_S = 0.02  # how often a child's progress is looked at
_SHOWN = 20  # differences listed on the terminal (certificate.md lists all)


class VerifyError(TrickbagError):
    """The reference run could not be made; exit status 2 when the child found bad input, else 1."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class Difference:
    """One place where the resumed run differs from the reference: ``where`` and what differs."""

    where: str
    detail: str


@dataclass
class Kill:
    """One SIGKILL of the killed run: its delay after training began, and where the run stood."""

    number: int
    delay_s: float
    aim: float  # the fraction of training it aimed at
    checkpoint: str  # the checkpoint the resume continues from ('' when none)
    landed: str
    killed: bool = True  # False: the run had ended before this kill's time came


@dataclass
class Certificate:
    """What ``verify-resume`` did and found; :meth:`render` is the printed table."""

    command: str
    settings: str
    out_dir: Path
    reference_s: float = 0.0
    kills: list[Kill] = field(default_factory=list)
    compared: list[str] = field(default_factory=list)
    differences: list[Difference] = field(default_factory=list)
    failure: str | None = None

    @property
    def identical(self) -> bool:
        return self.failure is None and not self.differences

    @property
    def exit_code(self) -> int:
        return 0 if self.identical else 1

    def verdict(self) -> str:
        if self.failure is not None:
            return f"verdict: NOT VERIFIED: {self.failure}"
        n = sum(k.killed for k in self.kills)
        if self.differences:
            return (f"verdict: DIFFERENT: the run killed {n} time(s) and resumed differs from the uninterrupted "
                    f"run in {len(self.differences)} place(s)")
        if n == 0:
            return ("verdict: IDENTICAL, but no kill landed while the run trained, so nothing was resumed: "
                    "try another --seed or more --kills")
        return (f"verdict: IDENTICAL: killed {n} time(s) with SIGKILL and resumed, the run ended bit-identical to "
                "the uninterrupted one (every tensor of last.pt and best.pt, every row of metrics.csv but timings)")

    def render(self, limit: int | None = None) -> str:
        """The certificate as Markdown text; ``limit`` caps the differences listed."""
        lines = [f"# trickbag verify-resume: {self.command}", "", f"settings: {self.settings}",
                 f"runs: {self.out_dir / 'runs'} (reference, killed); logs: {self.out_dir / 'logs'}",
                 f"reference run: {self.reference_s:.1f} s from the start of training to its last checkpoint", "",
                 "| kill | after training began | resumed from | where the kill landed |",
                 "|---|---|---|---|"]
        lines += [f"| {k.number} | {k.delay_s:.2f} s (aimed at {k.aim:.0%}) | {k.checkpoint or '-'} | {k.landed} |"
                  for k in self.kills]
        lines += ["", "compared: " + ("; ".join(self.compared) or "nothing"),
                  f"ignored: timings ({', '.join((*TIME_KEYS, *TIME_PATHS))}), the recipe's run.name and run.dir", ""]
        shown = self.differences if limit is None else self.differences[:limit]
        lines.append("differences: none" if not self.differences else f"differences ({len(self.differences)}):")
        lines += [f"- {d.where}: {d.detail}" for d in shown]
        if len(shown) < len(self.differences):
            lines.append(f"- ... {len(self.differences) - len(shown)} more in {self.out_dir / 'certificate.md'}")
        return "\n".join(lines + ["", self.verdict()]) + "\n"


# --------------------------------------------------------------------------- comparison
def _tensor_difference(a: Any, b: Any) -> str | None:
    """None when two tensors are equal (NaN equals NaN), else what differs (max abs difference)."""
    import torch

    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return f"{type(a).__name__} vs {type(b).__name__}"
    if a.dtype != b.dtype or a.shape != b.shape:
        return f"{a.dtype} {list(a.shape)} vs {b.dtype} {list(b.shape)}"
    if torch.equal(a, b):
        return None
    x, y = a.detach().cpu(), b.detach().cpu()
    if x.dtype == torch.bool:
        x, y = x.to(torch.int64), y.to(torch.int64)
    if x.is_complex():
        x, y = torch.view_as_real(x), torch.view_as_real(y)
    differ = x != y
    if x.is_floating_point():
        differ &= ~(x.isnan() & y.isnan())
    if not differ.any():
        return None
    gap = (x.to(torch.float64) - y.to(torch.float64)).abs()[differ].max().item()
    return f"max abs difference {gap:.3g} ({int(differ.sum())} of {x.numel()} elements)"


def _tree_differences(a: Any, b: Any, where: str) -> list[Difference]:
    """Every place where two checkpoint trees differ; timings (:data:`TIME_KEYS`, :data:`TIME_PATHS`) are skipped."""
    import torch

    if where in TIME_PATHS:
        return []
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        detail = _tensor_difference(a, b)
        return [] if detail is None else [Difference(where, detail)]
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        path = lambda k: f"{where}/{k}" if where else str(k)  # noqa: E731
        for name, keys in (("the reference", set(a) - set(b)), ("the resumed run", set(b) - set(a))):
            only = sorted(str(k) for k in keys if k not in TIME_KEYS and path(k) not in TIME_PATHS)
            if only:
                out.append(Difference(where or "/", f"keys only in {name}: {only}"))
        for k in a:
            if k in b and k not in TIME_KEYS:
                out += _tree_differences(a[k], b[k], path(k))
        return out
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return [Difference(where, f"length {len(a)} vs {len(b)}")]
        return [d for i, (u, v) in enumerate(zip(a, b)) for d in _tree_differences(u, v, f"{where}[{i}]")]
    nan = isinstance(a, float) and isinstance(b, float) and a != a and b != b
    same = nan or (type(a) is type(b) and a == b)
    return [] if same else [Difference(where, f"{a!r} vs {b!r}")]


def _count_tensors(tree: Any) -> int:
    import torch

    if isinstance(tree, torch.Tensor):
        return 1
    if isinstance(tree, dict):
        return sum(_count_tensors(v) for v in tree.values())
    if isinstance(tree, (list, tuple)):
        return sum(_count_tensors(v) for v in tree)
    return 0


def _without_run_location(ckpt: dict[str, Any]) -> dict[str, Any]:
    """``ckpt`` with its recipe's ``run.name`` and ``run.dir`` blanked (the two runs differ there by design)."""
    recipe = ckpt.get("recipe")
    if isinstance(recipe, dict) and isinstance(recipe.get("run"), dict):
        recipe = {**recipe, "run": {**recipe["run"], "name": None, "dir": None}}
        return {**ckpt, "recipe": recipe}
    return ckpt


def compare_checkpoints(reference: Path, resumed: Path, label: str = "") -> tuple[int, list[Difference]]:
    """(tensors compared, differences) between two checkpoint files, loaded with ``weights_only``.

    Every entry counts: model, eval_model, optimizer, scheduler, scaler, counters, history, plug-in
    states, RNG states, the recipe (but ``run.name``/``run.dir``); timing metrics are skipped.
    """
    from trickbag.train.checkpoint_files import load_checkpoint

    label = label or Path(resumed).name
    a = _without_run_location(load_checkpoint(reference))
    b = _without_run_location(load_checkpoint(resumed))
    return _count_tensors(a), [Difference(f"{label} {d.where}", d.detail) for d in _tree_differences(a, b, "")]


def _read_metrics(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """(header, rows) of a metrics.csv without the timing columns."""
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    header = rows[0] if rows else []
    keep = [i for i, name in enumerate(header) if name not in TIME_KEYS]
    body = [{header[i]: (r[i] if i < len(r) else "<missing>") for i in keep} for r in rows[1:]]
    return [header[i] for i in keep], body


def _row_label(number: int, row: dict[str, str]) -> str:
    where = ", ".join(f"{k} {row[k]}" for k in ("epoch", "step") if row.get(k))
    return f"metrics.csv row {number}" + (f" ({where})" if where else "")


def compare_metrics(reference: Path, resumed: Path) -> tuple[int, list[Difference]]:
    """(rows compared, differences) between two metrics.csv files, ignoring only :data:`TIME_KEYS`.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "a.csv").write_text("epoch,step,val/acc,train/epoch_time_s\\n0,6,0.8,1.5\\n1,12,0.9,1.4\\n")
    >>> _ = (d / "b.csv").write_text("epoch,step,val/acc,train/epoch_time_s\\n0,6,0.8,1.9\\n1,12,0.7,1.4\\n")
    >>> n, found = compare_metrics(d / "a.csv", d / "b.csv")
    >>> n, [f"{x.where}: {x.detail}" for x in found]
    (2, ["metrics.csv row 2 (epoch 1, step 12): val/acc '0.9' vs '0.7'"])
    """
    head_a, rows_a = _read_metrics(reference)
    head_b, rows_b = _read_metrics(resumed)
    out = []
    if head_a != head_b:
        out.append(Difference("metrics.csv header", f"{head_a} vs {head_b}"))
    for i in range(max(len(rows_a), len(rows_b))):
        if i >= len(rows_a) or i >= len(rows_b):
            which, row = ("the reference", rows_a[i]) if i < len(rows_a) else ("the resumed run", rows_b[i])
            out.append(Difference(_row_label(i + 1, row), f"only in {which}: {row}"))
            continue
        a, b = rows_a[i], rows_b[i]
        cells = [f"{k} {a.get(k, '<none>')!r} vs {b.get(k, '<none>')!r}" for k in dict.fromkeys([*a, *b])
                 if a.get(k) != b.get(k)]
        if cells:
            out.append(Difference(_row_label(i + 1, a), "; ".join(cells)))
    return len(rows_a), out


def compare_runs(reference: Path, resumed: Path) -> tuple[list[str], list[Difference]]:
    """(what was compared, differences) between two run directories: last.pt, best.pt, metrics.csv."""
    compared: list[str] = []
    out: list[Difference] = []
    for rel in (*CHECKPOINTS, "metrics.csv"):
        a, b = Path(reference, rel), Path(resumed, rel)
        if not a.exists() and not b.exists():
            compared.append(f"{rel} (in neither run)")
            continue
        if not (a.exists() and b.exists()):
            out.append(Difference(rel, f"only in {'the reference' if a.exists() else 'the resumed run'}"))
            continue
        if rel == "metrics.csv":
            n, found = compare_metrics(a, b)
            compared.append(f"metrics.csv ({n} rows, timing columns ignored)")
        else:
            n, found = compare_checkpoints(a, b, Path(rel).name)
            compared.append(f"{Path(rel).name} ({n} tensors)")
        out += found
    return compared, out


# --------------------------------------------------------------------------- child processes
def _start(argv: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """``python -m trickbag ARGV`` in its own process group (workers die with it), output into ``log``;
    ``env`` is added to this process's environment."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as fh:
        fh.write(f"$ trickbag {' '.join(argv)}\n".encode())
        fh.flush()
        return subprocess.Popen([sys.executable, "-m", "trickbag", *argv], stdout=fh, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, env={**os.environ, **(env or {})})


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns


def _wait_training(proc: subprocess.Popen, run_dir: Path, before: tuple[int, int] | None) -> bool:
    """Wait until the child has written its ``recipe.yaml`` (training begins); False if it ended first."""
    recipe = run_dir / "recipe.yaml"
    while proc.poll() is None:
        now = _identity(recipe)
        if now is not None and now != before:
            return True
        time.sleep(POLL_S)
    return False


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (Linux ``/proc``): torchrun starts its workers in sessions of their own."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found, frontier = [], [pid]
    while frontier:
        children = [c for c, p in parents.items() if p in frontier]
        found += children
        frontier = children
    return found


def _kill(proc: subprocess.Popen) -> None:
    """SIGKILL the child's whole process group and every process below it (all ranks of a several-process run
    at once) and wait until they are gone (at most a few seconds)."""
    below = _descendants(proc.pid) if Path("/proc").is_dir() else []
    for target in [proc.pid, *below]:
        try:
            os.killpg(target, signal.SIGKILL) if target == proc.pid else os.kill(target, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    proc.wait()
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        alive = [p for p in below if Path(f"/proc/{p}").exists() and _running(p)]
        try:
            os.killpg(proc.pid, 0)
        except (ProcessLookupError, PermissionError):
            if not alive:
                return
        time.sleep(POLL_S)


def _running(pid: int) -> bool:
    """Whether ``pid`` is alive and not a zombie waiting for its parent."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _last_line(log: Path) -> str:
    lines = [ln for ln in log.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    return lines[-1].strip() if lines else "(no output)"


def _landing(run_dir: Path, updates: int = 0) -> tuple[str, str, int]:
    """(checkpoint name, where it stands, update) of the checkpoint ``--resume`` will continue from
    (``updates``: the reference's total, to say when training was already done)."""
    from trickbag.errors import CheckpointError
    from trickbag.runs.naming import find_resume_checkpoint

    try:
        found = find_resume_checkpoint(run_dir, out=io.StringIO())
    except CheckpointError as exc:
        return "", f"no readable checkpoint ({exc})", 0
    if found is None:
        return "", "before the first checkpoint (the resume starts over)", 0
    path, ckpt = found
    c = ckpt.get("counters", {})
    epoch, batch, step = int(c.get("epoch", 0)), int(c.get("batch_idx") or 0), int(c.get("step", 0))
    where = f"end of epoch {epoch}, update {step}" if batch == 0 else f"epoch {epoch + 1}, batch {batch}, update {step}"
    if updates and step >= updates and batch == 0:
        where += " (training was done: killed while finishing)"
    return path.name, where, step


# --------------------------------------------------------------------------- the two runs
@dataclass
class _Plan:
    """What both runs share: the child's arguments, where things go, the random kill points."""

    recipe_name: str | None
    overrides: list[str]
    out_dir: Path
    rng: random.Random
    train_s: float = 0.0
    updates: int = 0
    aims: list[float] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  #: added to the children's environment

    def aim(self, kills: int) -> None:
        """Kill ``i`` aims at a random point of the ``i``-th ``kills``-th of training (fractions, sorted)."""
        self.aims = [(i + self.rng.random()) / kills for i in range(kills)]

    def start_argv(self, name: str) -> list[str]:
        runs = self.out_dir / "runs"
        head = [self.recipe_name] if self.recipe_name else []
        return ["train", *head, *self.overrides, f"run.dir={runs}", f"run.name={name}", "--quiet"]


def _run_reference(plan: _Plan, say: TextIO) -> float:
    """Train the reference to the end; the seconds from its start of training to its last checkpoint."""
    from trickbag.train.checkpoint_files import load_checkpoint

    run_dir, log = plan.out_dir / "runs" / "reference", plan.out_dir / "logs" / "reference.log"
    print(f"verify-resume: training the reference (log: {log})", file=say, flush=True)
    proc = _start(plan.start_argv("reference"), log, plan.env)
    try:
        started = _wait_training(proc, run_dir, None)
        t0 = time.monotonic()
        rc = proc.wait()
    finally:
        if proc.poll() is None:
            _kill(proc)
    if rc != 0 or not started:
        raise VerifyError(f"the reference run failed (exit {rc}): {_last_line(log)} (log: {log})",
                          exit_code=2 if rc == 2 else 1)
    files = [p.stat().st_mtime for p in [*run_dir.glob("checkpoints/*.pt"), run_dir / "metrics.csv"] if p.is_file()]
    plan.train_s = max(files) - (run_dir / "recipe.yaml").stat().st_mtime if files else time.monotonic() - t0
    last = run_dir / "checkpoints" / "last.pt"
    plan.updates = int(load_checkpoint(last)["counters"]["step"]) if last.exists() else 0
    return plan.train_s


def _kill_once(plan: _Plan, proc: subprocess.Popen, number: int, position: int) -> tuple[Kill, bool]:
    """Kill ``proc`` after a random delay once it trains; (the kill, whether the run is still unfinished)."""
    run_dir = plan.out_dir / "runs" / "killed"
    aim = plan.aims[number - 1]
    done = position / plan.updates if plan.updates else 0.0
    delay = plan.train_s * max(aim - done, 0.0)
    try:
        rc = proc.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        _kill(proc)
        name, where, _ = _landing(run_dir, plan.updates)
        return Kill(number, delay, aim, name, where), True
    landed = "finished before the kill" if rc == 0 else f"the run failed on its own (exit {rc})"
    return Kill(number, delay, aim, "", landed, killed=False), False


def _run_killed(plan: _Plan, cert: Certificate, kills: int, say: TextIO) -> None:
    """Train the recipe again, SIGKILLed ``kills`` times and resumed after each; fills ``cert.kills``."""
    run_dir, logs = plan.out_dir / "runs" / "killed", plan.out_dir / "logs"
    argv, position, rc = plan.start_argv("killed"), 0, None
    for number in range(1, kills + 2):
        log = logs / f"killed-{number}.log"
        before = _identity(run_dir / "recipe.yaml")
        proc = _start(argv, log, plan.env)
        try:
            if number > kills:  # the last resume runs to the end
                rc = proc.wait(timeout=max(120.0, 20 * plan.train_s + 60))
            elif not _wait_training(proc, run_dir, before):
                rc = proc.wait()
            else:
                kill, unfinished = _kill_once(plan, proc, number, position)
                cert.kills.append(kill)
                print(f"verify-resume: kill {number}: {kill.landed}", file=say, flush=True)
                rc = proc.returncode
                if unfinished:
                    position = _landing(run_dir)[2]
                    argv = ["train", "--resume", str(run_dir), "--quiet"]
                    continue
        except subprocess.TimeoutExpired:
            rc = None
        finally:
            if proc.poll() is None:
                _kill(proc)
        break
    skipped = range(len(cert.kills) + 1, kills + 1)
    cert.kills += [Kill(n, 0.0, plan.aims[n - 1], "", "not made: the run had finished", killed=False)
                   for n in skipped]
    if rc is None:
        cert.failure = f"the last resume did not finish in time (log: {log})"
    elif rc != 0:
        cert.failure = f"the killed run did not finish (exit {rc}): {_last_line(log)} (log: {log})"


def _check_request(recipe_name: str | None, overrides: list[str], kills: int) -> Any:
    """The recipe (validated in this process: bad input is one line, before anything runs)."""
    from trickbag.recipe import load_recipe

    if isinstance(kills, bool) or not isinstance(kills, int) or kills < 1:
        raise TrickbagError(f"--kills must be an integer >= 1, got {kills!r}")
    for item in overrides:
        key = item.split("=", 1)[0].strip()
        if key in ("run.dir", "run.name"):
            raise TrickbagError(f"verify-resume chooses {key} itself (under --out); drop {item!r}")
    recipe = load_recipe(recipe_name, [*overrides, "run.dir=runs", "run.name=reference"])
    if recipe.dist.nproc > 1 and not Path("/proc").is_dir():
        raise TrickbagError(f"verify-resume with dist.nproc={recipe.dist.nproc} finds torchrun's workers through "
                            "/proc (Linux): they live in their own sessions and would outlive a SIGKILL of the "
                            "launcher; allowed here: dist.nproc=1")
    return recipe


def _thread_env(recipe: Any) -> dict[str, str]:
    """``OMP_NUM_THREADS`` for the children when ``train.threads`` is ``auto`` and the variable is unset.

    ``auto`` follows the load, and the thread count can change the last bits of a CPU reduction; both
    runs (and every resume) must keep one count, so it is decided once here and handed down.
    """
    if recipe.train.threads != "auto" or os.environ.get("OMP_NUM_THREADS"):
        return {}
    from trickbag import runtime

    auto = runtime.AutoThreads()
    return {"OMP_NUM_THREADS": str(auto.start())}


def _choose_out_dir(out: str | None, recipe_name: str) -> Path:
    """``out`` when given (refused if it holds files), else a fresh ``./verify-resume-<recipe>[-N]``."""
    if out is not None:
        path = Path(out).expanduser()
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            raise TrickbagError(f"--out {out!r} already exists and is not an empty folder; give a new folder")
        return path
    base = Path(f"verify-resume-{recipe_name}")
    path, n = base, 1
    while path.exists():
        n += 1
        path = Path(f"{base}-{n}")
    return path


def verify_resume(recipe_name: str | None, overrides: list[str], *, kills: int = 3, seed: int = 0,
                  out: str | None = None, say: TextIO | None = None) -> Certificate:
    """Train ``recipe_name`` uninterrupted and ``kills`` times SIGKILLed + resumed, compare, certify.

    Writes the two runs, the children's logs and ``certificate.md`` into the output folder (default
    ``./verify-resume-<recipe>``, a fresh name if it exists) and returns the :class:`Certificate`.
    Bad input (unknown recipe key, ``kills < 1``, an existing ``out``) raises :class:`TrickbagError`
    before anything runs.
    """
    from trickbag._files import atomic_write_text

    say = say if say is not None else sys.stderr
    recipe = _check_request(recipe_name, list(overrides), kills)
    out_dir = _choose_out_dir(out, recipe.name)
    out_dir.mkdir(parents=True, exist_ok=True)
    plan = _Plan(recipe_name, list(overrides), out_dir.resolve(), random.Random(seed), env=_thread_env(recipe))
    command = " ".join([recipe_name or "digits", *overrides, f"--kills {kills}", f"--seed {seed}"])
    settings = (f"train.deterministic={str(recipe.train.deterministic).lower()}, "
                f"data.num_workers={recipe.data.num_workers}, train.device={recipe.train.device}, "
                f"train.checkpoint_every_steps={recipe.train.checkpoint_every_steps}, "
                f"OMP_NUM_THREADS={plan.env.get('OMP_NUM_THREADS') or os.environ.get('OMP_NUM_THREADS', 'unset')}"
                + (" (chosen once for both runs: train.threads=auto)" if plan.env else ""))
    cert = Certificate(command, settings, out_dir)
    plan.aim(kills)
    cert.reference_s = _run_reference(plan, say)
    _run_killed(plan, cert, kills, say)
    if cert.failure is None:
        cert.compared, cert.differences = compare_runs(out_dir / "runs" / "reference", out_dir / "runs" / "killed")
    atomic_write_text(out_dir / "certificate.md", cert.render())
    return cert
