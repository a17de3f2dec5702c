"""One GPU check: the GPU speed table and the full grid's cost from one command, into one folder.

    make gpu-stage          # here: stage what must travel into .gpu-stage/ and print the command to run there
    make gpu-check          # on a CUDA machine: one call (7 minutes at most) of the steps its folder lacks
    make gpu-check SMOKE=1  # anywhere: the same steps on the CPU at tiny sizes (tests/integration/test_gpu_check.py)

`stage` packs into one ignored folder what the steps read and a bare GPU machine lacks, as one .tar.xz
(gpu_stage.py): the configs and tokenizers of the models timed (bert-base-uncased, roberta-base and roberta-large,
all-MiniLM-L6-v2 without its weights: every model is built from its config with seeded random weights, since time
does not depend on their values), the data files in their original formats (SST-2 and WikiText whole, since part A
extracts SST-2's constants over every sentence; of every other task a seeded random subset of `--rows` examples, in
file order), and the pinned transformers, unzipped from its wheel (`--no-wheels`: none). It refuses a tree over the
transfer's 64 MiB and prints the command.

`run` first unpacks the stage and puts its transformers first on the path (this process's and its children's, the
version checked against the pin; a package older than its pin in constraints.txt is printed and recorded in the
call), then executes `gpu_steps.STEPS` in order of priority, each a benchmark script's own `main` in a process of
its own (a CUDA error, an abort or a leaked allocation of one step cannot spoil the next). A step is planned at its
measured time in the committed folders (this device's first, with a margin), else its usual time; one that no longer
fits the call's budget is skipped and named. `--fill` (the printed command's) completes the newest committed folder
of this machine's device, running only its steps not ok, and starts a new folder when that one is complete, when
there is none, when its code predates `gpu_folders.PROBING_COMMIT` (the code it measured is not the code to
measure), when that cannot be decided, or with `--new-folder`; `--steps` runs chosen steps into an existing folder.
A folder holds one device's rows: a call on another device, or a smoke run into a GPU folder, is refused. A step is
entered in the folder's record (`check.json`: the machine; each call's command, the code's commit it ran and its
machine's software; each step's call, command, status and seconds) as "running" when it starts, and again when it
ends; with `--archive` the whole folder is packed each time. One call runs under a hard limit
(`gpu_steps.CALL_LIMIT_S`): its SIGTERM stops the step's process, marks the step "interrupted", writes the record
and packs the folder; `pack`, which the printed command runs after the call whatever happened, marks a step still
"running" (a SIGKILL leaves no time for the handler) interrupted and packs it again. Where a call writes, the plan
and the reading of a folder are gpu_folders.py's: docs/gen_measurements.py renders the newest committed folder into
docs/performance.md and docs/scaling.md, and `gpu_folders.goals` reads the targets off it.
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

from benchmarks.gpu_stage import STAGE, device_command, stage, unpack
from benchmarks.gpu_folders import (FORMAT, GPU_ROOT, checked_folders, default_out, estimated, fill_plan,
                                    folder_commits, folder_refusal, has_probing, planned_seconds, read_check)
from benchmarks.gpu_steps import CALL_BUDGET_S, CALL_LIMIT_S, PYTEST, STEP_NAMES, STEPS, Step

BENCHMARKS = Path(__file__).resolve().parent
REPO = BENCHMARKS.parent

#: Where `run` notes, under the stage, the folder it writes: `pack` reads it after the call.
LAST_FOLDER = "last_folder.txt"
#: Pins checked against what runs: an older version than constraints.txt's is printed and recorded.
PINNED = ("torch", "transformers", "tokenizers", "huggingface_hub")
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


def _estimate(argv: list[str]) -> int:
    """grid_estimate.py over the cost files that exist: its tables into estimate.md, its numbers into estimate.json."""
    from benchmarks import grid_estimate

    files = [p for p in argv if Path(p).is_file()]
    if not files:
        raise RuntimeError("no cost file to estimate from: the cost steps did not run")
    cost, est = estimated(files)
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
    """The `main` a step calls: the estimate, the CUDA tests, module `script` of benchmarks/, or the module a dotted
    `script` names."""
    if script == "estimate":
        return _estimate
    if script == "pytest":
        return PYTEST
    return importlib.import_module(script if "." in script else f"benchmarks.{script}").main


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


def _imports() -> set[str]:
    """The top-level packages this process imported, the standard library left out."""
    return {m.split(".")[0] for m in sys.modules} - set(sys.stdlib_module_names)


#: The step's process while it runs: the hard limit's handler stops it.
_CHILD: list[subprocess.Popen] = []


def run_in_child(step: Step, argv: list[str], log: Path) -> tuple[dict, set[str]]:
    """(entry, imports) of one step run by `run_step` in a process of its own (the `step` verb), so that a CUDA error,
    an abort or memory it leaves behind ends with it; a process that dies before writing its result is recorded as
    failed with its exit status."""
    log.parent.mkdir(parents=True, exist_ok=True)
    result = log.with_name(f".{step.name}.result.json")
    result.unlink(missing_ok=True)
    command = [sys.executable, "-m", "benchmarks.gpu_check", "step", "--name", step.name, "--script", step.script,
               "--log", str(log), "--result", str(result), "--", *argv]
    # `-m benchmarks...` needs the checkout on the path whatever the working folder; the staged site stays first
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(REPO)) if p)}
    start = time.perf_counter()
    child = subprocess.Popen(command, env=env)
    _CHILD.append(child)
    try:
        code = child.wait()
    finally:
        _CHILD.remove(child)
    if result.is_file():
        done = json.loads(result.read_text(encoding="utf-8"))
        result.unlink()
        return done["entry"], set(done["imports"])
    why = f"its process ended with {f'signal {-code}' if code < 0 else f'exit status {code}'} before its result"
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"\n## {step.name}: {why}\n")
    return {"name": step.name, "script": step.script, "argv": argv, "status": "failed", "why": why,
            "seconds": round(time.perf_counter() - start, 1)}, set()


def _step_main(args: argparse.Namespace) -> int:
    """The `step` verb: one step by `run_step`, its entry and this process's imports written to `--result`."""
    entry = run_step(Step(args.name, args.script, (), (), (), 0.0), args.argv, args.log)
    _write_json(args.result, {"entry": entry, "imports": sorted(_imports())})
    return 0


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
    os.replace(tmp, path)


