"""One GPU check: the GPU speed table and the full grid's cost from one command, into one folder.

    make gpu-stage          # here: stage what must travel into .gpu-stage/ and print the command to run there
    make gpu-check          # on a CUDA machine: one call (7 minutes at most) of the steps its folder lacks
    make gpu-check SMOKE=1  # anywhere: the same steps on the CPU at tiny sizes (tests/integration/test_gpu_check.py)

`stage` copies into one ignored folder what the steps read and a bare GPU machine lacks: the configs and tokenizers
of the models timed (bert-base-uncased, roberta-base and roberta-large, all-MiniLM-L6-v2 without its weights: every
model is built from its config with seeded random weights, since time does not depend on their values), the data
files in their original formats (SST-2 and WikiText whole, since part A extracts SST-2's constants over every
sentence; of every other task a seeded random subset of `--rows` examples, in file order), and wheels of the pinned
transformers and tokenizers (`--wheels`). It refuses a tree over the transfer's 64 MiB and prints the command.

`run` first installs the staged wheels (into the stage's site/, put first on the path, their versions checked
against the pins), then executes `gpu_steps.STEPS` in order of priority, each a benchmark script's own `main` in
this process (the CUDA tests in a child process). A step whose usual time no longer fits the call's budget is
skipped and named. `--fill` (the printed command's) completes the newest committed folder of this machine's
device, running only its steps not ok, and starts a new folder when that one is complete or there is none;
`--steps` runs chosen steps into an existing folder. A folder holds one device's rows: a call on another device, or
a smoke run into a GPU folder, is refused. After every step the folder's record (`check.json`: the machine; each
call's command, the code's commit it ran and its machine's software; each step's call, command, status and
seconds) is rewritten, and with `--archive` the whole folder is packed again. One call runs under a hard limit
(`gpu_steps.CALL_LIMIT_S`): its SIGTERM marks the step it stopped "interrupted", writes the record and packs the
folder; `pack`, which the printed command runs after the call whatever happened, packs it again (a SIGKILL leaves
no time for the handler). docs/gen_measurements.py renders the newest committed folder into docs/performance.md
and docs/scaling.md; `goals` reads the targets off it.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from benchmarks.gpu_stage import STAGE, device_command, stage
from benchmarks.gpu_steps import CALL_BUDGET_S, CALL_LIMIT_S, PYTEST, STEP_NAMES, STEPS, Step
from benchmarks.grid_prediction import GOALS

BENCHMARKS = Path(__file__).resolve().parent
REPO = BENCHMARKS.parent

#: Record format of `check.json`: 2 since each call records its code and machine and each step the call that ran it
#: (format 1 named one code and machine for the whole folder); `read_check` refuses any other.
FORMAT = 2
GPU_ROOT = REPO / "artifacts" / "gpu"
#: Where `run` notes, under the stage, the folder it writes: `pack` reads it after the call.
LAST_FOLDER = "last_folder.txt"
#: papa's declared dependencies a bare CUDA image lacks (the image this was built against, 2026-11-17) and nothing
#: carries: the check must not import them (tests/integration/test_gpu_check.py reads the smoke run's imports).
NOT_ON_GPU_IMAGE = ("datasets", "evaluate", "nbformat", "papermill", "ipykernel", "ipywidgets", "anywidget",
                    "jupyter_client", "traitlets", "submitit", "gguf", "jupyterlab")

# ---- running (on the GPU) ---------------------------------------------------------------------------------------

def describe_machine(cuda: bool) -> dict:
    """The machine, its software and where the code came from."""
    from benchmarks.timing import cpu_name
    import torch

    versions = {}
    for name in ("torch", "transformers", "tokenizers", "huggingface_hub", "numpy", "pandas", "scipy", "accelerate"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    machine = {"cpu": cpu_name(), "python": platform.python_version(), "platform": platform.platform(),
               "versions": versions, "cuda": torch.version.cuda}
    if cuda:
        props = torch.cuda.get_device_properties(0)
        smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True) if shutil.which("nvidia-smi") else None
        machine.update(device=torch.cuda.get_device_name(0), gpu_memory_gib=round(props.total_memory / 2**30, 1),
                       multiprocessors=props.multi_processor_count,
                       driver=smi.stdout.strip() if smi and smi.returncode == 0 else None)
    else:
        machine["device"] = f"CPU: {machine['cpu']}"
    return machine


def _shown(path: Path) -> str:
    """`path` relative to the working folder when inside it: the records written keep no path of the machine."""
    full = path.resolve()
    roots = [(Path.cwd(), "{}")] + ([(Path(os.environ["OUT"]), "$OUT/{}")] if os.environ.get("OUT") else [])
    for root, shown in roots:
        if full.is_relative_to(root.resolve()):
            return shown.format(full.relative_to(root.resolve()))
    return str(path)


def step_argv(step: Step, smoke: bool, hub: Path, data: Path, out: Path) -> list[str]:
    fill = {"hub": _shown(hub), "data": _shown(data), "out": _shown(out)}
    return [a.format(**fill) for a in (*step.args, *(step.smoke if smoke else step.gpu))]


def _estimated(files: list[str]) -> tuple[dict, dict]:
    """(cost, estimate) of the cost files, the estimate carrying the files' precision ("bf16", "float32", or both)."""
    from benchmarks import grid_estimate

    cost = grid_estimate.load(files)
    precisions = {json.loads(Path(f).read_text(encoding="utf-8")).get("precision", "float32") for f in files}
    return cost, {**grid_estimate.estimate(cost), "precision": "/".join(sorted(precisions))}


