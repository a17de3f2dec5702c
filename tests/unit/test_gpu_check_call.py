"""One call of the GPU check: it fits an allocation's 7-minute call under a hard timeout, leaves its folder archived to
$OUT whatever stops it, runs each step in a process of its own, plans from measured times, and runs on the pinned
wheels it carries. The steps are a stand-in script, a module the steps' processes import: what is tested is the call's
bookkeeping, not a benchmark."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from benchmarks import cuda_tests, gpu_check, gpu_stage
from conftest import REPO
from tests.gpu_stand_in import install_stand_in

STEPS = tuple(gpu_check.Step(name, "papa_stand_in.steps", ("{out}/" + name,), (), (), 1.0) for name in ("a", "b", "c"))
#: The stand-in step script: notes each call in $STAND_IN_CALLS, writes the file it names with its step's status in the
#: folder's record while it runs, and on request stops the call ($STAND_IN_STOP: SIGTERM to the check, as `timeout`
#: at the limit) or dies (STAND_IN_ABORT: an abort, as a CUDA error's).
STAND_IN = """
import json, os, signal, time
from pathlib import Path


def main(argv):
    out = Path(argv[0])
    with open(os.environ["STAND_IN_CALLS"], "a") as fh:
        fh.write(out.name + "\\n")
    record = json.loads((out.parent / "check.json").read_text())
    status = {s["name"]: s["status"] for s in record["steps"]}[out.name]
    out.write_text(json.dumps({"status_while_running": status, "pid": os.getpid()}))
    if os.environ.get("STAND_IN_STOP") == out.name:
        os.kill(os.getppid(), signal.SIGTERM)
        time.sleep(60)
    if os.environ.get("STAND_IN_ABORT") == out.name:
        os.abort()
    return 0
"""


def stand_in(tmp_path: Path, monkeypatch):
    """Install the stand-in step module where the steps' processes import it; returns the calls made so far."""
    return install_stand_in(tmp_path, monkeypatch, package="papa_stand_in", source=STAND_IN, steps=STEPS,
                            calls_env="STAND_IN_CALLS")


@pytest.fixture
def stopped_at_b(tmp_path, monkeypatch):
    """The stand-in step script, step b stopped by the hard limit's SIGTERM."""
    monkeypatch.setenv("STAND_IN_STOP", "b")
    return stand_in(tmp_path, monkeypatch)


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
    assert stopped_at_b() == ["a", "b"]  # c never started
    b_pid = json.loads((out / "b").read_text(encoding="utf-8"))["pid"]
    assert b_pid != os.getpid() and _zombie_or_gone(b_pid)  # the step's process was stopped with the call
    record = gpu_check.read_check(out)
    status = {s["name"]: s["status"] for s in record["steps"]}
    assert status == {"a": "ok", "b": "interrupted"}
    assert "hard limit" in record["steps"][1]["why"] and record["steps"][1]["call"] == 0
    with tarfile.open(archive) as tar:  # packed after the stop, with the interrupted step in its record
        packed = json.load(tar.extractfile(f"{out.name}/check.json"))
    assert {s["name"]: s["status"] for s in packed["steps"]} == status
    assert signal.getsignal(signal.SIGTERM) is before  # the handler is the call's only
    # a later --fill call runs what this one lacks: the interrupted step first
    known = {"f" * 40: True}  # the code holds the probing changes
    assert gpu_check.fill_plan(record["machine"], smoke=True, root=tmp_path, known=known)[1] == ["b", "c"]


def _zombie_or_gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True


