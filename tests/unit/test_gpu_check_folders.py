"""The GPU check's folders (benchmarks/gpu_check.py writes them, docs/performance_pages.py reads them): a folder
holds one device's rows, a later call into it records its own code and machine beside the steps it ran, and `--fill`
completes the newest folder of this device (the command the GPU machine runs), so a second allocation adds what the
first lacked instead of starting over. The steps here are a stand-in script that records its calls: what is tested is
the folder's bookkeeping, not a benchmark. A folder whose code predates the probing changes is measured again in a new
folder, as is one where that cannot be decided."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from benchmarks import gpu_check
from tests.gpu_stand_in import install_stand_in

STEPS = tuple(gpu_check.Step(name, "papa_folder_step.steps", ("{out}/" + name,), (), (), 1.0)
              for name in ("a", "b", "c"))
NAMES = tuple(s.name for s in STEPS)
#: The commit the committed-looking folders here ran: the stage says it holds the probing changes.
OLD = "0" * 40
STAND_IN = """
import os
from pathlib import Path


def main(argv):
    with open(os.environ["FOLDER_STEP_CALLS"], "a") as fh:
        fh.write(Path(argv[0]).name + "\\n")
    Path(argv[0]).write_text("{}")
    return 0
"""


@pytest.fixture
def ran(tmp_path, monkeypatch):
    """The stand-in step script, a module the steps' processes import: records the file each call names, and writes
    it; returns the calls made so far."""
    return install_stand_in(tmp_path, monkeypatch, package="papa_folder_step", source=STAND_IN, steps=STEPS,
                            calls_env="FOLDER_STEP_CALLS")


def _stage(tmp_path: Path, commit: str, known: dict | None = None) -> Path:
    stage = tmp_path / "stage"
    for sub in ("hub", "data"):
        (stage / sub).mkdir(parents=True, exist_ok=True)
    manifest = {"source": {"commit": commit, "dirty": False}, "has_probing": known or {}}
    (stage / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return stage


def _folder(root: Path, name: str, device: str, statuses: dict[str, str], smoke: bool = False,
            commit: str = OLD) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    source, machine = {"commit": commit, "dirty": False}, {"device": device}
    record = {"format": gpu_check.FORMAT, "smoke": smoke, "machine": machine, "source": source,
              "calls": [{"started": f"{name[:10]}T00:00:00+00:00", "command": "python -m benchmarks.gpu_check run",
                         "budget_s": None, "source": source, "machine": machine}],
              "steps": [{"name": n, "status": s, "call": 0} for n, s in statuses.items()]}
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
    known = {OLD: True}
    assert gpu_check.fill_plan({"device": "H100"}, smoke=False, root=root, known=known)[:2] == (newest, ["b", "c"])
    # a complete newest folder, or none of this device: every step, into a new folder
    _folder(root, "2026-05-01-h100", "H100", {"a": "ok", "b": "ok", "c": "ok"})
    assert gpu_check.fill_plan({"device": "H100"}, smoke=False, root=root, known=known)[:2] == (None, list(NAMES))
    assert gpu_check.fill_plan({"device": "B200"}, smoke=False, root=root, known=known)[:2] == (None, list(NAMES))


def test_fill_runs_only_the_missing_steps_into_that_folder(tmp_path, ran, monkeypatch):
    root = tmp_path / "gpu"
    monkeypatch.setattr(gpu_check, "GPU_ROOT", root)
    folder = _folder(root, "2026-02-01-cpu", _here()["device"], {"a": "ok", "b": "failed"}, smoke=True)
    record = gpu_check.run(list(STEPS), None, _stage(tmp_path, "f" * 40, {OLD: True}), smoke=True,
                           budget=float("inf"), archive=None, fill=True)
    assert ran() == ["b", "c"]
    assert gpu_check.read_check(folder) == record
    assert {s["name"]: s["status"] for s in record["steps"]} == {"a": "ok", "b": "ok", "c": "ok"}


def test_a_call_from_another_device_is_refused_before_any_step_runs(tmp_path, ran):
    out = _folder(tmp_path, "2026-02-01-h100", "NVIDIA H100 80GB HBM3", {"a": "ok"})
    before = (out / "check.json").read_text(encoding="utf-8")
    with pytest.raises(SystemExit, match="holds measurements on NVIDIA H100 80GB HBM3, and this call makes a smoke"):
        gpu_check.run(list(STEPS), out, _stage(tmp_path, "f" * 40), smoke=True, budget=float("inf"), archive=None)
    assert ran() == [] and (out / "check.json").read_text(encoding="utf-8") == before


def test_each_step_names_the_call_and_the_code_that_ran_it(tmp_path, ran):
    from docs import performance_pages

    out = tmp_path / "folder"
    first = gpu_check.run(list(STEPS[:2]), out, _stage(tmp_path, "a" * 40), smoke=True, budget=float("inf"),
                          archive=None)
    second = gpu_check.run([STEPS[1]], out, _stage(tmp_path, "b" * 40), smoke=True, budget=float("inf"),
                           archive=None)
    assert ran() == ["a", "b", "b"]
    assert [c["source"]["commit"][0] for c in second["calls"]] == ["a", "b"]
    assert {s["name"]: s["call"] for s in second["steps"]} == {"a": 0, "b": 1}
    assert second["machine"] == first["machine"] and second["source"]["commit"] == "b" * 40
    header = performance_pages.header(out)
    assert f"call 1 ({first['calls'][0]['started'][:10]}" in header and f"code at {'a' * 10}): a 0 s;" in header
    assert "call 2 (" in header and f"code at {'b' * 10}): b 0 s." in header and "call 3" not in header, header


def test_a_step_the_hard_limit_stopped_is_listed_as_interrupted(tmp_path, ran):
    """A call stopped by its hard limit records the step in flight as "interrupted" (`gpu_check.run`); the docs'
    header lists it so, with how long it ran and why, instead of failing on a status it did not know."""
    from docs import performance_pages

    out = tmp_path / "folder"
    record = gpu_check.run(list(STEPS[:2]), out, _stage(tmp_path, "a" * 40), smoke=True, budget=float("inf"),
                           archive=None)
    record["steps"][1].update(status="interrupted", seconds=412.3, why="the call's hard limit stopped it")
    (out / "check.json").write_text(json.dumps(record), encoding="utf-8")
    header = performance_pages.header(out)
    assert "a 0 s, b interrupted after 412 s (the call's hard limit stopped it)" in header, header


def test_a_record_without_per_call_records_is_refused(tmp_path, ran):
    """Format 1 named one code for the whole folder; its record is refused by the format check, by `run` before any
    step and by the docs, saying what to do (no step is credited to a code it did not run)."""
    from docs import performance_pages

    out = tmp_path / "folder"
    current = gpu_check.run(list(STEPS[:2]), out, _stage(tmp_path, "a" * 40), smoke=True, budget=float("inf"),
                            archive=None)
    assert gpu_check.read_check(out) == current  # a current record reads
    for s in current["steps"]:
        del s["call"]
    for c in current["calls"]:
        del c["source"], c["machine"]
    (out / "check.json").write_text(json.dumps(current), encoding="utf-8")
    lacks = ("a GPU check record that lacks each call's code and machine, each step's call; gpu_check reads format 2, "
             "whose record names each call's code and machine and each step's call")
    with pytest.raises(ValueError, match=lacks):
        gpu_check.read_check(out)
    with pytest.raises(ValueError, match=lacks):
        gpu_check.run([STEPS[2]], out, _stage(tmp_path, "b" * 40), smoke=True, budget=float("inf"), archive=None)
    assert ran() == ["a", "b"]
    (out / "check.json").write_text(json.dumps({**current, "format": 1}), encoding="utf-8")
    with pytest.raises(ValueError, match=r"record that is of format 1; .*make the check again into a new folder"):
        performance_pages.header(out)


def test_the_committed_folder_lists_its_steps_by_call():
    """The committed H100 folder, converted once to format 2 from its record and the record after its first call."""
    from docs import performance_pages

    folder = gpu_check.REPO / "artifacts" / "gpu" / "2026-11-28-nvidia-h100-80gb-hbm3"
    record = gpu_check.read_check(folder)
    assert {s["name"]: s["call"] for s in record["steps"]}["bench_bf16_compiled"] == 1
    assert {s["call"] for s in record["steps"] if s["name"] != "bench_bf16_compiled"} == {0}
    header = performance_pages.header(folder)
    assert "call 1 (2026-11-28 01:02 UTC, code at 3e2f57d35a with uncommitted changes): bench_fp32 48 s," in header
    assert "call 2 (2026-11-28 01:24 UTC, code at 3e2f57d35a with uncommitted changes): bench_bf16_compiled failed" \
        in header


def test_fill_chooses_its_own_folder_and_steps(capsys):
    for extra in (["--out", "x"], ["--steps", "bench_fp32"]):
        with pytest.raises(SystemExit) as exc:
            gpu_check.main(["run", "--smoke", "--fill", *extra])
        assert exc.value.code == 2 and "--fill chooses the folder and the steps itself" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        gpu_check.main(["run", "--smoke", "--new-folder"])
    assert exc.value.code == 2 and "--new-folder goes with --fill" in capsys.readouterr().err
    assert " run --fill --new-folder --stage" in gpu_check.device_command(gpu_check.REPO / ".gpu-stage", new=True)


def _git_history(repo: Path) -> list[str]:
    """Three commits in a new repository, oldest first."""
    git = lambda *a: subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *a], cwd=repo,  # noqa: E731
                                    check=True, capture_output=True, text=True).stdout.strip()
    repo.mkdir()
    git("init", "-q")
    commits = []
    for n in range(3):
        (repo / "f.txt").write_text(str(n))
        git("add", "f.txt")
        git("commit", "-q", "-m", str(n))
        commits.append(git("rev-parse", "HEAD"))
    return commits


def test_a_folder_of_code_before_the_probing_changes_is_measured_again(tmp_path, ran, monkeypatch):
    before, probing, after = _git_history(tmp_path / "repo")
    monkeypatch.setattr(gpu_check, "PROBING_COMMIT", probing)
    repo = tmp_path / "repo"
    assert [gpu_check.has_probing(c, repo) for c in (before, probing, after)] == [False, True, True]
    assert gpu_check.has_probing("e" * 40, repo) is None  # not in this history: cannot be decided
    assert gpu_check.has_probing("e" * 40, tmp_path / "no-git", known={"e" * 40: True}) is True  # the stage decided
    root = tmp_path / "gpu"
    _folder(root, "2026-01-01-h100", "H100", {"a": "ok", "b": "failed"}, commit=before)
    plan = gpu_check.fill_plan({"device": "H100"}, smoke=False, root=root, repo=repo)
    assert plan[:2] == (None, list(NAMES)) and "without the probing changes" in plan[2] and "measured again" in plan[2]
    newer = _folder(root, "2026-02-01-h100", "H100", {"a": "ok", "b": "failed"}, commit=after)
    assert gpu_check.fill_plan({"device": "H100"}, smoke=False, root=root, repo=repo)[:2] == (newer, ["b", "c"])
    # a flag measures again whatever the folder
    assert gpu_check.fill_plan({"device": "H100"}, smoke=False, root=root, repo=repo, new=True)[:2] == \
        (None, list(NAMES))
    # no history to decide from (the machine's copy of the checkout has no .git) and no verdict of the stage
    unknown = gpu_check.fill_plan({"device": "H100"}, smoke=False, root=root, repo=tmp_path / "no-git")
    assert unknown[:2] == (None, list(NAMES)) and "cannot be decided" in unknown[2]


def test_measuring_again_starts_a_new_folder_beside_the_days_first(tmp_path, ran, monkeypatch):
    root = tmp_path / "gpu"
    monkeypatch.setattr(gpu_check, "GPU_ROOT", root)
    machine = _here()
    first = gpu_check.default_out({**machine, "device": "H100"}, smoke=False, root=root)
    first.mkdir(parents=True)
    second = gpu_check.default_out({**machine, "device": "H100"}, smoke=False, new=True, root=root)
    assert second.name == f"{first.name}-2" and sorted([second.name, first.name])[-1] == second.name
    assert gpu_check.default_out({"device": "H100"}, smoke=False, root=root) == first  # --out-less, not --fill


def test_the_docs_read_the_format_and_folder_the_gpu_check_writes():
    from docs import performance_pages

    assert (performance_pages.FORMAT, performance_pages.GPU_ROOT) == (gpu_check.FORMAT, gpu_check.GPU_ROOT)
