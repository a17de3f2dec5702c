"""The GPU check: a bounded run of the suite on a time-limited GPU machine, `STEPS` in order, each in a process of its
own, into one folder per device and date, its record (check.json) written as each step starts and ends and the folder
packed after each step and the call (docs/performance.md, "On a GPU").

    make gpu-stage          # here: stage what the machine lacks (gpu_stage.py) and print the command to run there
    make gpu-check          # on a CUDA machine: one call (7 minutes at most) of the steps its folder lacks
    make gpu-check SMOKE=1  # anywhere: the same steps on the CPU at tiny sizes, into artifacts/gpu_smoke/
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import io
import json
import math
import os
import platform
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import traceback
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from benchmarks.gpu_stage import REPO, STAGE, older_than_pins, stage, unpack, use_staged_wheels

#: One call's hard limit (a parameter of the machine), the share of it the steps may plan for (the rest: imports,
#: describing the machine, packing, a margin), and the seconds between its SIGTERM and SIGKILL.
CALL_LIMIT_S, CALL_BUDGET_S, KILL_AFTER_S = 420, 330, 15
#: The test files whose CUDA cases (compiled and graphed steps, compiled attached models) only a GPU runs.
CUDA_TESTS = ("tests/unit/method/test_compile.py", "tests/unit/probing/test_step_modes.py")
#: Record format of check.json (each call records its code and machine, each step its call), and where the committed
#: checks' folders are, one per device and date.
FORMAT, GPU_ROOT = 2, REPO / "artifacts" / "gpu"
#: The commit of the probing code the check measures: `--fill` completes no folder whose calls ran code without it.
PROBING_COMMIT = "478515be72bd6bb68b498feaa0a835d281bb714b"
#: Margin on a measured step time when planning a call (compilation caches and clocks vary between calls).
MEASURED_MARGIN = 1.2
#: papa's declared dependencies a bare CUDA image lacks and nothing carries: the check must not import them.
NOT_ON_GPU_IMAGE = ("datasets", "evaluate", "nbformat", "papermill", "ipykernel", "ipywidgets", "anywidget",
                    "jupyter_client", "traitlets", "submitit", "gguf", "jupyterlab")


@dataclass(frozen=True)
class Step:
    """One call of `script`'s main (a module of benchmarks/, or a dotted path) with `args` ({hub}, {data}, {out}), then
    `gpu` or `smoke`; `usual_s`: its time on one H100 (artifacts/gpu/2026-11-28-…), else a guess."""

    name: str
    script: str
    args: tuple[str, ...]
    gpu: tuple[str, ...]
    smoke: tuple[str, ...]
    usual_s: float


_MINILM_DATA = ("--minilm", "{hub}/minilm", "--data-dir", "{data}")
_BENCH_GPU = ("--device", "cuda", "--batch", "64", "16")
_BENCH_SMOKE = ("--device", "cpu", "--tiny", "--lengths", "16", "--batch", "2", "--repeats", "1")
_COMPILED_GPU, _COMPILED_SMOKE = (*_BENCH_GPU, "--repeats", "3", "--compile"), (*_BENCH_SMOKE, "--models", "minilm",
                                                                                 "--compile", "eager")
_COST = ("--hub", "{hub}", "--data-dir", "{data}")
# The smoke's cost runs in float32 whatever the step's precision (the last --precision wins): bf16 autocast on a CPU
# without bf16 units tripled its time, and bench_bf16 already runs papa's paths under it.
_COST_SMOKE = ("--device", "cpu", "--tiny", "--steps", "1", "--repeats", "1", "--sample", "16", "--forward-batch", "2",
               "--forward-batches", "1", "--precision", "float32")
#: In order of priority: the CUDA tests, the steps, the stores and the bench at the grid's shapes, the eager tables,
#: the cost in bf16 (the goals' precision) and its estimate, the compiled tables and steps, the float32 cost.
STEPS = (
    Step("cuda_tests", "cuda_tests", ("--junit", "{out}/cuda_tests.xml", *CUDA_TESTS),
         ("--test-device", "cuda"), ("--test-device", "cpu", "--collect-only"), 100),
    Step("steps_bf16", "steps", ("--hub", "{hub}", "--precision", "bf16", "--json", "{out}/steps_bf16.json"),
         ("--device", "cuda", "--modes", "eager", "graphed"), ("--device", "cpu", "--smoke", "--modes", "eager"), 80),
    Step("store_grid", "store_paths", ("--json", "{out}/store_grid.json"), ("--shapes", "grid"), ("--smoke",), 50),
    Step("bench_grid", "bench", (*_MINILM_DATA, "--hub", "{hub}", "--headline", "--dtype", "bf16",
                                 "--json", "{out}/bench_grid.json"), ("--device", "cuda", "--repeats", "3"),
         ("--device", "cpu", "--tiny", "--quick", "--saturate-tokens", "64", "--batch-tokens", "32"), 90),
    Step("bench_fp32", "bench", (*_MINILM_DATA, "--json", "{out}/bench_fp32.json"),
         (*_BENCH_GPU, "--repeats", "5"), (*_BENCH_SMOKE, "--grid-size", "4"), 60),
    Step("bench_bf16", "bench", (*_MINILM_DATA, "--dtype", "bf16", "--json", "{out}/bench_bf16.json"),
         (*_BENCH_GPU, "--repeats", "5"), (*_BENCH_SMOKE, "--grid-size", "0"), 60),
    Step("cost_b_bf16", "full_cost", (*_COST, "--parts", "B", "--precision", "bf16", "--json",
                                      "{out}/full_cost_b_bf16.json"), ("--device", "cuda"), _COST_SMOKE, 260),
    Step("cost_a_bf16", "full_cost", (*_COST, "--parts", "A", "--sizes", "base", "--precision", "bf16", "--json",
                                      "{out}/full_cost_a_bf16.json"),
         ("--device", "cuda", "--train-examples", "4096"), (*_COST_SMOKE, "--limit", "16"), 90),
    Step("estimate_bf16", "cost", ("{out}/full_cost_b_bf16.json", "{out}/full_cost_a_bf16.json", "--write"),
         (), (), 5),
    Step("bench_bf16_compiled", "bench", (*_MINILM_DATA, "--dtype", "bf16", "--grid-size", "0", "--json",
                                          "{out}/bench_bf16_compiled.json"), _COMPILED_GPU, _COMPILED_SMOKE, 150),
    Step("bench_fp32_compiled", "bench", (*_MINILM_DATA, "--grid-size", "0", "--json",
                                          "{out}/bench_fp32_compiled.json"), _COMPILED_GPU, _COMPILED_SMOKE, 150),
    Step("steps_bf16_compiled", "steps", ("--hub", "{hub}", "--precision", "bf16", "--tasks", "sst2", "ner",
                                          "--json", "{out}/steps_bf16_compiled.json"),
         ("--device", "cuda", "--modes", "eager", "compiled"),
         ("--device", "cpu", "--smoke", "--modes", "eager", "compiled", "--kinds", "lambda", "--tasks", "sst2"), 240),
    Step("cost_b_fp32", "full_cost", (*_COST, "--parts", "B", "--json", "{out}/full_cost_b_fp32.json"),
         ("--device", "cuda"), _COST_SMOKE, 300),
)
STEP_NAMES = tuple(s.name for s in STEPS)


# ---- the folders -------------------------------------------------------------------------------------------------

def read_check(folder: Path) -> dict:
    """`folder`'s record, through its one format check: a record of another format, or without its steps, its
    machine or its per-call records, is refused saying what to do."""
    path = folder / "check.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    calls = record.get("calls") if isinstance(record.get("calls"), list) else []
    lacks = [what for what, missing in (
        ("its steps", "steps" not in record), ("its machine", "machine" not in record),
        ("each call's code and machine", not calls or any("source" not in c or "machine" not in c for c in calls)),
        ("each step's call", any(not isinstance(s.get("call"), int) or not 0 <= s["call"] < len(calls)
                                 for s in record.get("steps", [])))) if missing]
    if record.get("format") != FORMAT or lacks:
        has = (f"is of format {record.get('format')!r}" if record.get("format") != FORMAT
               else f"lacks {', '.join(lacks)}")
        raise ValueError(f"{path}: a GPU check record that {has}; gpu_check reads format {FORMAT}, whose record names "
                         "each call's code and machine and each step's call (format 1 named one code for the whole "
                         "folder): make the check again into a new folder (make gpu-check).")
    return record


def checked_folders(root: Path) -> list[Path]:
    """The folders under `root` a check wrote, newest first: by the date their names start with (on one date, the
    last name in order)."""
    return sorted((p.parent for p in root.glob("*/check.json")), key=lambda p: p.name, reverse=True)


def default_out(machine: dict, smoke: bool, new: bool = False, root: Path | None = None) -> Path:
    """The folder a call writes without `--out`: <date>-<device> under `root` (default `GPU_ROOT`); with `new`, one
    that does not exist yet (-2, -3, ... after the date's first, so that names keep their order)."""
    if smoke:
        return REPO / "artifacts" / "gpu_smoke"
    slug = "-".join(p for p in "".join(c if c.isalnum() else "-" for c in machine["device"].lower()).split("-") if p)
    out = base = (GPU_ROOT if root is None else root) / f"{datetime.now(timezone.utc):%Y-%m-%d}-{slug}"
    n = 1
    while new and out.exists():
        n += 1
        out = base.with_name(f"{base.name}-{n}")
    return out


def folder_refusal(record: dict, machine: dict, smoke: bool) -> str | None:
    """Why a folder of `record` cannot take this machine's steps (its rows come from one device, smoke or not)."""
    held = record["machine"].get("device")
    if bool(record.get("smoke")) == smoke and held == machine["device"]:
        return None
    kind = {True: "a smoke run", False: "measurements"}
    return f"it holds {kind[bool(record.get('smoke'))]} on {held}, and this call makes {kind[smoke]} on " \
           f"{machine['device']}"


def has_probing(commit: str | None, repo: Path = REPO, known: dict | None = None) -> bool | None:
    """Whether code at `commit` holds `PROBING_COMMIT`: by git in `repo`, else what the stage decided (`known`), else
    None (it cannot be decided)."""
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
    """Where `--fill` runs and why: (the newest folder under `root` of this machine's device, its steps not yet ok,
    why) when it lacks steps and every call into it ran code holding `PROBING_COMMIT`; else (None, every step, why),
    a new folder: with `new`, when that folder is complete or there is none, or its code is older or undecided."""
    every = list(STEP_NAMES)
    if new:
        return None, every, "--new-folder"
    for folder in checked_folders(GPU_ROOT if root is None else root):
        record = read_check(folder)
        if folder_refusal(record, machine, smoke) is not None:
            continue
        verdicts = {c: has_probing(c, repo, known) for c in folder_commits(record)}
        if old := [str(c)[:10] for c, v in verdicts.items() if v is False]:
            return None, every, (f"{folder.name} measured code at {', '.join(old)}, without the probing changes "
                                 f"({PROBING_COMMIT[:10]}): measured again")
        if unknown := [str(c)[:10] for c, v in verdicts.items() if v is None]:
            return None, every, (f"whether {folder.name}'s code ({', '.join(unknown)}) holds the probing changes "
                                 f"({PROBING_COMMIT[:10]}) cannot be decided here (no git history of it, nor the "
                                 "stage's verdict): measured again")
        done = {s["name"] for s in record["steps"] if s["status"] == "ok"}
        if missing := [name for name in every if name not in done]:
            return folder, missing, f"{folder.name} lacks them"
        return None, every, f"{folder.name} is complete"
    return None, every, "no folder of this device"


def planned_seconds(machine: dict, root: Path | None = None) -> dict[str, tuple[float, str]]:
    """Each step's (planned seconds, where they come from): its time in the newest committed folder where it finished
    ok, folders of this machine's device first, times `MEASURED_MARGIN` and rounded up; else its `usual_s`."""
    records = []
    for folder in checked_folders(GPU_ROOT if root is None else root):
        try:
            records.append((folder, read_check(folder)))
        except (ValueError, KeyError, json.JSONDecodeError):
            continue  # a record gpu_check cannot read plans nothing
    found: dict[str, tuple[float, str]] = {}
    for folder, record in sorted(records, key=lambda x: x[1]["machine"].get("device") != machine.get("device")):
        for s in [] if record.get("smoke") else record["steps"]:
            if s["status"] == "ok" and s["name"] not in found:
                found[s["name"]] = (float(math.ceil(s["seconds"] * MEASURED_MARGIN)), f"measured in {folder.name}")
    return {step.name: found.get(step.name, (step.usual_s, "usual time")) for step in STEPS}


# ---- one step ----------------------------------------------------------------------------------------------------

def _shown(path: Path) -> str:
    """`path` relative to the working folder (or $OUT) when inside it: records keep no path of the machine."""
    full = path.resolve()
    for root, shown in [(Path.cwd(), "{}")] + ([(Path(os.environ["OUT"]), "$OUT/{}")] if os.environ.get("OUT") else []):
        if full.is_relative_to(root.resolve()):
            return shown.format(full.relative_to(root.resolve()))
    return str(path)


class _Tee(io.TextIOBase):
    """Writes to every stream, with the working folder's path left out (a traceback names files by it)."""

    def __init__(self, *streams):
        self.streams, self.here = streams, f"{Path.cwd().resolve()}/"

    def write(self, text: str) -> int:
        for s in self.streams:
            s.write(text.replace(self.here, ""))
            s.flush()
        return len(text)


def run_step(step: Step, argv: list[str], log: Path) -> dict:
    """One step in this process, its output to the terminal and `log`; failures are recorded, not raised."""
    start, status, why = time.perf_counter(), "ok", None
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w", encoding="utf-8") as fh, contextlib.redirect_stdout(_Tee(sys.__stdout__, fh)), \
            contextlib.redirect_stderr(_Tee(sys.__stderr__, fh)):
        print(f"## {step.name}: {step.script} {' '.join(argv)}", flush=True)
        try:
            main = importlib.import_module(step.script if "." in step.script else f"benchmarks.{step.script}").main
            if code := main(argv):
                status, why = "failed", f"exit status {code}"
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 -- one step's failure, SystemExit included, must not lose others
            status, why = "failed", f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"
            traceback.print_exc()  # the context is in the log
    return {"name": step.name, "script": step.script, "argv": argv, "status": status, "why": why,
            "seconds": round(time.perf_counter() - start, 1)}


def _imports() -> set[str]:
    """The top-level packages this process imported, the standard library left out."""
    return {m.split(".")[0] for m in sys.modules} - set(sys.stdlib_module_names)


#: The step's process while it runs: the hard limit's handler stops it.
_CHILD: list[subprocess.Popen] = []


def run_in_child(step: Step, argv: list[str], log: Path) -> tuple[dict, set[str]]:
    """(entry, imports) of one step run by `run_step` in a process of its own (the `step` verb), so that a CUDA error,
    an abort or memory it leaves behind ends with it; a process that dies before its result is failed."""
    log.parent.mkdir(parents=True, exist_ok=True)
    result = log.with_name(f".{step.name}.result.json")
    result.unlink(missing_ok=True)
    # `-m benchmarks...` needs the checkout on the path whatever the working folder; the staged site stays first
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(REPO)) if p)}
    start = time.perf_counter()
    _CHILD.append(child := subprocess.Popen([sys.executable, "-m", "benchmarks.gpu_check", "step", "--name", step.name,
                                             "--script", step.script, "--log", str(log), "--result", str(result),
                                             "--", *argv], env=env))
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


