"""Phase times (papa.core.phases): nested phases count once, files from several processes add up."""
from __future__ import annotations

import contextlib
import json
import time

import pytest

from papa.core import phases
from papa.core.artifacts import FORMAT
from papa.core.errors import CorruptArtifactError, IncompatibleArtifactError, InputError
from papa.core.run_folder import RunFolder


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setattr(phases, "_totals", {})


def test_a_phase_inside_another_counts_for_itself_only():
    with phases.phase("lambda"):
        time.sleep(0.05)
        with phases.phase("extraction"):
            time.sleep(0.1)
    got = phases.totals()
    assert 0.1 <= got["extraction"] < 0.15 and 0.05 <= got["lambda"] < 0.1
    with pytest.raises(ValueError, match="unknown phase 'lunch'"):
        with phases.phase("lunch"):
            pass


def test_files_written_since_a_moment_add_up(tmp_path, monkeypatch):
    assert phases.write_phase_times(RunFolder.at(tmp_path)) is None  # nothing ran: nothing written
    folder = RunFolder(tmp_path).phase_times
    folder.mkdir()
    old = folder / "old.json"
    old.write_text(json.dumps({"format": FORMAT, "seconds": {"features": 100.0}}))
    past = time.time() - 60
    import os
    os.utime(old, (past, past))
    since = time.time() - 1
    (folder / "other.json").write_text(json.dumps({"format": FORMAT, "seconds": {"features": 2.0}}))
    with phases.phase("features"):
        time.sleep(0.01)
    written = phases.write_phase_times(RunFolder.at(tmp_path))
    assert written.parent == folder
    sums = phases.read_phase_times(RunFolder.at(tmp_path), since)
    assert set(sums) == set(phases.RUN_PHASES) and 2.01 <= sums["features"] < 2.1 and sums["lambda"] == 0
    assert phases.read_phase_times(RunFolder.at(tmp_path))["features"] >= 102
    (folder / "bad.json").write_text(json.dumps({"format": FORMAT, "seconds": {"lunch": 1.0}}))
    with pytest.raises(CorruptArtifactError, match="not a papa phase-times file"):
        phases.read_phase_times(RunFolder.at(tmp_path))
    (folder / "bad.json").write_text(json.dumps({"format": "papa-phase-times-1", "seconds": {"features": 1.0}}))
    with pytest.raises(IncompatibleArtifactError, match="in artifact format 'papa-phase-times-1'; this papa reads "
                                                        "format 2"):
        phases.read_phase_times(RunFolder.at(tmp_path))


def test_each_folder_is_credited_with_its_own_work(tmp_path):
    """A process running grids into two folders writes each the work timed since its last write, nothing more."""
    with phases.phase("features"):
        time.sleep(0.02)
    phases.write_phase_times(RunFolder.at(tmp_path / "a"))
    assert phases.totals() == {} and phases.write_phase_times(RunFolder.at(tmp_path / "b")) is None
    assert not (tmp_path / "b").exists()  # nothing timed: no folder made
    with phases.phase("lambda"):
        time.sleep(0.01)
    phases.write_phase_times(RunFolder.at(tmp_path / "b"))
    with phases.phase("features"):
        time.sleep(0.01)
    phases.write_phase_times(RunFolder.at(tmp_path / "a"))  # added to the same process's file
    a, b = phases.read_phase_times(RunFolder.at(tmp_path / "a")), phases.read_phase_times(RunFolder.at(tmp_path / "b"))
    assert a["features"] >= 0.03 and a["lambda"] == 0 and b["lambda"] >= 0.01 and b["features"] == 0


def test_a_refusal_leaves_no_times_behind_unless_work_was_kept(tmp_path):
    """`timed_into` writes a block's times when it ends, drops them when papa refused it before any work was kept,
    and keeps them when work was kept before the refusal, or when the block failed for another reason."""
    for ran, error, kept in ((False, InputError("bad"), False), (True, InputError("bad"), True),
                             (False, RuntimeError("bug"), True), (False, None, True)):
        out = tmp_path / f"{ran}-{type(error).__name__}"
        with pytest.raises(type(error)) if error else contextlib.nullcontext():
            with phases.timed_into(RunFolder.at(out), ran=lambda: ran):
                with phases.phase("extraction"):
                    time.sleep(0.01)
                if error:
                    raise error
        assert RunFolder(out).phase_times.exists() == kept, (ran, error)
        assert phases.totals() == {}  # written or dropped, never carried into the next write
