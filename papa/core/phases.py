"""Where a run's time goes: wall seconds per phase (`RUN_PHASES`), one file per process under the run's folder.

A phase inside another counts for itself only; `read_phase_times` adds up the processes' files.
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from papa.core.artifacts import FORMAT, atomic_path, check_format
from papa.core.errors import CorruptArtifactError, PapaError
from papa.core.run_folder import RunFolder
from papa.core.vocabulary import RUN_PHASES

_totals: dict[str, float] = {}
_open: list[list] = []  # [name, start, seconds spent in phases inside it]
_PROCESS = f"{os.getpid()}-{time.time_ns()}"


@contextmanager
def phase(name: str) -> Iterator[None]:
    """Add the block's wall time to phase `name` (one of `RUN_PHASES`), less the time of phases inside it."""
    if name not in RUN_PHASES:
        raise ValueError(f"unknown phase {name!r}: one of {', '.join(RUN_PHASES)}")
    entry = [name, time.perf_counter(), 0.0]
    _open.append(entry)
    try:
        yield
    finally:
        _open.pop()
        elapsed = time.perf_counter() - entry[1]
        _totals[name] = _totals.get(name, 0.0) + elapsed - entry[2]
        if _open:
            _open[-1][2] += elapsed


def totals() -> dict[str, float]:
    """This process's seconds per phase since the last `write_phase_times`."""
    return dict(_totals)


def write_phase_times(folder: RunFolder) -> Path | None:
    """Add what was timed since the last write to this process's file under `folder` and start counting afresh
    (nothing is written, and no folder made, when no phase ran); returns the file."""
    if not _totals:
        return None
    path = folder.phase_times / f"{_PROCESS}.json"
    seconds = _read(path) if path.is_file() else {}
    for name, value in _totals.items():
        seconds[name] = seconds.get(name, 0.0) + value
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        Path(tmp).write_text(json.dumps({"format": FORMAT, "seconds": seconds}, sort_keys=True), encoding="utf-8")
    _totals.clear()
    return path


@contextmanager
def timed_into(folder: RunFolder, ran: Callable[[], bool]) -> Iterator[None]:
    """Write the block's phase times under `folder` when it ends; a `PapaError` raised before `ran()` is true
    discards them."""
    try:
        yield
    except PapaError:
        if not ran():  # a refused run leaves no times behind
            _totals.clear()
        raise
    finally:
        write_phase_times(folder)


def _read(path: Path) -> dict[str, float]:
    """The seconds per phase of one file, checked."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        found, seconds = record.get("format"), record.get("seconds")
    except (OSError, ValueError, AttributeError) as exc:
        raise CorruptArtifactError(f"{path}: unreadable phase times ({exc}): delete it") from None
    check_format(found, path, "phase-times file")
    if not isinstance(seconds, dict) or not set(seconds) <= set(RUN_PHASES):
        raise CorruptArtifactError(f"{path} is not a papa phase-times file (seconds per phase): delete it")
    return {name: float(value) for name, value in seconds.items()}


def read_phase_times(folder: RunFolder, since: float | None = None) -> dict[str, float]:
    """Seconds per phase (every `RUN_PHASES` name) over the files under `folder` written at or after `since` (a
    `time.time()`; None: all of them)."""
    sums = dict.fromkeys(RUN_PHASES, 0.0)
    for path in sorted(folder.phase_times.glob("*.json")):
        if since is not None and path.stat().st_mtime < since:
            continue
        for name, value in _read(path).items():
            sums[name] += value
    return sums