# ---- one call ----------------------------------------------------------------------------------------------------

def describe_machine(cuda: bool) -> dict:
    """The machine and its software."""
    import torch

    from benchmarks.suite import cpu_name

    versions = {}
    for name in ("torch", "transformers", "tokenizers", "huggingface_hub", "numpy", "pandas", "scipy", "accelerate"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[name] = None
            versions[name] = metadata.version(name)
    machine = {"cpu": cpu_name(), "python": platform.python_version(), "platform": platform.platform(),
               "versions": versions, "cuda": torch.version.cuda}
    if not cuda:
        return {**machine, "device": f"CPU: {machine['cpu']}"}
    props = torch.cuda.get_device_properties(0)
    smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                         text=True) if shutil.which("nvidia-smi") else None
    return {**machine, "device": torch.cuda.get_device_name(0), "gpu_memory_gib": round(props.total_memory / 2**30, 1),
            "multiprocessors": props.multi_processor_count,
            "driver": smi.stdout.strip() if smi and smi.returncode == 0 else None}


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
    os.replace(tmp, path)


def _pack(folder: Path, archive: Path) -> None:
    tmp = archive.with_name(f".{archive.name}.tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        tar.add(folder, arcname=folder.name)
    os.replace(tmp, archive)


class CallStopped(BaseException):
    """The call's hard limit (SIGTERM from `timeout`) stopped it: the step in flight is recorded as interrupted."""


def _stop_on_sigterm(signum, frame) -> None:
    for child in list(_CHILD):
        if child.poll() is None:
            child.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=10)  # reaped before the call records it stopped: nothing of it outlives the call
    raise CallStopped