def _pack(folder: Path, archive: Path) -> None:
    tmp = archive.with_name(f".{archive.name}.tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        tar.add(folder, arcname=folder.name)
    os.replace(tmp, archive)


def release(version: str) -> tuple[int, ...]:
    """The release numbers of `version`, for ordering: the leading integer of each dot-separated part, up to the first
    part without one, trailing zeros dropped ("5.23.0+cu130" and "5.23" are (5, 23)); a pre-release orders as its
    release ("2.0rc1" is (2,))."""
    numbers = []
    for part in version.split("+")[0].split("."):
        digits = part[:len(part) - len(part.lstrip("0123456789"))]
        if not digits:
            break
        numbers.append(int(digits))
        if len(digits) < len(part):  # a pre- or post-release ("0rc1"): its leading number ends the release
            break
    while numbers and numbers[-1] == 0:
        numbers.pop()
    return tuple(numbers)


def older_than_pins(constraints: Path = REPO / "constraints.txt") -> list[str]:
    """The `PINNED` packages this process would import at an older version than constraints.txt pins."""
    pins = {}
    if constraints.is_file():
        for line in constraints.read_text(encoding="utf-8").splitlines():
            name, _, version = line.strip().partition("==")
            if version:
                pins[name.lower().replace("-", "_")] = version
    older = []
    for name in PINNED:
        try:
            found = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        pin = pins.get(name.lower())
        if pin and release(found) < release(pin):
            older.append(f"{name} {found} (pinned {pin})")
    return older


class CallStopped(BaseException):
    """The call's hard limit (SIGTERM from `timeout`) stopped it: the step in flight is recorded as interrupted."""


def _stop_on_sigterm(signum, frame) -> None:
    for child in list(_CHILD):
        if child.poll() is None:
            child.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=10)  # reaped before the call records it stopped: nothing of it outlives the call
    PYTEST.stop()
    raise CallStopped


