"""The GPU check's folders: where a call writes, which folder `--fill` completes or starts anew, the plan from measured
times, and what a folder's record and goals say.

A folder under `GPU_ROOT` holds one device's rows (`check.json`, of format `FORMAT`, beside the steps' files):
benchmarks/gpu_check.py writes it, docs/gen_measurements.py reads it through `read_check`, `folder_estimate` and
`goals`. The steps are read off `gpu_steps` when a plan is made (`gpu_steps.STEPS`, `gpu_steps.STEP_NAMES`), not
copied at import.
"""
from __future__ import annotations

import json
import math
import subprocess
from datetime import datetime, timezone
from pathlib import Path

from benchmarks import gpu_steps
from benchmarks.grid_prediction import GOALS

REPO = Path(__file__).resolve().parents[1]

#: Record format of `check.json`: 2 since each call records its code and machine and each step the call that ran it
#: (format 1 named one code and machine for the whole folder); `read_check` refuses any other.
FORMAT = 2
#: Where the committed checks' folders are, one per device and date.
GPU_ROOT = REPO / "artifacts" / "gpu"
#: The commit of the probing code the check measures (its devices named, graphs captured thread-local, pinned
#: staging buffers, one compiled AdamW update): `--fill` completes no folder whose calls ran code without it.
PROBING_COMMIT = "478515be72bd6bb68b498feaa0a835d281bb714b"
#: Margin on a measured step time when planning a call: a step's time varies from call to call (compilation caches,
#: the machine's clocks).
MEASURED_MARGIN = 1.2


def estimated(files: list[str]) -> tuple[dict, dict]:
    """(cost, estimate) of the cost files, the estimate carrying the files' precision ("bf16", "float32", or both)."""
    from benchmarks import grid_estimate

    cost = grid_estimate.load(files)
    precisions = {json.loads(Path(f).read_text(encoding="utf-8")).get("precision", "float32") for f in files}
    return cost, {**grid_estimate.estimate(cost), "precision": "/".join(sorted(precisions))}


def default_out(machine: dict, smoke: bool, new: bool = False, root: Path | None = None) -> Path:
    """The folder a call writes without `--out`: <date>-<device> under `root` (default `GPU_ROOT`); with `new`, one
    that does not exist yet (-2, -3, ... after the date's first, so that names keep their order)."""
    if smoke:
        return REPO / "artifacts" / "gpu_smoke"
    slug = "".join(c if c.isalnum() else "-" for c in machine["device"].lower()).strip("-")
    base = (GPU_ROOT if root is None else root) / f"{datetime.now(timezone.utc):%Y-%m-%d}-" \
        f"{'-'.join(p for p in slug.split('-') if p)}"
    out, n = base, 1
    while new and out.exists():
        n += 1
        out = base.with_name(f"{base.name}-{n}")
    return out


def folder_refusal(record: dict, machine: dict, smoke: bool) -> str | None:
    """Why a folder whose record is `record` cannot take this machine's steps (its rows come from one device, smoke
    or not), or None."""
    held = record["machine"].get("device")
    if bool(record.get("smoke")) != smoke or held != machine["device"]:
        kind = lambda is_smoke: "a smoke run" if is_smoke else "measurements"  # noqa: E731
        return (f"it holds {kind(bool(record.get('smoke')))} on {held}, and this call makes {kind(smoke)} on "
                f"{machine['device']}")
    return None


def has_probing(commit: str | None, repo: Path = REPO, known: dict | None = None) -> bool | None:
    """Whether code at `commit` holds `PROBING_COMMIT`: `git merge-base --is-ancestor` in `repo`, else what the stage
    decided where git had the history (`known`, commit to verdict), else None (it cannot be decided)."""
    if commit:
        try:
            code = subprocess.run(["git", "merge-base", "--is-ancestor", PROBING_COMMIT, commit], cwd=repo,
                                  capture_output=True).returncode
        except OSError:  # no git on the machine
            code = None
        if code in (0, 1):
            return code == 0
    return (known or {}).get(commit)


def folder_commits(record: dict) -> list[str | None]:
    """The code commits a folder's calls ran, in call order, each once."""
    return list(dict.fromkeys(c["source"].get("commit") for c in record["calls"]))