def _estimate(argv: list[str]) -> int:
    """grid_estimate.py over the cost files that exist: its tables into estimate.md, its numbers into estimate.json."""
    from benchmarks import grid_estimate

    files = [p for p in argv if Path(p).is_file()]
    if not files:
        raise RuntimeError("no cost file to estimate from: the cost steps did not run")
    cost, est = _estimated(files)
    printed = grid_estimate.report(cost, est)
    folder = Path(files[0]).parent
    (folder / "estimate.md").write_text(printed, encoding="utf-8")
    keep = ("precision", "jobs", "points", "preparations", "per_model", "per_task", "totals", "parts", "chain_s",
            "unfit", "unfit_jobs", "unfit_backbone_s", "unfit_blocks_s", "prediction")
    record = {"from": [Path(f).name for f in files], **{k: est[k] for k in keep if k in est}}
    _write_json(folder / "estimate.json", record)
    sys.stdout.write(printed)
    return 0


def _main_of(script: str):
    """The `main` a step calls: the estimate, the CUDA tests, or module `script` of benchmarks/."""
    if script == "estimate":
        return _estimate
    if script == "pytest":
        return PYTEST
    return importlib.import_module(f"benchmarks.{script}").main


class _Tee(io.TextIOBase):
    """Writes to every stream, with the working folder's path left out (a traceback names files by it)."""

    def __init__(self, *streams):
        self.streams = streams
        self.here = f"{Path.cwd().resolve()}/"

    def write(self, text: str) -> int:
        shown = text.replace(self.here, "")
        for s in self.streams:
            s.write(shown)
            s.flush()
        return len(text)


def run_step(step: Step, argv: list[str], log: Path) -> dict:
    """One step in this process, its output to the terminal and `log`; failures are recorded, not raised."""
    start = time.perf_counter()
    status, why = "ok", None
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w", encoding="utf-8") as fh, contextlib.redirect_stdout(_Tee(sys.__stdout__, fh)), \
            contextlib.redirect_stderr(_Tee(sys.__stderr__, fh)):
        print(f"## {step.name}: {step.script} {' '.join(argv)}", flush=True)
        try:
            code = _main_of(step.script)(argv)
            if code:
                status, why = "failed", f"exit status {code}"
        except BaseException as exc:  # noqa: BLE001 -- one step's failure must not lose the others
            if isinstance(exc, (KeyboardInterrupt, CallStopped)):
                raise
            first_line = (str(exc).strip().splitlines() or [""])[0]  # a traceback's context is in the log
            status, why = "failed", f"{type(exc).__name__}: {first_line}"
            import traceback

            traceback.print_exc()
    return {"name": step.name, "script": step.script, "argv": argv, "status": status, "why": why,
            "seconds": round(time.perf_counter() - start, 1)}


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
    os.replace(tmp, path)


