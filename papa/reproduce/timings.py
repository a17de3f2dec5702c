"""How long a batch run of the notebooks takes: what each run records, and what `papa reproduce` says to expect.

A run records each notebook's time in ``notebook_times.csv`` and itself in ``reproduction.json``; a run from an
empty folder, copied to ``artifacts/timings/<profile>/``, is the reference `papa reproduce` quotes.
"""
from __future__ import annotations

import json
import os
import platform
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from papa.core.artifacts import FORMAT, atomic_path, check_format, write_table
from papa.core.errors import InputError
from papa.core.run_folder import RunFolder
from papa.core.vocabulary import NOTEBOOKS, RUN_PHASES

#: The two files of a reference run, as its page names them.
REFERENCE_FILES = f"{RunFolder(Path()).notebook_times.name}, {RunFolder(Path()).run_record.name}"
#: The columns of ``notebook_times.csv``.
TIME_COLUMNS = ["notebook", "profile", "seconds", "output", "new_runs"]
#: The committed reference runs, one folder per profile (``artifacts/timings/<profile>/``).
REFERENCE_DIR = Path(__file__).resolve().parents[2] / "artifacts" / "timings"


# ---- what a run records ----------------------------------------------------------------------------------------

def read_notebook_times(path: str | Path) -> pd.DataFrame:
    """A ``notebook_times.csv``, checked: the columns `TIME_COLUMNS`."""
    path = Path(path)
    times = pd.read_csv(path)
    missing = set(TIME_COLUMNS) - set(times.columns)
    if missing:
        raise InputError(f"{path} lacks the columns {sorted(missing)}; move it aside and run again.")
    return times[TIME_COLUMNS]


def record_notebook_time(folder: RunFolder, row: dict) -> pd.DataFrame:
    """Add one notebook's time to ``notebook_times.csv``, replacing that notebook's earlier row (rows in the
    sections' order)."""
    if set(row) != set(TIME_COLUMNS):
        raise ValueError(f"a notebook's time row has the fields {TIME_COLUMNS}, got {sorted(row)}")
    path = folder.notebook_times
    times = read_notebook_times(path) if path.exists() else pd.DataFrame(columns=TIME_COLUMNS)
    times = pd.concat([times[times["notebook"] != row["notebook"]], pd.DataFrame([row])], ignore_index=True)
    order = {name: i for i, name in enumerate(NOTEBOOKS)}
    times = times.sort_values("notebook", key=lambda s: s.map(lambda n: order.get(n, len(order))), kind="stable")
    write_table(times[TIME_COLUMNS], path, index=False)
    return times.reset_index(drop=True)


def notebook_time(folder: RunFolder) -> str:
    """One sentence of the run's notebook times: the total, each notebook's, and the probe runs computed."""
    path = folder.notebook_times
    times = read_notebook_times(path)
    each = ", ".join(f"{name.split('_')[0]} {seconds:,.0f} s" for name, seconds in zip(times.notebook, times.seconds))
    computed = int(times.new_runs.sum())
    runs = "; every probe run cached" if computed == 0 else f"; {computed:,} probe runs computed"
    return (f"`{path.as_posix()}` records {times.seconds.sum():,.0f} s of notebook execution in its last run of each "
            f"notebook ({each}{runs}).")


def result_rows(folder: RunFolder) -> int:
    """How many probe runs ``results.csv`` holds (0 when there is none)."""
    from papa.runs.results import ResultsTable

    path = folder.results
    return len(ResultsTable(path).read()) if path.is_file() else 0