def fill_plan(machine: dict, smoke: bool, root: Path | None = None, new: bool = False, repo: Path = REPO,
              known: dict | None = None) -> tuple[Path | None, list[str], str]:
    """Where `--fill` runs and why: (the newest folder under `root` (default `GPU_ROOT`) made on this machine's device,
    its steps not yet ok in `STEPS` order, why) when that folder lacks steps and every call into it ran code holding
    `PROBING_COMMIT`; else (None, every step, why) for a new folder: with `new`, when the newest folder is complete or
    there is none, when its code predates the probing changes, or when that cannot be decided (`has_probing`)."""
    every = list(gpu_steps.STEP_NAMES)
    if new:
        return None, every, "--new-folder"
    for folder in checked_folders(GPU_ROOT if root is None else root):
        record = read_check(folder)
        if folder_refusal(record, machine, smoke) is not None:
            continue
        verdicts = {c: has_probing(c, repo, known) for c in folder_commits(record)}
        old = [str(c)[:10] for c, v in verdicts.items() if v is False]
        if old:
            return None, every, (f"{folder.name} measured code at {', '.join(old)}, without the probing changes "
                                 f"({PROBING_COMMIT[:10]}): measured again")
        unknown = [str(c)[:10] for c, v in verdicts.items() if v is None]
        if unknown:
            return None, every, (f"whether {folder.name}'s code ({', '.join(unknown)}) holds the probing changes "
                                 f"({PROBING_COMMIT[:10]}) cannot be decided here (no git history of it, nor the "
                                 "stage's verdict): measured again")
        done = {s["name"] for s in record["steps"] if s["status"] == "ok"}
        missing = [name for name in every if name not in done]
        if missing:
            return folder, missing, f"{folder.name} lacks them"
        return None, every, f"{folder.name} is complete"
    return None, every, "no folder of this device"


def fill_target(machine: dict, smoke: bool, root: Path | None = None, **rule) -> tuple[Path | None, list[str]]:
    """`fill_plan`'s folder and steps."""
    return fill_plan(machine, smoke, root, **rule)[:2]


def planned_seconds(machine: dict, root: Path | None = None) -> dict[str, tuple[float, str]]:
    """Each step's (planned seconds, where they come from): its time in the newest committed folder under `root`
    (default `GPU_ROOT`) where it finished ok, folders of this machine's device first, times `MEASURED_MARGIN` and
    rounded up; else its `usual_s`."""
    found: dict[str, tuple[float, str]] = {}
    folders = checked_folders(GPU_ROOT if root is None else root)
    records = []
    for folder in folders:
        try:
            records.append((folder, read_check(folder)))
        except (ValueError, KeyError, json.JSONDecodeError):
            continue  # a record gpu_check cannot read plans nothing
    same = lambda r: r["machine"].get("device") == machine.get("device")  # noqa: E731
    for folder, record in [x for x in records if same(x[1])] + [x for x in records if not same(x[1])]:
        if record.get("smoke"):
            continue
        for s in record["steps"]:
            if s["status"] == "ok" and s["name"] not in found:
                found[s["name"]] = (float(math.ceil(s["seconds"] * MEASURED_MARGIN)), f"measured in {folder.name}")
    return {step.name: found.get(step.name, (step.usual_s, "usual time")) for step in gpu_steps.STEPS}


def checked_folders(root: Path) -> list[Path]:
    """The folders under `root` a check wrote (they hold a check.json), newest first: by the date their names start
    with (on one date, the last name in order)."""
    return sorted((p.parent for p in root.glob("*/check.json")), key=lambda p: p.name, reverse=True)


def latest(root: Path = GPU_ROOT) -> Path | None:
    """The newest folder a full (not smoke) check wrote under `root` (`checked_folders`' order)."""
    return next((p for p in checked_folders(root)
                 if not json.loads((p / "check.json").read_text(encoding="utf-8")).get("smoke")), None)


def read_check(folder: Path) -> dict:
    """`folder`'s record, through its one format check: a record of another format, or without its steps, its machine
    or its per-call records (each call's code and machine, each step's call), is refused saying what to do."""
    path = folder / "check.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    calls = record.get("calls") if isinstance(record.get("calls"), list) else []
    lacks = [what for what, missing in (
        ("its steps", "steps" not in record), ("its machine", "machine" not in record),
        ("each call's code and machine", not calls or any("source" not in c or "machine" not in c for c in calls)),
        ("each step's call", any(not isinstance(s.get("call"), int) or not 0 <= s["call"] < len(calls)
                                 for s in record.get("steps", []))),
    ) if missing]
    if record.get("format") != FORMAT or lacks:
        has = (f"is of format {record.get('format')!r}" if record.get("format") != FORMAT else
               f"lacks {', '.join(lacks)}")
        raise ValueError(f"{path}: a GPU check record that {has}; gpu_check reads format {FORMAT}, whose record names "
                         "each call's code and machine and each step's call (format 1 named one code for the whole "
                         "folder): make the check again into a new folder (make gpu-check).")
    return record


#: The estimate's targets (one owner: `grid_prediction.GOALS`): (goal, model or None for the whole grid,
#: hours, estimate / FLOP floor at 40% of the dense peak), read in bf16.
HOUR_GOALS = GOALS
#: The speed table's targets read here: (goal, what the bench row starts with), each in float32 and bf16, eager.
SPEED_GOALS = (("capture ≥ 0.85× the plain forward", "capture (papa)"),
               ("attention-free ≥ 95% of its MAC ceiling", "attention-free"))