def _pack(folder: Path, archive: Path) -> None:
    tmp = archive.with_name(f".{archive.name}.tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        tar.add(folder, arcname=folder.name)
    os.replace(tmp, archive)


def default_out(machine: dict, smoke: bool) -> Path:
    if smoke:
        return REPO / "artifacts" / "gpu_smoke"
    slug = "".join(c if c.isalnum() else "-" for c in machine["device"].lower()).strip("-")
    return GPU_ROOT / f"{datetime.now(timezone.utc):%Y-%m-%d}-{'-'.join(p for p in slug.split('-') if p)}"


def folder_refusal(record: dict, machine: dict, smoke: bool) -> str | None:
    """Why a folder whose record is `record` cannot take this machine's steps (its rows come from one device, smoke
    or not), or None."""
    held = record["machine"].get("device")
    if bool(record.get("smoke")) != smoke or held != machine["device"]:
        kind = lambda is_smoke: "a smoke run" if is_smoke else "measurements"  # noqa: E731
        return (f"it holds {kind(bool(record.get('smoke')))} on {held}, and this call makes {kind(smoke)} on "
                f"{machine['device']}")
    return None


def fill_target(machine: dict, smoke: bool, root: Path | None = None) -> tuple[Path | None, list[str]]:
    """Where `--fill` runs: (the newest folder under `root` (default `GPU_ROOT`) made on this machine's device, and
    its steps not yet ok, in `STEPS` order) when that folder has such steps; else (None, every step) for a new
    folder."""
    for folder in checked_folders(GPU_ROOT if root is None else root):
        record = read_check(folder)
        if folder_refusal(record, machine, smoke) is None:
            done = {s["name"] for s in record["steps"] if s["status"] == "ok"}
            missing = [name for name in STEP_NAMES if name not in done]
            return (folder, missing) if missing else (None, list(STEP_NAMES))
    return None, list(STEP_NAMES)


class CallStopped(BaseException):
    """The call's hard limit (SIGTERM from `timeout`) stopped it: the step in flight is recorded as interrupted."""


def _stop_on_sigterm(signum, frame) -> None:
    PYTEST.stop()
    raise CallStopped


def use_staged_wheels(stage_dir: Path, pins: list[str]) -> list[str]:
    """Install the stage's wheels into its site/ (once per machine), put it first on the path (this process's and its
    children's) and check that the pinned versions are the ones imported; returns the pins. Nothing staged: []."""
    wheels = sorted((stage_dir / "wheels").glob("*.whl"))
    if not wheels:
        return []
    site = (stage_dir / "site").resolve()
    if not (site / ".installed").is_file():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                        "--no-cache-dir", "--upgrade", "--target", str(site), *map(str, wheels)], check=True)
        (site / ".installed").write_text("\n".join(w.name for w in wheels), encoding="utf-8")
    sys.path.insert(0, str(site))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    wrong = [f"{pin} ({metadata.version(pin.split('==')[0])} found)" for pin in pins
             if metadata.version(pin.split("==")[0]) != pin.split("==")[1]]
    if wrong:
        raise SystemExit(f"gpu_check run: the staged wheels did not take: {', '.join(wrong)}; delete {site} and "
                         "run again")
    return pins


def _open_record(out: Path, machine: dict, smoke: bool, manifest: dict, budget: float) -> tuple[dict, int]:
    """`out`'s record with this call added (a new record when there is none), and the call's index; a folder of
    another device, or smoke where this is not, is refused."""
    path = out / "check.json"
    record = read_check(out) if path.is_file() else None
    why = folder_refusal(record, machine, smoke) if record else None
    if why:
        raise SystemExit(f"gpu_check run: {_shown(out)} cannot take this call's steps: {why}. A folder's rows come "
                         "from one device: leave out --out (a new folder per date and device), or pass --fill")
    out.mkdir(parents=True, exist_ok=True)
    record = record or {"steps": [], "machine": machine}
    # a later call (--steps or --fill, into the same folder) adds to the record: each call keeps its command, the
    # code it ran (the stage's commit) and its machine's software, and each step names the call that ran it
    call = {"started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": "python -m benchmarks.gpu_check " + " ".join(_shown(Path(a)) if os.path.isabs(a) else a
                                                                   for a in sys.argv[1:]),
            "budget_s": budget if budget != float("inf") else None,  # JSON has no infinity
            "source": manifest["source"], "machine": machine}
    calls = [*record.get("calls", []), call]
    # `machine` stays the folder's first (its device is every call's); `source` is the latest call's; a step's `call`
    # indexes `calls`
    record.update(format=FORMAT, source=manifest["source"], staged=manifest, smoke=smoke, calls=calls)
    return record, len(calls) - 1