def use_staged_wheels(stage_dir: Path, pins: list[str]) -> list[str]:
    """Put the stage's site/ (unpacked from its bundle, or installed from its wheels/ once per machine) first on the
    path (this process's and its children's) and check that the pinned versions are the ones imported; returns the
    pins. Nothing staged: []."""
    site = (stage_dir / "site").resolve()
    wheels = sorted((stage_dir / "wheels").glob("*.whl"))
    if wheels and not (site / ".installed").is_file():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                        "--no-cache-dir", "--upgrade", "--target", str(site), *map(str, wheels)], check=True)
        (site / ".installed").write_text("\n".join(w.name for w in wheels), encoding="utf-8")
    if not (site / ".installed").is_file():
        return []
    sys.path.insert(0, str(site))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    wrong = [f"{pin} ({metadata.version(pin.split('==')[0])} found)" for pin in pins
             if metadata.version(pin.split("==")[0]) != pin.split("==")[1]]
    if wrong:
        raise SystemExit(f"gpu_check run: the staged wheels did not take: {', '.join(wrong)}; delete {site} and "
                         "run again")
    return pins


def _open_record(out: Path, machine: dict, smoke: bool, manifest: dict, budget: float,
                 older: list[str] = ()) -> tuple[dict, int]:
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
            "source": manifest["source"], "machine": machine, "older_than_pins": list(older)}
    calls = [*record.get("calls", []), call]
    # `machine` stays the folder's first (its device is every call's); `source` is the latest call's; a step's `call`
    # indexes `calls`
    record.update(format=FORMAT, source=manifest["source"], staged=manifest, smoke=smoke, calls=calls)
    return record, len(calls) - 1


def _save(record: dict, out: Path, step: dict, archive: Path | None, imports: set[str] = frozenset()) -> None:
    """`step`'s entry into the record (replacing an earlier one of its name), written, and the folder packed; the
    record's imports are this process's, its steps' (`imports`) and the earlier calls'."""
    record["steps"] = [s for s in record["steps"] if s["name"] != step["name"]] + [step]
    record["imports"] = sorted(set(record.get("imports", [])) | _imports() | set(imports))
    _write_json(out / "check.json", record)
    if archive is not None:
        _pack(out, archive)