def cpu_model() -> str:
    """The CPU's model name (platform.processor() is empty on many Linux machines: /proc/cpuinfo first)."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        names = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text(errors="replace").splitlines()
                 if line.startswith("model name")]
        if names:
            return names[0]
    return platform.processor() or platform.machine()


def machine() -> dict:
    """What the run ran on: the CPU's model name, its logical cores, the threads torch uses, OS, Python, torch."""
    import torch

    return {"cpu": cpu_model(), "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "platform": platform.platform(), "python": platform.python_version(), "torch": torch.__version__}


def record_run(folder: RunFolder, *, profile: str, names: Sequence[str], seconds: float,
               started_empty: bool, device: str, command: str, phases: dict[str, float]) -> dict:
    """Write ``reproduction.json``: what a finished batch ran, how long it took, on what, and `phases` (seconds per
    `RUN_PHASES` name)."""
    record = {"format": FORMAT, "profile": profile, "notebooks": list(names), "seconds": round(seconds, 1),
              "started_empty": bool(started_empty), "device": device, "command": command, "machine": machine(),
              "phases": {name: round(phases.get(name, 0.0), 1) for name in RUN_PHASES}}
    path = folder.run_record
    with atomic_path(path) as tmp:
        Path(tmp).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return record


def read_run(path: str | Path) -> dict:
    """A ``reproduction.json``, checked (format, the fields `record_run` writes)."""
    path = Path(path)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read the run record {path} ({exc}): move it aside and run again.") from None
    fields = {"format", "profile", "notebooks", "seconds", "started_empty", "device", "command", "machine", "phases"}
    if not isinstance(record, dict):
        raise InputError(f"{path} is not a papa run record (a JSON object): move it aside and run again.")
    check_format(record.get("format"), path, "run record")
    if not fields <= set(record):
        raise InputError(f"{path} is not a papa run record (it lacks {', '.join(sorted(fields - set(record)))}): "
                         "move it aside and run again.")
    return record


def phases_text(record: dict) -> str:
    """Where a recorded batch's time went, one line per phase and then the notebooks' own time."""
    total = float(record["seconds"])
    rows = _phase_rows(record["phases"], total)
    width = max(len(name) for name, _ in rows)
    lines = [f"  {name:<{width}}  {seconds:8.1f} s  {seconds / total if total else 0:6.1%}" for name, seconds in rows]
    return "where the time went:\n" + "\n".join(lines)


def _phase_rows(phases: dict[str, float], total: float) -> list[tuple[str, float]]:
    """Each phase's seconds, then the rest of the batch's `total`: the notebooks' own time."""
    return [*phases.items(), ("the notebooks' own (kernels, loading, tables, figures)",
                              max(total - sum(phases.values()), 0.0))]


# ---- what a run should take ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Expected:
    """The measured time of each notebook in a reference run of a profile, and what it was measured on."""

    profile: str
    seconds: dict[str, float]     # notebook -> wall seconds in the reference run
    total: float                  # the reference batch's whole wall time (kernels and all)
    machine: dict
    device: str
    command: str                  # what ran it
    source: Path
    phases: dict[str, float]      # where its time went (`record_run`)

    def machine_text(self) -> str:
        return f"{self.machine.get('cores')} cores of {self.machine.get('cpu')}, device {self.device}"

    def notebooks_seconds(self, names: Sequence[str]) -> float:
        """The reference's time for the notebooks `names` (those it ran), kernels' start-up left out."""
        return sum(self.seconds.get(name, 0.0) for name in names)


def reference(profile: str, reference_dir: str | Path = REFERENCE_DIR) -> Expected | None:
    """The reference run of `profile` (by its name) under `reference_dir`, checked; None when there is none."""
    folder = RunFolder(Path(reference_dir) / profile)
    if not folder.notebook_times.is_file() or not folder.run_record.is_file():
        return None
    run = read_run(folder.run_record)
    times = read_notebook_times(folder.notebook_times)
    if run["profile"] != profile or set(times["profile"]) != {profile} or not run["started_empty"]:
        raise InputError(f"{folder} is not a reference run of profile {profile!r} from an empty output folder: "
                         "replace it with the two files of such a run.")
    return Expected(profile, dict(zip(times["notebook"], times["seconds"].astype(float))), float(run["seconds"]),
                    run["machine"], run["device"], run["command"], folder.root, run["phases"])


def plan_text(profile: str, names: Sequence[str], folder: RunFolder, expected: Expected | None,
              done: dict[str, tuple[int, int]] | None = None) -> str:
    """What `papa reproduce` says before it starts: the notebooks in order, and how long each took in the reference
    run (scaled by the share of its probe runs still to do in `folder`)."""
    done = done or {}
    head = f"papa reproduce: {len(names)} notebook(s) of profile {profile} into {folder}, in this order"
    if expected is None:
        head += (f". No reference run of profile {profile} is on record (artifacts/timings/{profile}/), so no time "
                 "to expect is given; `python -m benchmarks.full_cost --profile P` estimates a CPU run's grid work "
                 "from rates it measures.")
    else:
        head += (f", with the time each took in the reference run of this profile ({expected.machine_text()}; "
                 f"artifacts/timings/{expected.source.name}/):")
    lines = [textwrap.fill(head, width=116, break_on_hyphens=False)]
    total = 0.0
    for name in names:
        seconds = None if expected is None else expected.seconds.get(name)
        have, runs = done.get(name, (0, 0))
        note = f"  ({have} of {runs} probe runs already done here)" if have else ""
        if seconds is None:
            lines.append(f"  {name:<26} {'not in the reference run' if expected else ''}{note}".rstrip())
            continue
        if runs and have:
            seconds *= (runs - have) / runs
        total += seconds
        lines.append(f"  {name:<26} about {_duration(seconds)}{note}")
    if expected is not None:
        whole = (f" (the whole reference batch took {_duration(expected.total)} with its kernels' start-up)"
                 if list(names) == list(expected.seconds) else "")
        lines.append(f"  {'in all':<26} about {_duration(total)} of notebooks{whole}")
        if os.cpu_count() != expected.machine.get("cores"):
            lines.append(f"  This machine has {os.cpu_count()} cores, the reference's "
                         f"{expected.machine.get('cores')}: expect other times.")
    return "\n".join(lines)


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    return f"{seconds} s" if seconds < 90 else f"{seconds // 60} min {seconds % 60:02d} s"


# ---- the page that shows the reference -----------------------------------------------------------------------------

def measurements_block(expected: Expected) -> str:
    """The Markdown table of docs/measurements.md's quick-reproduction section, from a reference run's files."""
    rows = ["| notebook | seconds |", "|---|---|"]
    rows += [f"| {name} | {seconds:.1f} |" for name, seconds in expected.seconds.items()]
    rows.append(f"| **the batch** (`{expected.command}`, kernels included) | **{expected.total:.1f}** |")
    m = expected.machine
    where = []
    if expected.phases:  # `phases_text`'s rows, as a table
        where = ["", "Where the batch's time went (`papa.core.phases`):", "", "| phase | seconds | share |",
                 "|---|---|---|"]
        where += [f"| {name} | {seconds:.1f} | {seconds / expected.total:.1%} |"
                  for name, seconds in _phase_rows(expected.phases, expected.total)]
    return "\n".join([
        f"Measured from an empty output folder on {m.get('cores')} cores of {m.get('cpu')} (torch {m.get('torch')}, "
        f"{m.get('torch_threads')} threads, Python {m.get('python')}), device {expected.device}; generated from "
        f"`artifacts/timings/{expected.profile}/` ({REFERENCE_FILES}).", "", *rows, *where])
