"""One GPU check (issue 54): the GPU speed table and the full grid's cost from one command, into one folder.

    make gpu-stage          # here: stage what must travel into .gpu-stage/ and print the command to run there
    make gpu-check          # on a CUDA machine: every step below, within --budget seconds (default 480)
    make gpu-check SMOKE=1  # anywhere: the same steps on the CPU at tiny sizes (tests/integration/test_gpu_check.py)

`stage` copies into one ignored folder what the steps read and a lent GPU machine lacks: the configs and tokenizers
of the models timed (roberta-base and roberta-large for the cost, all-MiniLM-L6-v2 without its weights: every model
is built from its config with seeded random weights, since time does not depend on their values), the data files
in their original formats (SST-2 and WikiText whole, since part A extracts SST-2's constants over every sentence;
of every other task a seeded random subset of `--rows` examples, in file order), and wheels of the pinned
transformers and tokenizers (`--wheels`). It refuses a tree over the transfer's 64 MiB and prints the command.

`run` executes `STEPS` in order of priority, each a benchmark script's own `main` in this process: the speed
table (benchmarks/bench.py in float32 and bf16, eager and compiled; MiniLM and BERT-base, n = 128 and 512), the
cost (benchmarks/full_cost.py parts B and A in bf16, then part B in float32) and the estimate (benchmarks/
grid_estimate.py). A step whose usual time no longer fits the budget is skipped and named. `--fill` (the printed
command's) completes the newest committed folder of this machine's device, running only its steps not ok, and
starts a new folder when that one is complete or there is none; `--steps` runs chosen steps into an existing folder.
A folder holds one device's rows: a call on another device, or a smoke run into a GPU folder, is refused. After
every step the folder's record (`check.json`: the machine; each call's command, the code's commit it ran and its
machine's software; each step's call, command, status and seconds) is rewritten, and with `--archive` the whole
folder is packed again, so a run stopped at any point leaves every step it finished. docs/gen_measurements.py
renders the newest committed folder into docs/performance.md and docs/scaling.md; `goals` reads the issue's targets
off it.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent
REPO = BENCHMARKS.parent
sys.path.insert(0, str(BENCHMARKS))

#: Record format of `check.json`.
FORMAT = 1
STAGE = REPO / ".gpu-stage"
GPU_ROOT = REPO / "artifacts" / "gpu"
#: What one call to a lent machine may carry (the working tree and the staged folder together).
TRANSFER_LIMIT = 64 * 2**20
#: Staged models: the folder name under hub/, and where its config comes from (`--hub` or the installed package).
HUB_MODELS = ("roberta-base", "roberta-large")
MINILM = "minilm"
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".onnx", ".h5", ".msgpack", ".ot", ".pt", ".gguf")
#: Tasks whose files travel whole: part A extracts SST-2's constants over all of it; WikiText is one corpus of articles.
WHOLE = ("sst2", "mlm")
#: Carried as wheels: papa pins other versions than the CUDA image's (transformers 5.17, tokenizers 0.23.2 there),
#: and seqeval (NER's and POS's metric, which part B's evaluations compute) is not there at all; it is published as a
#: source archive only, so its wheel is built here.
WHEELS = ("transformers", "tokenizers")
BUILT_WHEELS = ("seqeval",)
#: papa's declared dependencies the lent machines' CUDA image lacks (device KINDS list, 2026-11-17) and nothing
#: carries: the check must not import them (tests/integration/test_gpu_check.py reads the smoke run's imports).
NOT_ON_GPU_IMAGE = ("datasets", "evaluate", "nbformat", "papermill", "ipykernel", "ipywidgets", "anywidget",
                    "jupyter_client", "traitlets", "submitit", "gguf", "jupyterlab")


@dataclass(frozen=True)
class Step:
    """One benchmark call: `script`'s main with `args` (placeholders {hub}, {data}, {out}), then `gpu` on a CUDA
    machine or `smoke` on the CPU; `usual_s` is its time on one H100, rounded up from the check.json of
    artifacts/gpu/2026-11-28-nvidia-h100-80gb-hbm3 where the step finished there and a guess where it did not (the
    compiled benches, part B in float32), by which `run` skips what the budget can no longer hold."""

    name: str
    script: str
    args: tuple[str, ...]
    gpu: tuple[str, ...]
    smoke: tuple[str, ...]
    usual_s: float


_MINILM_DATA = ("--minilm", "{hub}/minilm", "--data-dir", "{data}")
_BENCH_GPU = ("--device", "cuda", "--batch", "64", "16")
_BENCH_SMOKE = ("--device", "cpu", "--tiny", "--lengths", "16", "--batch", "2", "--repeats", "1")
_COMPILED_SMOKE = (*_BENCH_SMOKE, "--models", "minilm", "--compile", "eager")
_COST = ("--hub", "{hub}", "--data-dir", "{data}")
# The smoke's cost runs in float32 whatever the step's precision (the last --precision wins): bf16 autocast on a CPU
# without bf16 units tripled its time (the MLM probe's backward), and bench_bf16 already runs papa's paths under it.
_COST_SMOKE = ("--device", "cpu", "--tiny", "--steps", "1", "--repeats", "1", "--sample", "16", "--forward-batch", "2",
               "--forward-batches", "1", "--precision", "float32")
#: In order of priority: the eager table, the cost in bf16 (the goals' precision) and its estimate, then compiled
#: tables and the float32 cost.
STEPS = (
    Step("bench_fp32", "bench", (*_MINILM_DATA, "--json", "{out}/bench_fp32.json"),
         (*_BENCH_GPU, "--repeats", "5"), (*_BENCH_SMOKE, "--grid-size", "4"), 60),
    Step("bench_bf16", "bench", (*_MINILM_DATA, "--dtype", "bf16", "--json", "{out}/bench_bf16.json"),
         (*_BENCH_GPU, "--repeats", "5"), (*_BENCH_SMOKE, "--grid-size", "0"), 60),
    Step("cost_b_bf16", "full_cost", (*_COST, "--parts", "B", "--precision", "bf16", "--json",
                                      "{out}/full_cost_b_bf16.json"), ("--device", "cuda"), _COST_SMOKE, 260),
    Step("cost_a_bf16", "full_cost", (*_COST, "--parts", "A", "--sizes", "base", "--precision", "bf16", "--json",
                                      "{out}/full_cost_a_bf16.json"),
         ("--device", "cuda", "--train-examples", "4096"), (*_COST_SMOKE, "--limit", "16"), 90),
    Step("estimate_bf16", "estimate", ("{out}/full_cost_b_bf16.json", "{out}/full_cost_a_bf16.json"), (), (), 5),
    Step("bench_bf16_compiled", "bench", (*_MINILM_DATA, "--dtype", "bf16", "--grid-size", "0", "--json",
                                          "{out}/bench_bf16_compiled.json"),
         (*_BENCH_GPU, "--repeats", "3", "--compile"), _COMPILED_SMOKE, 150),
    Step("bench_fp32_compiled", "bench", (*_MINILM_DATA, "--grid-size", "0", "--json",
                                          "{out}/bench_fp32_compiled.json"),
         (*_BENCH_GPU, "--repeats", "3", "--compile"), _COMPILED_SMOKE, 150),
    Step("cost_b_fp32", "full_cost", (*_COST, "--parts", "B", "--json", "{out}/full_cost_b_fp32.json"),
         ("--device", "cuda"), _COST_SMOKE, 300),
)
STEP_NAMES = tuple(s.name for s in STEPS)


# ---- staging (here) ---------------------------------------------------------------------------------------------

def _tsv_subset(text: str, header: bool, rows: int, rng: random.Random) -> tuple[str, int, int]:
    """(`rows` random lines of a TSV after its header, in file order; lines kept; lines there were)."""
    lines = text.splitlines(keepends=True)
    head, body = (lines[:1], lines[1:]) if header else ([], lines)
    keep = sorted(rng.sample(range(len(body)), min(rows, len(body))))
    return "".join(head + [body[i] for i in keep]), len(keep), len(body)


def _conll_subset(text: str, rows: int, rng: random.Random) -> tuple[str, int, int]:
    """(`rows` random sentences, blank-line separated blocks, in order after one document start; kept; there were)."""
    blocks = [b for b in text.split("\n\n") if b.strip() and not b.startswith("-DOCSTART-")]
    keep = sorted(rng.sample(range(len(blocks)), min(rows, len(blocks))))
    return "-DOCSTART- -X- O O\n\n" + "".join(blocks[i].strip("\n") + "\n\n" for i in keep), len(keep), len(blocks)


def stage_data(data_dir: Path, out: Path, rows: int, seed: int = 0) -> dict[str, str]:
    """The local files every staged task reads, under `out` at their paths below `data_dir`: whole for `WHOLE`,
    else `rows` seeded random examples. Returns what each file holds."""
    from papa.tasks.registry import get_task
    from full_cost import GRID_TASKS

    held = {}
    for task in GRID_TASKS:
        source = get_task(task).local
        for name in (source.train_file, source.eval_file):
            src, dst = data_dir / name, out / name
            if not src.is_file() or name in held:
                continue  # MNLI is not in this data directory: part B times it on MRPC's lengths
            dst.parent.mkdir(parents=True, exist_ok=True)
            text = src.read_text(encoding="utf-8")
            rng = random.Random(f"{seed}:{name}")
            if task in WHOLE:
                shutil.copyfile(src, dst)
                held[name] = "whole"
                continue
            small, kept, there = (_conll_subset(text, rows, rng) if source.reader == "conll"
                                  else _tsv_subset(text, source.header, rows, rng))
            dst.write_text(small, encoding="utf-8")
            held[name] = f"{kept:,} of {there:,} examples, drawn at random (seed {seed}), in file order"
    return held


def stage_models(hub: Path, out: Path) -> dict[str, str]:
    """Config and tokenizer files of `HUB_MODELS` (from `hub`) and of MiniLM (the installed package), no weights."""
    from papa.method.models import DEFAULT_MODEL, resolve_model_path

    sources = {name: hub / name for name in HUB_MODELS}
    sources[MINILM] = Path(resolve_model_path(DEFAULT_MODEL))
    for name, src in sources.items():
        if not (src / "config.json").is_file():
            raise SystemExit(f"gpu_check stage: no config.json in {src}: pass --hub, the folder holding "
                             f"{', '.join(HUB_MODELS)}/")
        (out / name).mkdir(parents=True, exist_ok=True)
        for f in src.iterdir():
            if f.is_file() and f.suffix not in WEIGHT_SUFFIXES:
                shutil.copyfile(f, out / name / f.name)
    return {name: str(src.name if name != MINILM else DEFAULT_MODEL) for name, src in sources.items()}


def download_wheels(out: Path, python: str) -> list[str]:
    """Wheels of `WHEELS` (for CPython `python` on x86-64 Linux) and `BUILT_WHEELS` (pure Python, built here), at the
    versions installed here: papa's pins."""
    pins = [f"{name}=={metadata.version(name)}" for name in WHEELS]
    built = [f"{name}=={metadata.version(name)}" for name in BUILT_WHEELS]
    out.mkdir(parents=True, exist_ok=True)
    platforms = [a for p in ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
                 for a in ("--platform", p)]
    pip = [sys.executable, "-m", "pip"]
    subprocess.run([*pip, "download", "--quiet", "--no-deps", "--only-binary=:all:", "--python-version", python,
                    "--implementation", "cp", *platforms, "-d", str(out), *pins], check=True)
    subprocess.run([*pip, "wheel", "--quiet", "--no-deps", "-w", str(out), *built], check=True)
    return pins + built