def test_each_step_runs_in_its_own_process_entered_as_running_before_it_ends(tmp_path, monkeypatch):
    """A step that dies (an abort, as a CUDA error's) is failed with its status and the next step still runs; each
    step sees its own entry "running" in the folder's record while it runs; the steps' imports are recorded."""
    ran = stand_in(tmp_path, monkeypatch)
    monkeypatch.setenv("STAND_IN_ABORT", "b")
    out = tmp_path / "folder"
    record = gpu_check.run(list(STEPS), out, _stage(tmp_path), smoke=True, budget=float("inf"), archive=None)
    assert ran() == ["a", "b", "c"]
    status = {s["name"]: s for s in record["steps"]}
    assert status["a"]["status"] == status["c"]["status"] == "ok"
    assert status["b"]["status"] == "failed" and f"signal {signal.SIGABRT}" in status["b"]["why"]
    assert "before its result" in (out / "logs" / "b.log").read_text(encoding="utf-8")
    pids = {json.loads((out / n).read_text(encoding="utf-8"))["pid"] for n in ("a", "b", "c")}
    assert len(pids) == 3 and os.getpid() not in pids
    assert all(json.loads((out / n).read_text(encoding="utf-8"))["status_while_running"] == "running"
               for n in ("a", "b", "c"))
    assert "papa_stand_in" in record["imports"]  # the steps' processes' imports, not only this one's


def test_a_call_killed_outright_leaves_the_running_step_interrupted_after_pack(tmp_path, monkeypatch):
    """A SIGKILL leaves no handler time: the step entered as running is closed by `pack`, which runs after the call."""
    stand_in(tmp_path, monkeypatch)
    stage, out = _stage(tmp_path), tmp_path / "folder"
    gpu_check.run([STEPS[0]], out, stage, smoke=True, budget=float("inf"), archive=None)
    record = gpu_check.read_check(out)
    record["steps"].append({"name": "b", "status": "running", "call": 0, "seconds": 0.0,
                            "started": "2026-01-01T00:00:00+00:00"})
    (out / "check.json").write_text(json.dumps(record), encoding="utf-8")
    archive = tmp_path / "gpu_check.tar.gz"
    assert gpu_check.pack(stage, archive) == out
    with tarfile.open(archive) as tar:
        packed = json.load(tar.extractfile("folder/check.json"))
    b = next(s for s in packed["steps"] if s["name"] == "b")
    assert b["status"] == "interrupted" and "killed at its hard limit" in b["why"] and b["seconds"] > 0


def test_steps_are_planned_from_the_committed_folders_measured_times(tmp_path, monkeypatch):
    ran = stand_in(tmp_path, monkeypatch)
    root = tmp_path / "gpu"
    monkeypatch.setattr(gpu_check, "GPU_ROOT", root)
    here = gpu_check.describe_machine(cuda=False)["device"]
    for name, device, seconds in (("2026-01-01-x", here, {"a": 100.0, "b": 2.0}), ("2026-02-01-y", "Y", {"b": 50.0})):
        (root / name).mkdir(parents=True)
        source, machine = {"commit": "0" * 40, "dirty": False}, {"device": device}
        (root / name / "check.json").write_text(json.dumps({
            "format": gpu_check.FORMAT, "machine": machine, "source": source,
            "calls": [{"source": source, "machine": machine}],
            "steps": [{"name": n, "status": "ok", "seconds": t, "call": 0} for n, t in seconds.items()]}))
    plan = gpu_check.planned_seconds({"device": here})
    # this device's folder first (b: 2 s there, though the other device's folder is newer), with the margin
    assert plan == {"a": (120.0, "measured in 2026-01-01-x"), "b": (3.0, "measured in 2026-01-01-x"),
                    "c": (1.0, "usual time")}
    assert gpu_check.planned_seconds({"device": "Y"})["b"] == (60.0, "measured in 2026-02-01-y")
    record = gpu_check.run(list(STEPS), tmp_path / "folder", _stage(tmp_path), smoke=True, budget=50.0, archive=None)
    assert ran() == ["b", "c"]  # a's measured 100 s do not fit 50 s, though its usual time would
    skipped = record["steps"][0]
    assert skipped["status"] == "skipped" and "about 120 s (measured in 2026-01-01-x" in skipped["why"]
    assert {s["name"]: s.get("planned_s") for s in record["steps"]} == {"a": None, "b": 3.0, "c": 1.0}


