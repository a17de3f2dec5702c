"""benchmarks/gpu_check.py's folders (issue 54): a folder holds one device's rows, a later call into it records its
own code and machine beside the steps it ran, and `--fill` completes the newest folder of this device (the command
a lent machine runs), so a second loan adds what the first lacked instead of starting over. The steps here are a
stand-in script that records its calls: what is tested is the folder's bookkeeping, not a benchmark."""
from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from benchmarks import gpu_check

STEPS = tuple(gpu_check.Step(name, "papa_test_step", ("{out}/" + name,), (), (), 1.0) for name in ("a", "b", "c"))
NAMES = tuple(s.name for s in STEPS)


@pytest.fixture
def ran(monkeypatch) -> list[str]:
    """The stand-in step script: records the file each call names, and writes it."""
    calls: list[str] = []

    def main(argv: list[str]) -> int:
        calls.append(Path(argv[0]).name)
        Path(argv[0]).write_text("{}", encoding="utf-8")
        return 0

    monkeypatch.setitem(sys.modules, "benchmarks.papa_test_step", types.SimpleNamespace(main=main))
    monkeypatch.setattr(gpu_check, "STEPS", STEPS)
    monkeypatch.setattr(gpu_check, "STEP_NAMES", NAMES)
    return calls


def _stage(tmp_path: Path, commit: str) -> Path:
    stage = tmp_path / "stage"
    for sub in ("hub", "data"):
        (stage / sub).mkdir(parents=True, exist_ok=True)
    (stage / "manifest.json").write_text(json.dumps({"source": {"commit": commit, "dirty": False}}), encoding="utf-8")
    return stage


def _folder(root: Path, name: str, device: str, statuses: dict[str, str], smoke: bool = False) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    record = {"format": gpu_check.FORMAT, "smoke": smoke, "machine": {"device": device},
              "source": {"commit": "0" * 40, "dirty": False},
              "steps": [{"name": n, "status": s} for n, s in statuses.items()]}
    (folder / "check.json").write_text(json.dumps(record), encoding="utf-8")
    return folder


def _here() -> dict:
    return gpu_check.describe_machine(cuda=False)


def test_fill_picks_the_newest_folder_of_this_device_and_the_steps_it_lacks(tmp_path, ran):
    root = tmp_path / "gpu"
    _folder(root, "2026-01-01-h100", "H100", {"a": "ok", "b": "ok", "c": "ok"})
    newest = _folder(root, "2026-02-01-h100", "H100", {"a": "ok", "b": "failed", "c": "skipped"})
    _folder(root, "2026-03-01-h200", "H200", {"a": "skipped"})  # newer, but another device
    _folder(root, "2026-04-01-h100", "H100", {"a": "skipped"}, smoke=True)  # a smoke run's, not measurements
    assert gpu_check.fill_target({"device": "H100"}, smoke=False, root=root) == (newest, ["b", "c"])
    # a complete newest folder, or none of this device: every step, into a new folder
    _folder(root, "2026-05-01-h100", "H100", {"a": "ok", "b": "ok", "c": "ok"})
    assert gpu_check.fill_target({"device": "H100"}, smoke=False, root=root) == (None, list(NAMES))
    assert gpu_check.fill_target({"device": "B200"}, smoke=False, root=root) == (None, list(NAMES))


def test_fill_runs_only_the_missing_steps_into_that_folder(tmp_path, ran, monkeypatch):
    root = tmp_path / "gpu"
    monkeypatch.setattr(gpu_check, "GPU_ROOT", root)
    folder = _folder(root, "2026-02-01-cpu", _here()["device"], {"a": "ok", "b": "failed"}, smoke=True)
    record = gpu_check.run(list(STEPS), None, _stage(tmp_path, "f" * 40), smoke=True, budget=float("inf"),
                           archive=None, fill=True)
    assert ran == ["b", "c"]
    assert gpu_check.read_check(folder) == record
    assert {s["name"]: s["status"] for s in record["steps"]} == {"a": "ok", "b": "ok", "c": "ok"}


def test_a_call_from_another_device_is_refused_before_any_step_runs(tmp_path, ran):
    out = _folder(tmp_path, "2026-02-01-h100", "NVIDIA H100 80GB HBM3", {"a": "ok"})
    before = (out / "check.json").read_text(encoding="utf-8")
    with pytest.raises(SystemExit, match="holds measurements on NVIDIA H100 80GB HBM3, and this call makes a smoke"):
        gpu_check.run(list(STEPS), out, _stage(tmp_path, "f" * 40), smoke=True, budget=float("inf"), archive=None)
    assert ran == [] and (out / "check.json").read_text(encoding="utf-8") == before


def test_each_step_names_the_call_and_the_code_that_ran_it(tmp_path, ran):
    from docs import gen_measurements

    out = tmp_path / "folder"
    first = gpu_check.run(list(STEPS[:2]), out, _stage(tmp_path, "a" * 40), smoke=True, budget=float("inf"),
                          archive=None)
    second = gpu_check.run([STEPS[1]], out, _stage(tmp_path, "b" * 40), smoke=True, budget=float("inf"),
                           archive=None)
    assert ran == ["a", "b", "b"]
    assert [c["source"]["commit"][0] for c in second["calls"]] == ["a", "b"]
    assert {s["name"]: s["call"] for s in second["steps"]} == {"a": 0, "b": 1}
    assert second["machine"] == first["machine"] and second["source"]["commit"] == "b" * 40
    header = gen_measurements._gpu_header(gpu_check, out)
    assert f"call 1 ({first['calls'][0]['started'][:10]}" in header and f"code at {'a' * 10}): a 0 s;" in header
    assert "call 2 (" in header and f"code at {'b' * 10}): b 0 s." in header and "call 3" not in header, header


def test_a_folder_from_before_calls_kept_their_code_keeps_the_code_it_named(tmp_path, ran):
    """The committed H100 folder's record names one commit for all its steps; filling it must not credit them to
    the new call's code."""
    from docs import gen_measurements

    out = tmp_path / "folder"
    legacy = gpu_check.run(list(STEPS[:2]), out, _stage(tmp_path, "a" * 40), smoke=True, budget=float("inf"),
                           archive=None)
    for s in legacy["steps"]:
        del s["call"]
    for c in legacy["calls"]:
        del c["source"], c["machine"]
    (out / "check.json").write_text(json.dumps(legacy), encoding="utf-8")
    filled = gpu_check.run([STEPS[2]], out, _stage(tmp_path, "b" * 40), smoke=True, budget=float("inf"),
                           archive=None)
    assert {s["name"]: s["call"] for s in filled["steps"]} == {"a": None, "b": None, "c": 1}
    assert filled["earlier_source"]["commit"] == "a" * 40 and filled["source"]["commit"] == "b" * 40
    header = gen_measurements._gpu_header(gpu_check, out)
    assert f"calls before each kept its own code (code at {'a' * 10}): a 0 s, b 0 s; call 2 (" in header, header
    assert f"code at {'b' * 10}): c 0 s." in header, header


def test_fill_chooses_its_own_folder_and_steps(capsys):
    for extra in (["--out", "x"], ["--steps", "bench_fp32"]):
        with pytest.raises(SystemExit) as exc:
            gpu_check.main(["run", "--smoke", "--fill", *extra])
        assert exc.value.code == 2 and "--fill chooses the folder and the steps itself" in capsys.readouterr().err
