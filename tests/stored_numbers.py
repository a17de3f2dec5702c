"""Whether the stored notebooks still print what the committed run gives: every number, not only the verdicts.

``notebooks/`` stores the outputs of the committed cpu run (`papa.reproduce.stored`). A later change to that run (a
draw added, a ranking relearned, a reader changed) leaves a notebook that was not re-executed printing stale
numbers. The test suite executes each stored notebook once, as stored, in a kernel started in a `replay_folder`:
beside a copy of the run's folder, where every probe run, ranking and constant is cached, so nothing is trained
(the root ``conftest.py`` hands the notebooks so to nbval). `cell_difference` compares what a cell prints then with
what it stored: the text/plain of its results and displays and its standard output, as printed (both sides round
alike), after `SANITIZERS` mask what legitimately differs between two executions (durations). `changed_files`
says what the rerun wrote into the copy that is not the run's own bytes.

The few cells not replayed are named in `NOT_REPLAYED` by a piece of their source, each with why.
"""
from __future__ import annotations

import difflib
import os
import re
import shutil
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from papa.core.errors import InputError
from papa.core.vocabulary import NOTEBOOKS
from papa.reproduce.batch import NOTEBOOK_DIR
from papa.reproduce.notebooks import default_parameters, no_progress_bars

#: Cells not replayed, by a piece of their source: what they print is not read from the run, and replaying them
#: would cost minutes or print this machine's speed. A cell that only reads what one of them computed is here too.
NOT_REPLAYED: dict[str, str] = {
    "forward_timings(": "01's forward timings: seconds measured on the machine that runs it",
    "section.scoring_speed(": "08's scoring speed: seconds measured on the machine that runs it",
    "section.hidden_state_scale(": "08's hidden-state scale reads the texts the speed cell loads (the model's "
                                    "activations, not the run's results)",
    "section.check_table(scale,": "08's check of the hidden-state scale, which is not replayed",
    "section.probe_diagnosis(": "08's probe diagnosis trains two probes afresh (about two minutes); its table is "
                                 "the run's tables/decoder_probe_diagnosis.csv",
    "section.check_table(diagnosis": "08's check of the probe diagnosis, which is not replayed",
}

#: (pattern, replacement): what differs between two executions of the same cell on the same run.
SANITIZERS: tuple[tuple[re.Pattern, str], ...] = (
    (re.compile(r"\b\d+(\.\d+)?\s?(s|ms)\b"), "<duration>"),  # "cola: 1s", "(2s)": wall time of a cached grid
    # constants whose tensors are not committed (the decoder's) are extracted again: the same file, said otherwise
    (re.compile(r"constants: extracted (.+?) -> (\S+)"), r"constants: read \2 (\1)"),
)

#: What `replay` leaves out of its copy of the run: the executed notebooks and the per-process phase times.
NOT_COPIED = shutil.ignore_patterns("notebooks", "phase_times")


def printed(cell: Mapping) -> str:
    """What a code cell shows as text, as one string: its standard output (the chunks joined, however the kernel cut
    them), the text/plain of each result and display, an error's name and message; stderr (warnings, bars) left
    out; `SANITIZERS` applied."""
    parts, stream = [], []
    for out in cell.get("outputs", []):
        kind = out.get("output_type")
        if kind == "stream":
            if out.get("name") == "stdout":
                stream.append(_text(out.get("text", "")))
            continue
        if stream:
            parts.append("".join(stream))
            stream = []
        if kind in ("execute_result", "display_data"):
            parts.append(_text(out.get("data", {}).get("text/plain", "")))
        elif kind == "error":
            parts.append(f"{out.get('ename')}: {out.get('evalue')}")
    if stream:
        parts.append("".join(stream))
    text = "\n".join(p.rstrip("\n") for p in parts)
    for pattern, replacement in SANITIZERS:
        text = pattern.sub(replacement, text)
    return text


def _text(value: str | Sequence[str]) -> str:
    return value if isinstance(value, str) else "".join(value)


def not_replayed(source: str) -> str | None:
    """Why the cell with `source` is not replayed (`NOT_REPLAYED`), or None."""
    return next((why for piece, why in NOT_REPLAYED.items() if piece in source), None)


def code_cells(nb: Mapping) -> list[Mapping]:
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


