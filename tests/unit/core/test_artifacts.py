"""Atomic artifact files follow the umask like any file the user creates, whatever wrote them; a safetensors
file's header can be read on its own."""
from __future__ import annotations

import os
import stat

import pytest
import torch
from safetensors.torch import save_file

from papa.core.artifacts import (atomic_path, check_output_dir, check_output_file, read_safetensors_metadata,
                                 remove_stale_temporaries, same_table, write_table)
from papa.core.errors import CorruptArtifactError, OutputPathError


@pytest.fixture
def umask_027():
    previous = os.umask(0o027)
    yield
    os.umask(previous)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_atomic_files_follow_the_umask(tmp_path, umask_027):
    with atomic_path(tmp_path / "plain.txt") as tmp:
        tmp.write_text("x")
    # safetensors replaces the file it is given, which took mkstemp's 0600 through the rename before.
    with atomic_path(tmp_path / "tensors.safetensors") as tmp:
        save_file({"a": torch.zeros(2)}, str(tmp))
    assert _mode(tmp_path / "plain.txt") == _mode(tmp_path / "tensors.safetensors") == 0o640
    os.umask(0o022)
    with atomic_path(tmp_path / "tensors.safetensors") as tmp:  # and a replaced artifact gets the new mode
        save_file({"a": torch.ones(2)}, str(tmp))
    assert _mode(tmp_path / "tensors.safetensors") == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain.txt", "tensors.safetensors"]


def test_output_checks_leave_nothing(tmp_path):
    target = tmp_path / "a" / "b"
    assert check_output_dir(target) == target and not (tmp_path / "a").exists()
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "f").write_text("")
    with pytest.raises(OutputPathError, match="is not a directory"):
        check_output_dir(tmp_path / "f" / "sub")
    with pytest.raises(OutputPathError, match="is a directory: give a file name"):
        check_output_file(tmp_path)
    assert check_output_file(tmp_path / "new" / "report.csv").name == "report.csv"


def test_safetensors_metadata_reads_the_header_alone(tmp_path):
    save_file({"a": torch.zeros(2)}, str(tmp_path / "meta.safetensors"), metadata={"papa": "{}", "note": "x"})
    assert read_safetensors_metadata(tmp_path / "meta.safetensors") == {"papa": "{}", "note": "x"}
    save_file({"a": torch.zeros(2)}, str(tmp_path / "bare.safetensors"))
    assert read_safetensors_metadata(tmp_path / "bare.safetensors") == {}
    (tmp_path / "notes.safetensors").write_text("not a safetensors file")
    for bad in ("notes.safetensors", "missing.safetensors"):
        with pytest.raises(CorruptArtifactError, match="is not a readable safetensors file"):
            read_safetensors_metadata(tmp_path / bad)


_KILLED_WRITER = """
import os, sys
from papa.core.artifacts import atomic_path
with atomic_path(sys.argv[1]) as tmp:
    (tmp.parent / ".tmpWRITER").write_text("a writer's own temporary file, as safetensors makes beside its target")
    tmp.write_text("half")
    os._exit(9)  # like SIGKILL: no cleanup runs
"""


def test_a_writer_killed_mid_write_leaves_one_folder_that_the_next_writer_removes(tmp_path):
    import subprocess
    import sys

    target = tmp_path / "run.safetensors"
    target.write_text("old")
    (tmp_path / ".other.safetensors.abc123.tmp").mkdir()  # another artifact's: not ours to remove
    assert subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(target)]).returncode == 9
    left = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".run.safetensors."))
    assert len(left) == 1 and target.read_text() == "old"
    # The writer's own temporary file is inside atomic_path's folder, not beside the artifact.
    assert not (tmp_path / ".tmpWRITER").exists()
    remove_stale_temporaries(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other.safetensors.abc123.tmp", "run.safetensors"]
    with atomic_path(target) as tmp:
        save_file({"a": torch.zeros(2)}, str(tmp))
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other.safetensors.abc123.tmp", "run.safetensors"]


def test_a_failed_write_leaves_the_old_file_and_nothing_else(tmp_path):
    target = tmp_path / "table.csv"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("the writer failed")
    assert [p.name for p in tmp_path.iterdir()] == ["table.csv"] and target.read_text() == "old"


def test_a_table_written_again_with_the_same_numbers_keeps_its_bytes(tmp_path):
    """A rerun on another CPU recomputes float32 sums to other last digits: the table already written stays as it
    was when every number agrees to SAME_TABLE_RTOL; a number that moved beyond it, or a changed label, rewrites it."""
    import pandas as pd

    path = tmp_path / "t.csv"
    table = pd.DataFrame({"value": [0.7219086230, float("nan")], "n": [72, 50], "name": ["spread", "diagonal"]})
    write_table(table, path)
    before = path.read_bytes()
    rerun = table.assign(value=[0.7219086178, float("nan")])  # the 8th digit moved, as between two CPUs
    assert before != rerun.to_csv(float_format="%.10g").encode()  # written afresh it would differ
    write_table(rerun, path)
    assert path.read_bytes() == before
    for changed in (table.assign(value=[0.7219, float("nan")]), table.assign(name=["spread", "special"]),
                    table.assign(n=[72, 51]), table.iloc[:1]):
        assert not same_table(before.decode(), changed.to_csv(float_format="%.10g"))
        write_table(changed, path)
        assert path.read_bytes() == changed.to_csv(float_format="%.10g").encode()
        write_table(table, path)