def _open_record(out: Path, machine: dict, smoke: bool, manifest: dict, budget: float,
                 older: list[str] = ()) -> tuple[dict, int]:
    """`out`'s record with this call added (a new record when there is none), and the call's index; a folder of
    another device, or smoke where this is not, is refused."""
    record = read_check(out) if (out / "check.json").is_file() else None
    if why := folder_refusal(record, machine, smoke) if record else None:
        raise SystemExit(f"gpu_check run: {_shown(out)} cannot take this call's steps: {why}. A folder's rows come "
                         "from one device: leave out --out (a new folder per date and device), or pass --fill")
    out.mkdir(parents=True, exist_ok=True)
    record = record or {"steps": [], "machine": machine}  # the folder's first machine: its device is every call's
    call = {"started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": "python -m benchmarks.gpu_check " + " ".join(_shown(Path(a)) if os.path.isabs(a) else a
                                                                   for a in sys.argv[1:]),
            "budget_s": budget if budget != float("inf") else None,  # JSON has no infinity
            "source": manifest["source"], "machine": machine, "older_than_pins": list(older)}
    calls = [*record.get("calls", []), call]
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
    if older := older_than_pins():
        print(f"gpu_check run: older than the pins in constraints.txt (recorded in the call): {', '.join(older)}",
              flush=True)
    import torch

    if not smoke and not torch.cuda.is_available():
        raise SystemExit("gpu_check run: no CUDA device here; --smoke runs the same steps on the CPU at tiny sizes")
    os.environ.update(PAPA_PROGRESS="0", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    return manifest, older, describe_machine(cuda=not smoke)


def run(steps: list[Step], out: Path | None, stage_dir: Path, smoke: bool, budget: float, archive: Path | None,
        fill: bool = False, new: bool = False) -> dict:
    """Run `steps` into `out`; with `fill`, those of `fill_plan`'s steps into its folder (`new`: a new folder). A step
    is entered as running before it starts; one that no longer fits `budget` is skipped; the hard limit's SIGTERM
    stops the step's process, enters it as interrupted and ends the call (exit status 124). Returns the record."""
    manifest, older, machine = _prepare(stage_dir, smoke)
    if fill:
        found, names, why = fill_plan(machine, smoke, new=new, known=manifest.get("has_probing"))
        steps, out = [s for s in steps if s.name in names], found or default_out(machine, smoke, new=True)
        print(f"gpu_check run --fill: {_shown(out)}, {'the steps it lacks' if found else 'every step'} ({why}): "
              f"{', '.join(s.name for s in steps)}", flush=True)
    out = out or default_out(machine, smoke, new=new)
    plan = planned_seconds(machine)
    record, call = _open_record(out, machine, smoke, manifest, budget, older)
    (stage_dir / LAST_FOLDER).write_text(str(out.resolve()), encoding="utf-8")  # what `pack` packs after the call
    start, imports = time.perf_counter(), set()
    previous = signal.signal(signal.SIGTERM, _stop_on_sigterm)
    try:
        for step in steps:
            left = budget - (time.perf_counter() - start)
            planned, source = plan.get(step.name, (step.usual_s, "usual time"))
            base = {"name": step.name, "script": step.script, "call": call}
            if planned > left:
                _save(record, out, {**base, "status": "skipped", "seconds": 0.0, "why": (
                    f"{max(left, 0):.0f} s of the {budget:.0f} s budget left; it takes about {planned:.0f} s "
                    f"({source}; the next call with --fill runs it)")}, archive, imports)
                continue
            fill_in = {"hub": _shown(stage_dir / "hub"), "data": _shown(stage_dir / "data"), "out": _shown(out)}
            argv, began = [a.format(**fill_in) for a in (*step.args, *(step.smoke if smoke else step.gpu))], time.time()
            # entered before it runs: a call killed outright still shows which step it was in (`pack`)
            _save(record, out, {**base, "argv": argv, "status": "running", "seconds": 0.0, "planned_s": planned,
                                "started": datetime.now(timezone.utc).isoformat(timespec="seconds")}, archive, imports)
            try:
                entry, used = run_in_child(step, argv, out / "logs" / f"{step.name}.log")
            except CallStopped:
                _save(record, out, {**base, "argv": argv, "status": "interrupted", "seconds": round(
                    time.time() - began, 1), "why": "the call's hard limit stopped it (the next call with --fill runs "
                    "it)"}, archive, imports)
                raise SystemExit(124) from None
            imports |= used
            _save(record, out, {**entry, "planned_s": planned, "call": call}, archive, imports)
    finally:
        signal.signal(signal.SIGTERM, previous)
    return record


#: Where `run` notes, under the stage, the folder it writes: `pack` reads it after the call.
LAST_FOLDER = "last_folder.txt"


def pack(stage_dir: Path, archive: Path) -> Path | None:
    """Pack the folder the last `run` from `stage_dir` wrote into `archive` (after a call, whatever ended it), a step
    left running (a SIGKILL leaves no time for the handler) marked interrupted; None when no run started."""
    marker = stage_dir / LAST_FOLDER
    folder = Path(marker.read_text(encoding="utf-8").strip()) if marker.is_file() else None
    if folder is None or not folder.is_dir():
        return None
    if (folder / "check.json").is_file():
        record = json.loads((folder / "check.json").read_text(encoding="utf-8"))
        running = [s for s in record.get("steps", []) if s.get("status") == "running"]
        for s in running:
            began = datetime.fromisoformat(s["started"]) if s.get("started") else None
            s.update(status="interrupted", why="the call was killed at its hard limit while it ran (the next call "
                     "with --fill runs it)",
                     seconds=round((datetime.now(timezone.utc) - began).total_seconds(), 1) if began else 0.0)
        if running:
            _write_json(folder / "check.json", record)
    _pack(folder, archive)
    return folder


def device_command(stage_dir: Path, python: str = "python3", smoke: bool = False, new: bool = False) -> str:
    """The command the GPU machine runs from the checkout's root (`make gpu-check` runs it too): the check with
    `--fill` under the call's hard limit, packed into $OUT after every step and once more after the call."""
    rel = stage_dir.resolve().relative_to(REPO) if stage_dir.resolve().is_relative_to(REPO) else stage_dir
    check, archive = f"{python} -m benchmarks.gpu_check", "--archive $OUT/gpu_check.tar.gz"
    return (f"export PYTHONPATH=$PWD; timeout -k {KILL_AFTER_S} {CALL_LIMIT_S} {check} run --fill"
            f"{' --new-folder' if new else ''}{' --smoke' if smoke else ''} --stage {rel} {archive}; rc=$?; "
            f"{check} pack --stage {rel} {archive}; exit $rc")


# ---- the command line --------------------------------------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    """The command line: its verbs `stage`, `run`, `command`, `step` and `pack`, each with its options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    st = sub.add_parser("stage", help="stage what a GPU machine needs (here) and print the command to run there")
    st.add_argument("--hub", type=Path, default=REPO.parent / "shared" / "hub",
                    help="folder holding roberta-base/ and roberta-large/ (config and tokenizer files)")
    st.add_argument("--data-dir", type=Path, default=os.environ.get("PAPA_DATA_DIR") or None)
    st.add_argument("--rows", type=int, default=2048, help="examples staged per file of a task not in WHOLE")
    st.add_argument("--no-wheels", dest="wheels", action="store_false",
                    help="carry no wheels: for a machine that has papa's dependencies installed")
    st.add_argument("--python", default="3.12", help="the GPU machine's Python, for the wheels (default 3.12)")
    rn = sub.add_parser("run", help="run the check (on a CUDA machine; --smoke on the CPU)")
    rn.add_argument("--out", type=Path, default=None,
                    help="the folder (default artifacts/gpu/<date>-<device>; --smoke artifacts/gpu_smoke)")
    rn.add_argument("--smoke", action="store_true", help="the CPU at tiny sizes: the code paths, not the numbers")
    rn.add_argument("--budget", type=float, default=None, help=f"seconds the steps may plan for (default "
                    f"{CALL_BUDGET_S}, one call's share of its {CALL_LIMIT_S} s hard limit; --smoke no limit)")
    rn.add_argument("--steps", nargs="+", choices=STEP_NAMES, default=None, help="only these steps")
    rn.add_argument("--fill", action="store_true", help="run the steps the newest folder of this device lacks into "
                    "it; when it lacks none, or there is none, every step into a new folder")
    rn.add_argument("--new-folder", dest="new", action="store_true",
                    help="with --fill: measure every step again, into a new folder")
    rn.add_argument("--archive", type=Path, default=None, help="pack the folder into this .tar.gz after every step")
    cm = sub.add_parser("command", help="print the one command a call runs (what `make gpu-check` runs)")
    cm.add_argument("--python", default="python3", help="the interpreter the command names")
    cm.add_argument("--smoke", action="store_true")
    cm.add_argument("--new-folder", dest="new", action="store_true", help="the command measures into a new folder")
    sp = sub.add_parser("step", help="one step in this process (what `run` starts for each step)")
    for name in ("name", "script"):
        sp.add_argument(f"--{name}", required=True)
    for name in ("log", "result"):
        sp.add_argument(f"--{name}", type=Path, required=True)
    sp.add_argument("argv", nargs=argparse.REMAINDER)
    pk = sub.add_parser("pack", help="after a call, whatever ended it: pack the folder its run wrote into --archive")
    pk.add_argument("--archive", type=Path, required=True)
    for verb in (st, rn, cm, pk):
        verb.add_argument("--stage", type=Path, default=STAGE)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The command line (`_parser`): one verb."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.verb == "command":
        print(device_command(args.stage, args.python, args.smoke, args.new))
    elif args.verb == "step":
        entry = run_step(Step(args.name, args.script, (), (), (), 0.0), args.argv[args.argv[:1] == ["--"]:], args.log)
        _write_json(args.result, {"entry": entry, "imports": sorted(_imports())})
    elif args.verb == "pack":
        folder = pack(args.stage, args.archive)
        print(f"gpu_check pack: {_shown(folder)} into {_shown(args.archive)}" if folder else
              "gpu_check pack: no run started from this stage: nothing to pack")
    elif args.verb == "stage":
        if args.data_dir is None or not Path(args.data_dir).is_dir():
            parser.error("no data directory: pass --data-dir or set PAPA_DATA_DIR (glue_data/, conll2003/, wikitext/)")
        # whether each committed folder's code holds the probing changes: git decides it here
        known = {c: has_probing(c) for folder in checked_folders(GPU_ROOT) for c in folder_commits(read_check(folder))}
        manifest = stage(args.stage, args.hub, Path(args.data_dir), args.rows, args.wheels, args.python, known)
        print(f"Staged {args.stage} ({manifest['bytes'] / 2**20:.1f} MiB with the working tree). On the GPU machine, "
              f"carrying {args.stage.name}, run from the checkout's root:\n\n    {device_command(args.stage)}\n\n"
              "then unpack gpu_check.tar.gz under artifacts/gpu/ and run `python -m docs.gen_measurements`.")
    else:
        if args.fill and (args.out or args.steps):
            parser.error("--fill chooses the folder and the steps itself: pass it without --out and --steps")
        if args.new and not args.fill:
            parser.error("--new-folder goes with --fill (without it, --out names the folder)")
        budget = args.budget if args.budget is not None else (float("inf") if args.smoke else float(CALL_BUDGET_S))
        record = run([s for s in STEPS if args.steps is None or s.name in args.steps], args.out, args.stage,
                     args.smoke, budget, args.archive, fill=args.fill, new=args.new)
        print("\n| step | status | seconds |\n|---|---|---|")
        for s in record["steps"]:
            print(f"| {s['name']} | {s['status']}{': ' + s['why'] if s.get('why') else ''} | {s['seconds']:.1f} |")
        return 0 if all(s["status"] != "failed" for s in record["steps"]) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