def _prepare(stage_dir: Path, smoke: bool) -> tuple[dict, list[str], dict]:
    """A call's start: the stage unpacked, its wheels first on the path, the packages older than their pins said, and
    a CUDA device required unless `smoke`; returns (the stage's manifest, those packages, the machine)."""
    unpack(stage_dir)
    for where in (stage_dir / "hub", stage_dir / "data"):
        if not where.is_dir():
            raise SystemExit(f"gpu_check run: {where} is missing: run `make gpu-stage` (gpu_check.py stage) first")
    manifest = json.loads((stage_dir / "manifest.json").read_text(encoding="utf-8"))
    use_staged_wheels(stage_dir, manifest.get("wheels", []))  # before anything imports transformers
    older = older_than_pins()
    if older:
        print(f"gpu_check run: older than the pins in constraints.txt (recorded in the call): {', '.join(older)}",
              flush=True)
    import torch

    if not smoke and not torch.cuda.is_available():
        raise SystemExit("gpu_check run: no CUDA device here; --smoke runs the same steps on the CPU at tiny sizes")
    os.environ.update(PAPA_PROGRESS="0", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    return manifest, older, describe_machine(cuda=not smoke)


def _skipped(step: Step, planned: float, source: str, left: float, budget: float) -> dict:
    """The entry of a step whose planned seconds do not fit what is `left` of the call's `budget`."""
    return {"name": step.name, "script": step.script, "status": "skipped",
            "why": f"{max(left, 0):.0f} s of the {budget:.0f} s budget left; it takes about {planned:.0f} s ({source}; "
                   "the next call with --fill runs it)", "seconds": 0.0}


def _run_planned(step: Step, argv: list[str], planned: float, record: dict, call: int, out: Path,
                 archive: Path | None, imports: set[str]) -> dict:
    """One step that fits the budget, run in its own process: entered as running before it starts, its entry
    returned (the imports of its process added to `imports`); stopped by the hard limit, entered as interrupted and
    the call ended (exit status 124)."""
    began = time.perf_counter()
    # entered before it runs: a call killed outright still shows which step it was in (`pack`)
    _save(record, out, {"name": step.name, "script": step.script, "argv": argv, "call": call, "status": "running",
                        "seconds": 0.0, "planned_s": planned,
                        "started": datetime.now(timezone.utc).isoformat(timespec="seconds")}, archive, imports)
    try:
        entry, used = run_in_child(step, argv, out / "logs" / f"{step.name}.log")
    except CallStopped:
        _save(record, out, {"name": step.name, "script": step.script, "argv": argv, "call": call,
                            "status": "interrupted", "seconds": round(time.perf_counter() - began, 1),
                            "why": "the call's hard limit stopped it (the next call with --fill runs it)"},
              archive, imports)
        raise SystemExit(124) from None
    imports |= used
    entry["planned_s"] = planned
    return entry


def run(steps: list[Step], out: Path | None, stage_dir: Path, smoke: bool, budget: float, archive: Path | None,
        fill: bool = False, new: bool = False) -> dict:
    """Run `steps` into `out` (module docstring); with `fill`, only those of `fill_plan`'s steps, into its folder
    (`new`: a new folder). Returns the record written to `out/check.json`."""
    manifest, older, machine = _prepare(stage_dir, smoke)
    if fill:
        found, names, why = fill_plan(machine, smoke, new=new, known=manifest.get("has_probing"))
        steps = [s for s in steps if s.name in names]
        out = found or default_out(machine, smoke, new=True)
        print(f"gpu_check run --fill: {_shown(out)}, {'the steps it lacks' if found else 'every step'} ({why}): "
              f"{', '.join(s.name for s in steps)}", flush=True)
    out = out or default_out(machine, smoke, new=new)
    plan = planned_seconds(machine)
    record, call = _open_record(out, machine, smoke, manifest, budget, older)
    (stage_dir / LAST_FOLDER).write_text(str(out.resolve()), encoding="utf-8")  # what `pack` packs after the call
    start = time.perf_counter()
    imports: set[str] = set()
    previous = signal.signal(signal.SIGTERM, _stop_on_sigterm)
    try:
        for step in steps:
            left = budget - (time.perf_counter() - start)
            planned, source = plan.get(step.name, (step.usual_s, "usual time"))
            if planned > left:
                entry = _skipped(step, planned, source, left, budget)
            else:
                argv = step_argv(step, smoke, stage_dir / "hub", stage_dir / "data", out)
                entry = _run_planned(step, argv, planned, record, call, out, archive, imports)
            entry["call"] = call
            _save(record, out, entry, archive, imports)
    finally:
        signal.signal(signal.SIGTERM, previous)
    return record


def close_running(folder: Path) -> list[str]:
    """Mark the steps `folder`'s record still lists as running (its call was killed before its handler could write)
    interrupted, with the seconds since they started; returns their names."""
    path = folder / "check.json"
    if not path.is_file():
        return []
    record = json.loads(path.read_text(encoding="utf-8"))
    closed = []
    for s in record.get("steps", []):
        if s.get("status") == "running":
            began = datetime.fromisoformat(s["started"]) if s.get("started") else None
            s.update(status="interrupted", why="the call was killed at its hard limit while it ran (the next call "
                     "with --fill runs it)",
                     seconds=round((datetime.now(timezone.utc) - began).total_seconds(), 1) if began else 0.0)
            closed.append(s["name"])
    if closed:
        _write_json(path, record)
    return closed


def pack(stage_dir: Path, archive: Path) -> Path | None:
    """Pack the folder the last `run` from `stage_dir` wrote into `archive` (after a call, whatever ended it), a step
    left running marked interrupted; None when no run started."""
    marker = stage_dir / LAST_FOLDER
    if not marker.is_file():
        return None
    folder = Path(marker.read_text(encoding="utf-8").strip())
    if not folder.is_dir():
        return None
    close_running(folder)
    _pack(folder, archive)
    return folder


def _parser() -> argparse.ArgumentParser:
    """The command line: its verbs `stage`, `run`, `command`, `step` and `pack`, each with its options."""
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
    rn.add_argument("--new-folder", dest="new", action="store_true",
                    help="with --fill: measure every step again, into a new folder (the default when the newest "
                         "folder's code predates the probing changes, or when that cannot be decided)")
    rn.add_argument("--archive", type=Path, default=None, help="pack the folder into this .tar.gz after every step")
    cm = sub.add_parser("command", help="print the one command a call runs (what `make gpu-check` runs)")
    cm.add_argument("--stage", type=Path, default=STAGE)
    cm.add_argument("--python", default="python3", help="the interpreter the command names")
    cm.add_argument("--smoke", action="store_true")
    cm.add_argument("--new-folder", dest="new", action="store_true", help="the command measures into a new folder")
    sp = sub.add_parser("step", help="one step in this process (what `run` starts for each step)")
    sp.add_argument("--name", required=True)
    sp.add_argument("--script", required=True)
    sp.add_argument("--log", type=Path, required=True)
    sp.add_argument("--result", type=Path, required=True)
    sp.add_argument("argv", nargs=argparse.REMAINDER)
    pk = sub.add_parser("pack", help="after a call, whatever ended it: pack the folder its run wrote into --archive")
    pk.add_argument("--stage", type=Path, default=STAGE)
    pk.add_argument("--archive", type=Path, required=True)
    return parser


def _stage_main(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """The `stage` verb: stage what the GPU machine needs, with the probing verdict of every committed folder's code
    (git decides it here), and print the command to run there."""
    if args.data_dir is None or not Path(args.data_dir).is_dir():
        parser.error("no data directory: pass --data-dir or set PAPA_DATA_DIR (glue_data/, conll2003/, wikitext/)")
    known = {c: has_probing(c) for folder in checked_folders(GPU_ROOT) for c in folder_commits(read_check(folder))}
    manifest = stage(args.stage, args.hub, Path(args.data_dir), args.rows, args.wheels, args.python, known)
    print(f"Staged {args.stage} ({manifest['bytes'] / 2**20:.1f} MiB with the working tree). On the GPU "
          f"machine, carrying {args.stage.name}, run from the checkout's root:\n\n"
          f"    {device_command(args.stage)}\n\nthen unpack gpu_check.tar.gz under artifacts/gpu/ "
          "and run `python docs/gen_measurements.py`.")
    return 0


def _run_main(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """The `run` verb: one call of the chosen steps, its steps' table printed; exit status 1 when a step failed."""
    if args.fill and (args.out or args.steps):
        parser.error("--fill chooses the folder and the steps itself: pass it without --out and --steps")
    if args.new and not args.fill:
        parser.error("--new-folder goes with --fill (without it, --out names the folder)")
    steps = [s for s in STEPS if args.steps is None or s.name in args.steps]
    budget = args.budget if args.budget is not None else (float("inf") if args.smoke else float(CALL_BUDGET_S))
    record = run(steps, args.out, args.stage, args.smoke, budget, args.archive, fill=args.fill, new=args.new)
    print("\n| step | status | seconds |\n|---|---|---|")
    for s in record["steps"]:
        print(f"| {s['name']} | {s['status']}{': ' + s['why'] if s.get('why') else ''} | {s['seconds']:.1f} |")
    return 0 if all(s["status"] != "failed" for s in record["steps"]) else 1


def main(argv: list[str] | None = None) -> int:
    """The command line (`_parser`): one verb."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.verb == "command":
        print(device_command(args.stage, args.python, args.smoke, args.new))
        return 0
    if args.verb == "step":
        args.argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
        return _step_main(args)
    if args.verb == "pack":
        folder = pack(args.stage, args.archive)
        print(f"gpu_check pack: {_shown(folder)} into {_shown(args.archive)}" if folder else
              "gpu_check pack: no run started from this stage: nothing to pack")
        return 0
    if args.verb == "stage":
        return _stage_main(args, parser)
    return _run_main(args, parser)


if __name__ == "__main__":
    sys.exit(main())