def _save(record: dict, out: Path, step: dict, archive: Path | None) -> None:
    """`step`'s entry into the record (replacing an earlier one of its name), written, and the folder packed."""
    record["steps"] = [s for s in record["steps"] if s["name"] != step["name"]] + [step]
    record["imports"] = sorted({m.split(".")[0] for m in sys.modules} - set(sys.stdlib_module_names))
    _write_json(out / "check.json", record)
    if archive is not None:
        _pack(out, archive)


def run(steps: list[Step], out: Path | None, stage_dir: Path, smoke: bool, budget: float, archive: Path | None,
        fill: bool = False) -> dict:
    """Run `steps` into `out` (module docstring); with `fill`, only those of `fill_target`'s steps, into its folder.
    Returns the record written to `out/check.json`."""
    for where in (stage_dir / "hub", stage_dir / "data"):
        if not where.is_dir():
            raise SystemExit(f"gpu_check run: {where} is missing: run `make gpu-stage` (gpu_check.py stage) first")
    manifest = json.loads((stage_dir / "manifest.json").read_text(encoding="utf-8"))
    use_staged_wheels(stage_dir, manifest.get("wheels", []))  # before anything imports transformers
    import torch

    if not smoke and not torch.cuda.is_available():
        raise SystemExit("gpu_check run: no CUDA device here; --smoke runs the same steps on the CPU at tiny sizes")
    os.environ.update(PAPA_PROGRESS="0", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    machine = describe_machine(cuda=not smoke)
    if fill:
        found, names = fill_target(machine, smoke)
        steps = [s for s in steps if s.name in names]
        out = found or default_out(machine, smoke)
        print(f"gpu_check run --fill: {_shown(out)}, {'the steps it lacks' if found else 'every step'}: "
              f"{', '.join(s.name for s in steps)}", flush=True)
    out = out or default_out(machine, smoke)
    record, call = _open_record(out, machine, smoke, manifest, budget)
    (stage_dir / LAST_FOLDER).write_text(str(out.resolve()), encoding="utf-8")  # what `pack` packs after the call
    start = time.perf_counter()
    previous = signal.signal(signal.SIGTERM, _stop_on_sigterm)
    try:
        for step in steps:
            left = budget - (time.perf_counter() - start)
            if step.usual_s > left:
                entry = {"name": step.name, "script": step.script, "status": "skipped",
                         "why": f"{max(left, 0):.0f} s of the {budget:.0f} s budget left; it takes about "
                                f"{step.usual_s:.0f} s (the next call with --fill runs it)", "seconds": 0.0}
            else:
                argv = step_argv(step, smoke, stage_dir / "hub", stage_dir / "data", out)
                began = time.perf_counter()
                try:
                    entry = run_step(step, argv, out / "logs" / f"{step.name}.log")
                except CallStopped:
                    _save(record, out, {"name": step.name, "script": step.script, "argv": argv, "call": call,
                                        "status": "interrupted", "seconds": round(time.perf_counter() - began, 1),
                                        "why": "the call's hard limit stopped it (the next call with --fill runs it)"},
                          archive)
                    raise SystemExit(124) from None
            entry["call"] = call
            _save(record, out, entry, archive)
    finally:
        signal.signal(signal.SIGTERM, previous)
    return record


def pack(stage_dir: Path, archive: Path) -> Path | None:
    """Pack the folder the last `run` from `stage_dir` wrote into `archive` (after a call, whatever ended it);
    None when no run started."""
    marker = stage_dir / LAST_FOLDER
    if not marker.is_file():
        return None
    folder = Path(marker.read_text(encoding="utf-8").strip())
    if not folder.is_dir():
        return None
    _pack(folder, archive)
    return folder


# ---- reading a folder (docs/gen_measurements.py) ----------------------------------------------------------------

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
    return _estimated(files) if files else None


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    st = sub.add_parser("stage", help="stage what a GPU machine needs (here) and print the command to run there")
    st.add_argument("--stage", type=Path, default=STAGE)
    st.add_argument("--hub", type=Path, default=REPO.parent / "shared" / "hub",
                    help="folder holding roberta-base/ and roberta-large/ (config and tokenizer files)")
    st.add_argument("--data-dir", type=Path, default=os.environ.get("PAPA_DATA_DIR") or None)
    st.add_argument("--rows", type=int, default=2048, help="examples staged per file of a task not in WHOLE")
    st.add_argument("--no-wheels", dest="wheels", action="store_false",
                    help="carry no wheels: for a machine that has papa's dependencies installed")
    st.add_argument("--python", default="3.12", help="the GPU machine's Python, for the wheels (default 3.12)")
    rn = sub.add_parser("run", help="run the check (on a CUDA machine; --smoke on the CPU)")
    rn.add_argument("--stage", type=Path, default=STAGE)
    rn.add_argument("--out", type=Path, default=None,
                    help="the folder (default artifacts/gpu/<date>-<device>; --smoke artifacts/gpu_smoke)")
    rn.add_argument("--smoke", action="store_true", help="the CPU at tiny sizes: the code paths, not the numbers")
    rn.add_argument("--budget", type=float, default=None,
                    help=f"seconds the steps may plan for (default {CALL_BUDGET_S}, one call's share of its "
                         f"{CALL_LIMIT_S} s hard limit; --smoke no limit)")
    rn.add_argument("--steps", nargs="+", choices=STEP_NAMES, default=None, help="only these steps")
    rn.add_argument("--fill", action="store_true",
                    help="run the steps the newest folder of this device lacks (not ok) into it; when it lacks none, "
                         "or there is none, every step into a new folder (the command `stage` prints)")
    rn.add_argument("--archive", type=Path, default=None, help="pack the folder into this .tar.gz after every step")
    cm = sub.add_parser("command", help="print the one command a call runs (what `make gpu-check` runs)")
    cm.add_argument("--stage", type=Path, default=STAGE)
    cm.add_argument("--python", default="python3", help="the interpreter the command names")
    cm.add_argument("--smoke", action="store_true")
    pk = sub.add_parser("pack", help="after a call, whatever ended it: pack the folder its run wrote into --archive")
    pk.add_argument("--stage", type=Path, default=STAGE)
    pk.add_argument("--archive", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.verb == "command":
        print(device_command(args.stage, args.python, args.smoke))
        return 0
    if args.verb == "pack":
        folder = pack(args.stage, args.archive)
        print(f"gpu_check pack: {_shown(folder)} into {_shown(args.archive)}" if folder else
              "gpu_check pack: no run started from this stage: nothing to pack")
        return 0
    if args.verb == "run" and args.fill and (args.out or args.steps):
        parser.error("--fill chooses the folder and the steps itself: pass it without --out and --steps")
    if args.verb == "stage":
        if args.data_dir is None or not Path(args.data_dir).is_dir():
            parser.error("no data directory: pass --data-dir or set PAPA_DATA_DIR (glue_data/, conll2003/, wikitext/)")
        manifest = stage(args.stage, args.hub, Path(args.data_dir), args.rows, args.wheels, args.python)
        print(f"Staged {args.stage} ({manifest['bytes'] / 2**20:.1f} MiB with the working tree). On the GPU "
              f"machine, carrying {args.stage.name}, run from the checkout's root:\n\n"
              f"    {device_command(args.stage)}\n\nthen unpack gpu_check.tar.gz under artifacts/gpu/ "
              "and run `python docs/gen_measurements.py`.")
        return 0
    steps = [s for s in STEPS if args.steps is None or s.name in args.steps]
    budget = args.budget if args.budget is not None else (float("inf") if args.smoke else float(CALL_BUDGET_S))
    record = run(steps, args.out, args.stage, args.smoke, budget, args.archive, fill=args.fill)
    print("\n| step | status | seconds |\n|---|---|---|")
    for s in record["steps"]:
        print(f"| {s['name']} | {s['status']}{': ' + s['why'] if s.get('why') else ''} | {s['seconds']:.1f} |")
    return 0 if all(s["status"] != "failed" for s in record["steps"]) else 1


if __name__ == "__main__":
    sys.exit(main())
