"""A stand-in for the GPU check's steps, for its tests: a module written where the steps' processes import it,
with the check's steps and committed folders patched to it."""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path


def install_stand_in(tmp_path: Path, monkeypatch, *, package: str, source: str, steps: Sequence,
                     calls_env: str) -> Callable[[], list[str]]:
    """Write `source` as ``<package>.steps`` under `tmp_path`, put it first on the steps' processes' path, make
    `steps` the check's steps (no committed folder behind them) and name the file the stand-in records its calls in
    (`calls_env`); returns the calls made so far."""
    from benchmarks import gpu_check

    folder = tmp_path / "stand_in" / package
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "__init__.py").write_text("", encoding="utf-8")
    (folder / "steps.py").write_text(source, encoding="utf-8")
    calls = tmp_path / "stand_in" / "calls.txt"
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(folder.parent), os.environ.get("PYTHONPATH"))
                                                     if p))
    monkeypatch.setenv(calls_env, str(calls))
    monkeypatch.setattr(gpu_check, "STEPS", tuple(steps))
    monkeypatch.setattr(gpu_check, "STEP_NAMES", tuple(s.name for s in steps))
    monkeypatch.setattr(gpu_check, "GPU_ROOT", tmp_path / "no-committed-folders")
    return lambda: calls.read_text(encoding="utf-8").split() if calls.is_file() else []