def cell_difference(stored: Mapping, outputs: Sequence[Mapping]) -> list[str]:
    """The lines in which what the stored code cell `stored` printed (`printed`) and what it printed again (its new
    `outputs`) differ, as a unified diff's changed lines ("-" stored, "+" again); empty when they agree."""
    before, after = printed(stored), printed({"outputs": outputs})
    if before == after:
        return []
    return [line for line in difflib.unified_diff(before.splitlines(), after.splitlines(), "stored", "replayed", n=0,
                                                  lineterm="")
            if line.startswith(("-", "+")) and not line.startswith(("---", "+++"))]


def differences(name: str, stored: Mapping, replayed: Mapping) -> list[str]:
    """Each code cell of notebook `name` whose stored print (`printed`) differs from the replayed one, as a message
    naming the cell (its first line) and the lines that differ; cells not replayed are skipped. Both notebooks must
    hold the same sources (the replay executed the stored one)."""
    ours, theirs = code_cells(stored), code_cells(replayed)
    if [_text(c["source"]) for c in ours] != [_text(c["source"]) for c in theirs]:
        raise InputError(f"{name}: the replayed notebook's cells are not the stored ones: replay the stored notebook")
    found = []
    for i, (cell, again) in enumerate(zip(ours, theirs)):
        source = _text(cell["source"])
        diff = [] if not_replayed(source) else cell_difference(cell, again.get("outputs", []))
        if diff:
            first = source.strip().splitlines()[0] if source.strip() else ""
            found.append(f"{name} code cell {i} ({first[:80]}):\n  " + "\n  ".join(diff[:12]))
    return found


def replay_folder(run_dir: str | Path, work_dir: str | Path, names: Sequence[str] = NOTEBOOKS,
                  notebook_dir: str | Path = NOTEBOOK_DIR) -> Path:
    """Copy the run in `run_dir` to where the stored notebooks `names` write (their one ``out_dir``, seen from
    ``work_dir/notebooks``), and return ``work_dir/notebooks``: a kernel started there runs a stored notebook as it is
    on the copy, so the run itself is never written. Refused where the notebooks name several folders, or one outside
    `work_dir`."""
    work = Path(work_dir).resolve()
    here = work / "notebooks"
    targets = {(here / default_parameters(name, notebook_dir)["out_dir"]).resolve() for name in names}
    if len(targets) != 1 or not next(iter(targets)).is_relative_to(work):
        raise InputError(f"the notebooks {', '.join(names)} must all write into one folder beside their own "
                         "(out_dir = \"../artifacts/<profile>\") for a replay to run on a copy of the run")
    here.mkdir(parents=True, exist_ok=True)
    shutil.copytree(run_dir, next(iter(targets)), dirs_exist_ok=True, ignore=NOT_COPIED)
    return here


def changed_files(run_dir: str | Path, copy_dir: str | Path, since_ns: int = 0) -> tuple[list[str], list[str]]:
    """What a replay changed in its copy of a run: (the files whose bytes now differ from the run's own, the files
    the replay added), as paths relative to the run folder (the folders `NOT_COPIED` left out); with `since_ns`, only
    the files modified at or after that time (``time.time_ns()``) are looked at."""
    run, copy = Path(run_dir), Path(copy_dir)
    skipped = set(NOT_COPIED(str(run), [p.name for p in run.iterdir()]))
    changed, added = [], []
    for path in sorted(p for p in copy.rglob("*") if p.is_file()):
        rel = path.relative_to(copy)
        if rel.parts[0] in skipped or path.stat().st_mtime_ns < since_ns:
            continue
        own = run / rel
        if not own.is_file():
            added.append(rel.as_posix())
        elif own.read_bytes() != path.read_bytes():
            changed.append(rel.as_posix())
    return changed, added


@contextmanager
def batch_environment() -> Iterator[None]:
    """While a kernel is started: it draws no progress bar, as a batch run's kernels do
    (`papa.reproduce.notebooks.no_progress_bars`), and imports this papa, the one replaying (a checkout other than the
    installed one)."""
    import papa

    here = str(Path(papa.__file__).resolve().parents[1])
    paths = [here, *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != here]]
    with no_progress_bars({"PYTHONPATH": os.pathsep.join(paths)}):
        yield