def travelling_files(repo: Path) -> list[str]:
    """What a call to a lent machine copies of `repo` (relative paths): tracked files and untracked ones git does not
    ignore."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=repo,
                            capture_output=True, check=True).stdout.decode().split("\0")
    return [rel for rel in listed if rel and (repo / rel).is_file()]


def _tree_bytes(repo: Path) -> int:
    return sum((repo / rel).stat().st_size for rel in travelling_files(repo))


def _folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def _commit(repo: Path) -> dict:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True).stdout.strip()
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    return {"commit": git("rev-parse", "HEAD") or None, "dirty": dirty}


def device_command(stage: Path, wheels: bool, limit_s: int = 570) -> str:
    """The command a lent machine runs, from the checkout's root: the wheels into /tmp/site, then the check with
    `--fill` (the steps its device's newest committed folder lacks, else a new folder), packed into $OUT after every
    step."""
    rel = stage.resolve().relative_to(REPO) if stage.resolve().is_relative_to(REPO) else stage
    install = (f"python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "
               f"{rel}/wheels/*.whl && " if wheels else "")
    return (f"{install}export PYTHONPATH={'/tmp/site:' if wheels else ''}$PWD && timeout {limit_s} python3 "
            f"benchmarks/gpu_check.py run --fill --stage {rel} --archive $OUT/gpu_check.tar.gz")


def stage(out: Path, hub: Path, data_dir: Path, rows: int, wheels: bool, python: str) -> dict:
    """Stage everything `run` reads into `out` (module docstring); refuse when the tree outgrows the transfer."""
    if out.exists():
        shutil.rmtree(out)
    manifest = {"format": FORMAT, "made": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "source": _commit(REPO), "models": stage_models(hub, out / "hub"),
                "data": stage_data(data_dir, out / "data", rows), "rows": rows,
                "wheels": download_wheels(out / "wheels", python) if wheels else []}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    inside = out.resolve().is_relative_to(REPO)
    total = _folder_bytes(out) + (_tree_bytes(REPO) if inside else 0)
    manifest["bytes"] = total
    if total > TRANSFER_LIMIT:
        raise SystemExit(f"gpu_check stage: the working tree and {out} come to {total / 2**20:.1f} MiB, over the "
                         f"{TRANSFER_LIMIT / 2**20:.0f} MiB a call carries: stage fewer --rows, or --no-wheels "
                         "(the image's transformers then), or commit fewer large files")
    return manifest


# ---- running (on the GPU) ---------------------------------------------------------------------------------------

def describe_machine(cuda: bool) -> dict:
    """The machine, its software and where the code came from."""
    from bench import _cpu_name
    import torch

    versions = {}
    for name in ("torch", "transformers", "tokenizers", "huggingface_hub", "numpy", "pandas", "scipy", "accelerate"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    machine = {"cpu": _cpu_name(), "python": platform.python_version(), "platform": platform.platform(),
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
    import grid_estimate

    cost = grid_estimate.load(files)
    precisions = {json.loads(Path(f).read_text(encoding="utf-8")).get("precision", "float32") for f in files}
    return cost, {**grid_estimate.estimate(cost), "precision": "/".join(sorted(precisions))}


def _estimate(argv: list[str]) -> int:
    """grid_estimate.py over the cost files that exist: its tables into estimate.md, its numbers into estimate.json."""
    import grid_estimate

    files = [p for p in argv if Path(p).is_file()]
    if not files:
        raise RuntimeError("no cost file to estimate from: the cost steps did not run")
    cost, est = _estimated(files)
    printed = grid_estimate.report(cost, est)
    folder = Path(files[0]).parent
    (folder / "estimate.md").write_text(printed, encoding="utf-8")
    keep = ("precision", "jobs", "points", "preparations", "per_model", "per_task", "totals", "parts", "chain_s",
            "unfit", "unfit_jobs", "unfit_backbone_s", "unfit_blocks_s")
    record = {"from": [Path(f).name for f in files], **{k: est[k] for k in keep}}
    _write_json(folder / "estimate.json", record)
    sys.stdout.write(printed)
    return 0


def _main_of(script: str):
    if script == "estimate":
        return _estimate
    return __import__(script).main


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
            if isinstance(exc, KeyboardInterrupt):
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


def run(steps: list[Step], out: Path | None, stage_dir: Path, smoke: bool, budget: float, archive: Path | None,
        fill: bool = False) -> dict:
    """Run `steps` into `out` (module docstring); with `fill`, only those of `fill_target`'s steps, into its folder.
    Returns the record written to `out/check.json`."""
    import torch

    if not smoke and not torch.cuda.is_available():
        raise SystemExit("gpu_check run: no CUDA device here; --smoke runs the same steps on the CPU at tiny sizes")
    for where in (stage_dir / "hub", stage_dir / "data"):
        if not where.is_dir():
            raise SystemExit(f"gpu_check run: {where} is missing: run `make gpu-stage` (gpu_check.py stage) first")
    os.environ.update(PAPA_PROGRESS="0", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    machine = describe_machine(cuda=not smoke)
    if fill:
        found, names = fill_target(machine, smoke)
        steps = [s for s in steps if s.name in names]
        out = found or default_out(machine, smoke)
        print(f"gpu_check run --fill: {_shown(out)}, {'the steps it lacks' if found else 'every step'}: "
              f"{', '.join(s.name for s in steps)}", flush=True)
    out = out or default_out(machine, smoke)
    path = out / "check.json"
    record = read_check(out) if path.is_file() else None
    why = folder_refusal(record, machine, smoke) if record else None
    if why:
        raise SystemExit(f"gpu_check run: {_shown(out)} cannot take this call's steps: {why}. A folder's rows come "
                         "from one device: leave out --out (a new folder per date and device), or pass --fill")
    out.mkdir(parents=True, exist_ok=True)
    record = record or {"steps": [], "machine": machine}
    if any("call" not in s for s in record["steps"]):
        # a record from before each call kept its code: its steps keep the code it named (its latest call's)
        record.setdefault("earlier_source", record["source"])
        for s in record["steps"]:
            s.setdefault("call", None)
    manifest = json.loads((stage_dir / "manifest.json").read_text(encoding="utf-8"))
    # a later call (--steps or --fill, into the same folder) adds to the record: each call keeps its command, the
    # code it ran (the stage's commit) and its machine's software, and each step names the call that ran it
    call = {"started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": "python benchmarks/gpu_check.py " + " ".join(_shown(Path(a)) if os.path.isabs(a) else a
                                                                   for a in sys.argv[1:]),
            "budget_s": budget if budget != float("inf") else None,  # JSON has no infinity
            "source": manifest["source"], "machine": machine}
    calls = [*record.get("calls", []), call]
    # `machine` stays the folder's first (its device is every call's); `source` is the latest call's; a step's `call`
    # indexes `calls` (None: one of the calls before `earlier_source`'s record kept each call's code)
    record.update(format=FORMAT, source=manifest["source"], staged=manifest, smoke=smoke, calls=calls)
    start = time.perf_counter()
    for step in steps:
        left = budget - (time.perf_counter() - start)
        if step.usual_s > left:
            entry = {"name": step.name, "script": step.script, "status": "skipped",
                     "why": f"{max(left, 0):.0f} s of the {budget:.0f} s budget left; it takes about "
                            f"{step.usual_s:.0f} s (run it with --fill, or --steps {step.name})", "seconds": 0.0}
        else:
            argv = step_argv(step, smoke, stage_dir / "hub", stage_dir / "data", out)
            entry = run_step(step, argv, out / "logs" / f"{step.name}.log")
        entry["call"] = len(calls) - 1
        record["steps"] = [s for s in record["steps"] if s["name"] != step.name] + [entry]
        record["imports"] = sorted({m.split(".")[0] for m in sys.modules} - set(sys.stdlib_module_names))
        _write_json(path, record)
        if archive is not None:
            _pack(out, archive)
    return record


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
    """`folder`'s record, checked: a file of another format or without its steps is refused."""
    record = json.loads((folder / "check.json").read_text(encoding="utf-8"))
    if record.get("format") != FORMAT or "steps" not in record or "machine" not in record:
        raise ValueError(f"{folder / 'check.json'}: format {record.get('format')!r}, not gpu_check's {FORMAT}")
    return record


#: Issue 54's targets for the estimate: (goal, model or None for the whole grid, hours, estimate / floor).
HOUR_GOALS = (("BERT-base, every section, in bf16: under 2 GPU-hours", "bert-base-uncased", 2.0, None),
              ("BERT-base, every section, in bf16: within 1.5× its floor", "bert-base-uncased", None, 1.5),
              ("the whole grid, in bf16: under 40 GPU-hours", None, 40.0, None))
#: The speed table's targets read here: (goal, what the bench row starts with), each in float32 and bf16, eager.
SPEED_GOALS = (("capture ≥ 0.85× the plain forward", "capture (papa)"),
               ("attention-free ≥ 95% of its MAC ceiling", "attention-free"))


def _hour_goal(goal: str, model: str | None, hours: float | None, ratio: float | None, est: dict) -> dict:
    part = est["per_model"][model] if model else est["totals"]
    if est.get("precision") != "bf16":
        return {"goal": goal, "value": f"the estimate is in {est.get('precision')}", "met": None}
    if hours is not None:
        value = part["estimate"] / 3600
        return {"goal": goal, "value": f"{value:.1f} h", "met": value < hours}
    value = part["estimate"] / part["floor"]
    return {"goal": goal, "value": f"{value:.2f}×", "met": value <= ratio}


def folder_estimate(folder: Path) -> tuple[dict, dict] | None:
    """(cost, estimate) of the cost files `folder`'s estimate step read, estimated again by this checkout's
    grid_estimate.py (the docs are generated from the measurements, not from the printout), or None where the step
    did not run. The estimate carries the cost files' precision."""
    step = next((s for s in read_check(folder)["steps"] if s["name"] == "estimate_bf16" and s["status"] == "ok"), None)
    files = [folder / Path(a).name for a in step["argv"]] if step else []
    files = [str(f) for f in files if f.is_file()]
    return _estimated(files) if files else None


def goals(folder: Path) -> list[dict]:
    """Issue 54's goals as `folder` reads them: {goal, value, met}; met is None where a step did not run."""
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
    return found


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
    rn.add_argument("--budget", type=float, default=None, help="seconds (default 480; --smoke no limit)")
    rn.add_argument("--steps", nargs="+", choices=STEP_NAMES, default=None, help="only these steps")
    rn.add_argument("--fill", action="store_true",
                    help="run the steps the newest folder of this device lacks (not ok) into it; when it lacks none, "
                         "or there is none, every step into a new folder (the command `stage` prints)")
    rn.add_argument("--archive", type=Path, default=None, help="pack the folder into this .tar.gz after every step")
    args = parser.parse_args(argv)
    if args.verb == "run" and args.fill and (args.out or args.steps):
        parser.error("--fill chooses the folder and the steps itself: pass it without --out and --steps")
    if args.verb == "stage":
        if args.data_dir is None or not Path(args.data_dir).is_dir():
            parser.error("no data directory: pass --data-dir or set PAPA_DATA_DIR (glue_data/, conll2003/, wikitext/)")
        manifest = stage(args.stage, args.hub, Path(args.data_dir), args.rows, args.wheels, args.python)
        print(f"Staged {args.stage} ({manifest['bytes'] / 2**20:.1f} MiB with the working tree). On a lent GPU "
              f"machine, carrying {args.stage.name}, run from the checkout's root:\n\n"
              f"    {device_command(args.stage, args.wheels)}\n\nthen unpack gpu_check.tar.gz under artifacts/gpu/ "
              "and run `python docs/gen_measurements.py`.")
        return 0
    steps = [s for s in STEPS if args.steps is None or s.name in args.steps]
    budget = args.budget if args.budget is not None else (float("inf") if args.smoke else 480.0)
    record = run(steps, args.out, args.stage, args.smoke, budget, args.archive, fill=args.fill)
    print("\n| step | status | seconds |\n|---|---|---|")
    for s in record["steps"]:
        print(f"| {s['name']} | {s['status']}{': ' + s['why'] if s.get('why') else ''} | {s['seconds']:.1f} |")
    return 0 if all(s["status"] != "failed" for s in record["steps"]) else 1


if __name__ == "__main__":
    sys.exit(main())