#: The targets of the bench at the grid's shapes (bench_grid.json): (goal, the variant its saturating rows name).
SATURATING_GOALS = (("capture ≥ 0.85× the plain forward at a saturating batch", "capture (papa)"),
                    ("1/2 heads ≥ 1.0× the plain forward at a saturating batch", "1/2 input-dependent"))


#: The target of the training steps: (goal, the step kinds it reads, least speed-up over eager), read off each
#: steps file (steps_bf16.json: graphed; steps_bf16_compiled.json: compiled), at Table 3's batches.
STEP_GOAL = ("λ and trained-constant steps ≥ 5× faster than eager bf16 steps", ("lambda", "trainable"), 5.0)


def _step_goals(folder: Path) -> list[dict]:
    """`STEP_GOAL` as `folder`'s step benches read it, one line per mode beside eager (met None where not run)."""
    goal, kinds, least = STEP_GOAL
    found = []
    for name, mode in (("steps_bf16", "graphed"), ("steps_bf16_compiled", "compiled")):
        path = folder / f"{name}.json"
        rows = json.loads(path.read_text(encoding="utf-8"))["rows"] if path.is_file() else []
        read = [r for r in rows if r["kind"] in kinds and r["mode"] == mode and r["speedup_vs_eager"] is not None]
        value = ", ".join(f"{r['model']} {r['task']} {r['kind']}: {r['speedup_vs_eager']:.2f}×" for r in read)
        found.append({"goal": f"{goal}, {mode}", "value": value or "not run",
                      "met": all(r["speedup_vs_eager"] >= least for r in read) if read else None})
    return found


def _hour_goal(goal: str, model: str | None, hours: float | None, ratio: float | None, est: dict) -> dict:
    part = est["per_model"][model] if model else est["totals"]
    if est.get("precision") != "bf16":
        return {"goal": goal, "value": f"the estimate is in {est.get('precision')}", "met": None}
    if hours is not None:
        value = part["estimate"] / 3600
        return {"goal": goal, "value": f"{value:.1f} h", "met": value <= hours}
    value = part["estimate"] / part["flop_floor_40_s"]
    return {"goal": goal, "value": f"{value:.2f}×", "met": value <= ratio}


def _saturating_goals(folder: Path) -> list[dict]:
    """`SATURATING_GOALS` as `folder`'s bench at the grid's shapes reads them (met None where it did not run)."""
    path = folder / "bench_grid.json"
    rows = json.loads(path.read_text(encoding="utf-8"))["rows"] if path.is_file() else []
    found = []
    for goal, what in SATURATING_GOALS:
        read = [r for r in rows if "saturating" in r["what"] and what in r["what"] and r["met"] is not None]
        value = ", ".join(f"{r['model'].removesuffix(' (random)')}: {r['ratio']:.2f}×" for r in read)
        found.append({"goal": goal, "value": value or "not run", "met": all(r["met"] for r in read) if read else None})
    return found


def folder_estimate(folder: Path) -> tuple[dict, dict] | None:
    """(cost, estimate) of the cost files `folder`'s estimate step read, estimated again by this checkout's
    grid_estimate.py (the docs are generated from the measurements, not from the printout), or None where the step
    did not run. The estimate carries the cost files' precision."""
    step = next((s for s in read_check(folder)["steps"] if s["name"] == "estimate_bf16" and s["status"] == "ok"), None)
    files = [folder / Path(a).name for a in step["argv"]] if step else []
    files = [str(f) for f in files if f.is_file()]
    return estimated(files) if files else None


def goals(folder: Path) -> list[dict]:
    """Every goal as `folder` reads them: {goal, value, met}; met is None where a step did not run."""
    found = []
    est = (folder_estimate(folder) or (None, None))[1]
    for goal, model, hours, ratio in HOUR_GOALS:
        found.append(_hour_goal(goal, model, hours, ratio, est) if est else
                     {"goal": goal, "value": "not run", "met": None})
    for dtype in ("fp32", "bf16"):
        path = folder / f"bench_{dtype}.json"
        rows = json.loads(path.read_text(encoding="utf-8"))["rows"] if path.is_file() else []
        for goal, what in SPEED_GOALS:
            read = [r for r in rows if r["what"].startswith(what) and r["met"] is not None]
            value = ", ".join(f"{r['model'].removesuffix(' (random)')} n = {r['n']}: {r['ratio']:.2f}×" for r in read)
            found.append({"goal": f"{goal}, {'float32' if dtype == 'fp32' else dtype}", "value": value or "not run",
                          "met": all(r["met"] for r in read) if read else None})
    return found + _saturating_goals(folder) + _step_goals(folder)