def test_the_cuda_tests_write_each_result_as_it_finishes_and_limit_each_file(tmp_path, monkeypatch):
    """Each test file in its own process, its results appended as tests finish; a file past its limit is stopped and
    recorded as timed out, and the next file still runs."""
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_quick.py").write_text("def test_one():\n    pass\n\ndef test_two():\n    assert False\n")
    (tests / "test_hangs.py").write_text("import time\n\ndef test_hang():\n    time.sleep(60)\n")
    (tests / "test_after.py").write_text("def test_after():\n    pass\n")
    # room for a pytest process to start on a loaded machine, far below the hang's 60 s
    monkeypatch.setattr(cuda_tests, "TEST_FILE_TIMEOUT_S", 20)
    monkeypatch.setattr(cuda_tests, "TEST_TIMEOUT_S", 600)  # the file's limit is what stops the hang here
    junit = tmp_path / "out" / "cuda_tests.xml"
    junit.parent.mkdir()
    files = [str(tests / f) for f in ("test_quick.py", "test_hangs.py", "test_after.py")]
    code = cuda_tests.main(["--test-device", "cpu", "--junit", str(junit), *files])
    assert code != 0
    results = [json.loads(line) for line in junit.with_suffix(".jsonl").read_text().splitlines()]
    outcomes = [(r["test"].split("/")[-1], r["outcome"]) for r in results]
    assert outcomes == [("test_quick.py::test_one", "passed"), ("test_quick.py::test_two", "failed"),
                        ("test_hangs.py", "timeout"), ("test_after.py::test_after", "passed")]
    assert junit.with_suffix(".test_quick.xml").is_file() and junit.with_suffix(".test_after.xml").is_file()


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
    limit = f"timeout -k {gpu_check.KILL_AFTER_S} {gpu_check.CALL_LIMIT_S} python3 -m benchmarks.gpu_check run --fill"
    assert limit in command and command.endswith("exit $rc")
    # the pack runs after the call whatever its status (`;`, not `&&`), and the call's status is the command's
    assert "; rc=$?; python3 -m benchmarks.gpu_check pack --stage .gpu-stage --archive $OUT/gpu_check.tar.gz" in command
    assert gpu_check.CALL_LIMIT_S + gpu_check.KILL_AFTER_S <= 7 * 60 + 15  # one call's 7 minutes
    assert gpu_check.CALL_BUDGET_S < gpu_check.CALL_LIMIT_S - 60  # the install, imports and packing fit beside


def test_the_first_call_measures_the_steps_the_stores_and_the_grid_bench():
    """In order of priority, the steps that fit the first call's budget are the CUDA tests, the steps' speed, the
    stores' fetch and the bench at the grid's shapes."""
    first, spent = [], 0.0
    for step in gpu_check.STEPS:
        if spent + step.usual_s > gpu_check.CALL_BUDGET_S:
            break
        first.append(step.name)
        spent += step.usual_s
    assert first == ["cuda_tests", "steps_bf16", "store_grid", "bench_grid"]
    assert all(Path(REPO / f).is_file() for f in gpu_check.CUDA_TESTS)


