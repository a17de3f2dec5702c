"""One call of the GPU check: it fits an allocation's 7-minute call under a hard timeout, leaves its folder archived to
$OUT whatever stops it, and runs on the pinned wheels it carries. The steps are a stand-in script: what is tested is
the call's bookkeeping, not a benchmark."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tarfile
import types
import zipfile
from pathlib import Path

import pytest

from benchmarks import gpu_check, gpu_steps
from conftest import REPO

STEPS = tuple(gpu_steps.Step(name, "papa_call_step", ("{out}/" + name,), (), (), 1.0) for name in ("a", "b", "c"))


@pytest.fixture
def stopped_at_b(monkeypatch) -> list[str]:
    """The stand-in step script: writes the file each call names; step b is stopped by the hard limit's SIGTERM."""
    calls: list[str] = []

    def main(argv: list[str]) -> int:
        calls.append(Path(argv[0]).name)
        if calls[-1] == "b":
            os.kill(os.getpid(), signal.SIGTERM)  # what `timeout` sends at the limit
        Path(argv[0]).write_text("{}", encoding="utf-8")
        return 0

    monkeypatch.setitem(sys.modules, "benchmarks.papa_call_step", types.SimpleNamespace(main=main))
    monkeypatch.setattr(gpu_check, "STEPS", STEPS)
    monkeypatch.setattr(gpu_check, "STEP_NAMES", tuple(s.name for s in STEPS))
    return calls


def _stage(tmp_path: Path, wheels: list[str] | None = None) -> Path:
    stage = tmp_path / "stage"
    for sub in ("hub", "data"):
        (stage / sub).mkdir(parents=True, exist_ok=True)
    manifest = {"source": {"commit": "f" * 40, "dirty": False}, "wheels": wheels or []}
    (stage / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return stage


def test_the_hard_limit_records_the_step_it_stopped_and_archives_the_folder(tmp_path, stopped_at_b):
    out, archive, stage = tmp_path / "folder", tmp_path / "OUT" / "gpu_check.tar.gz", _stage(tmp_path)
    archive.parent.mkdir()
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as stop:
        gpu_check.run(list(STEPS), out, stage, smoke=True, budget=float("inf"), archive=archive)
    assert stop.value.code == 124  # `timeout`'s own status: the call ran out of time
    assert stopped_at_b == ["a", "b"]  # c never started
    record = gpu_check.read_check(out)
    status = {s["name"]: s["status"] for s in record["steps"]}
    assert status == {"a": "ok", "b": "interrupted"}
    assert "hard limit" in record["steps"][1]["why"] and record["steps"][1]["call"] == 0
    with tarfile.open(archive) as tar:  # packed after the stop, with the interrupted step in its record
        packed = json.load(tar.extractfile(f"{out.name}/check.json"))
    assert {s["name"]: s["status"] for s in packed["steps"]} == status
    assert signal.getsignal(signal.SIGTERM) is before  # the handler is the call's only
    # a later --fill call runs what this one lacks: the interrupted step first
    assert gpu_check.fill_target(record["machine"], smoke=True, root=tmp_path)[1] == ["b", "c"]


def test_pack_after_the_call_archives_the_folder_the_run_wrote(tmp_path, stopped_at_b):
    stage = _stage(tmp_path)
    archive = tmp_path / "OUT" / "gpu_check.tar.gz"
    archive.parent.mkdir()
    assert gpu_check.pack(stage, archive) is None and not archive.exists()  # no run: nothing to pack, no error
    gpu_check.run([STEPS[0]], tmp_path / "folder", stage, smoke=True, budget=float("inf"), archive=None)
    assert gpu_check.main(["pack", "--stage", str(stage), "--archive", str(archive)]) == 0
    with tarfile.open(archive) as tar:
        assert {"folder/check.json", "folder/a"} <= set(tar.getnames())


def test_the_printed_command_runs_under_the_hard_limit_and_packs_after_it():
    command = gpu_check.device_command(REPO / ".gpu-stage")
    limit = f"timeout -k {gpu_steps.KILL_AFTER_S} {gpu_steps.CALL_LIMIT_S} python3 -m benchmarks.gpu_check run --fill"
    assert limit in command and command.endswith("exit $rc")
    # the pack runs after the call whatever its status (`;`, not `&&`), and the call's status is the command's
    assert "; rc=$?; python3 -m benchmarks.gpu_check pack --stage .gpu-stage --archive $OUT/gpu_check.tar.gz" in command
    assert gpu_steps.CALL_LIMIT_S + gpu_steps.KILL_AFTER_S <= 7 * 60 + 15  # one call's 7 minutes
    assert gpu_steps.CALL_BUDGET_S < gpu_steps.CALL_LIMIT_S - 60  # the install, imports and packing fit beside


def test_the_first_call_measures_the_steps_the_stores_and_the_grid_bench():
    """In order of priority, the steps that fit the first call's budget are the CUDA tests, the steps' speed, the
    stores' fetch and the bench at the grid's shapes."""
    first, spent = [], 0.0
    for step in gpu_steps.STEPS:
        if spent + step.usual_s > gpu_steps.CALL_BUDGET_S:
            break
        first.append(step.name)
        spent += step.usual_s
    assert first == ["cuda_tests", "steps_bf16", "store_grid", "bench_grid"]
    assert all(Path(REPO / f).is_file() for f in gpu_steps.CUDA_TESTS)


def _wheel(folder: Path, name: str, version: str) -> Path:
    """A minimal pure-Python wheel of an empty package `name` at `version`."""
    dist = f"{name}-{version}.dist-info"
    path = folder / f"{name}-{version}-py3-none-any.whl"
    files = {f"{name}/__init__.py": "", f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    files[f"{dist}/RECORD"] = "".join(f"{f},,\n" for f in [*files, f"{dist}/RECORD"])
    with zipfile.ZipFile(path, "w") as whl:
        for inner, text in files.items():
            whl.writestr(inner, text)
    return path


@pytest.mark.slow
def test_the_staged_wheels_are_installed_and_their_pins_checked(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PYTHONPATH", "")
    stage = _stage(tmp_path)
    (stage / "wheels").mkdir()
    _wheel(stage / "wheels", "papa_pinned_probe", "1.2")
    assert gpu_check.use_staged_wheels(stage, ["papa_pinned_probe==1.2"]) == ["papa_pinned_probe==1.2"]
    assert sys.path[0] == str((stage / "site").resolve()) and os.environ["PYTHONPATH"] == sys.path[0]
    child = subprocess.run([sys.executable, "-c", "import papa_pinned_probe, sys; print(papa_pinned_probe.__file__)"],
                           capture_output=True, text=True, env={**os.environ})
    assert child.returncode == 0 and str(stage / "site") in child.stdout  # the steps' children see them too
    with pytest.raises(SystemExit, match="papa_pinned_probe==1.3 \\(1.2 found\\)"):
        gpu_check.use_staged_wheels(stage, ["papa_pinned_probe==1.3"])  # a pin the wheels do not hold is refused
    assert gpu_check.use_staged_wheels(_stage(tmp_path / "none"), ["x==1"]) == []  # nothing staged: nothing to do