def _wheel(folder: Path, name: str, version: str) -> Path:
    """A minimal pure-Python wheel of an empty package `name` at `version`."""
    dist = f"{name}-{version}.dist-info"
    path = folder / f"{name}-{version}-py3-none-any.whl"
    files = {f"{name}/__init__.py": "",
             f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
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
    assert gpu_stage.use_staged_wheels(stage, ["papa_pinned_probe==1.2"]) == ["papa_pinned_probe==1.2"]
    assert sys.path[0] == str((stage / "site").resolve()) and os.environ["PYTHONPATH"] == sys.path[0]
    child = subprocess.run([sys.executable, "-c", "import papa_pinned_probe, sys; print(papa_pinned_probe.__file__)"],
                           capture_output=True, text=True, env={**os.environ})
    assert child.returncode == 0 and str(stage / "site") in child.stdout  # the steps' children see them too
    with pytest.raises(SystemExit, match="papa_pinned_probe==1.3 \\(1.2 found\\)"):
        gpu_stage.use_staged_wheels(stage, ["papa_pinned_probe==1.3"])  # a pin the wheels do not hold is refused
    assert gpu_stage.use_staged_wheels(_stage(tmp_path / "none"), ["x==1"]) == []  # nothing staged: nothing to do


def test_the_staged_size_counts_what_travels(tmp_path):
    """Tracked and untracked-not-ignored files of the tree and every file of the stage, each once; not what git
    ignores outside the stage."""
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    (repo / ".gitignore").write_text("ignored.bin\n.stage/\n")
    (repo / "tracked.py").write_bytes(b"x" * 1000)
    subprocess.run(["git", "add", "."], cwd=repo, check=True)
    (repo / "untracked.py").write_bytes(b"y" * 300)
    (repo / "ignored.bin").write_bytes(b"z" * 10_000)
    stage = repo / ".stage"
    (stage / "site").mkdir(parents=True)
    (stage / gpu_stage.BUNDLE).write_bytes(b"b" * 5000)
    (stage / "manifest.json").write_bytes(b"m" * 70)
    tree = len((repo / ".gitignore").read_bytes()) + 1000 + 300
    assert gpu_stage.staged_bytes(stage, repo) == tree + 5000 + 70
    (repo / ".gitignore").write_text("ignored.bin\n")  # a stage git does not ignore travels once, not twice
    assert gpu_stage.staged_bytes(stage, repo) == len((repo / ".gitignore").read_bytes()) + 1300 + 5070
    assert gpu_stage.staged_bytes(stage, tmp_path / "elsewhere") == 5070  # a stage outside the tree: itself


def test_a_bundle_unpacks_once_into_the_stage_and_its_site_goes_first(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PYTHONPATH", "")
    stage = tmp_path / "stage"
    for sub in ("hub", "data"):
        (stage / sub).mkdir(parents=True)
        (stage / sub / "f.txt").write_text(sub)
    _wheel(tmp_path, "papa_bundled_probe", "2.0")
    gpu_stage.unzip_wheels([tmp_path / "papa_bundled_probe-2.0-py3-none-any.whl"], stage / "site")
    assert gpu_stage.pack_bundle(stage) == stage / gpu_stage.BUNDLE
    assert sorted(p.name for p in stage.iterdir()) == [gpu_stage.BUNDLE]  # the archive alone travels
    assert gpu_stage.unpack(stage) and (stage / "hub" / "f.txt").read_text() == "hub"
    assert gpu_stage.use_staged_wheels(stage, ["papa_bundled_probe==2.0"]) == ["papa_bundled_probe==2.0"]
    assert sys.path[0] == str((stage / "site").resolve())


def test_a_package_older_than_its_pin_is_said(tmp_path):
    from importlib import metadata

    constraints = tmp_path / "constraints.txt"
    constraints.write_text(f"transformers=={metadata.version('transformers')}\ntorch==999.0\n")
    older = gpu_stage.older_than_pins(constraints)
    assert older == [f"torch {metadata.version('torch')} (pinned 999.0)"]


def test_versions_are_ordered_by_their_release_numbers():
    """`release` orders versions as pip does for the pins checked: by their numbers, not as text, a local build's
    label ("+cpu") and trailing zeros aside."""
    release = gpu_stage.release
    assert release("5.23.0+cu130") == (5, 23) and release("2.0rc1") == (2,)
    assert release("2.13.0+cpu") == release("2.13.0") == release("2.13")  # the same release: not older than its pin
    assert release("5.17.1") < release("5.23.0")
    assert release("0.23.10") > release("0.23.2")  # as text, "0.23.10" < "0.23.2"
    assert release("1.0") < release("1.0.1") and release("999.0") > release("2.11.0")
