"""Staging the GPU check (benchmarks/gpu_check.py) here: what a bare GPU machine (a time-limited allocation, a
preemptible instance, a short queue slot, with no network) lacks, packed into one ignored folder that travels with the
working tree, and the one command that machine runs.

The folder holds one `BUNDLE` (a .tar.xz, unpacked on the machine by `unpack`) of the configs and tokenizers of the
models timed (no weights: every model is built from its config with seeded random weights, since time does not depend
on their values), the data files in their original formats (SST-2 and WikiText whole, of every other task a seeded
random subset of `--rows` examples, in file order) and the pinned transformers, unzipped from its wheel (a wheel is
deflated file by file; one xz stream over the unzipped files is less than half its size); beside it the manifest.
A tree over the transfer's 64 MiB is refused; `staged_bytes` counts what travels.
"""
from __future__ import annotations

import json
import random
import tarfile
import tempfile
import zipfile
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from benchmarks.gpu_steps import CALL_LIMIT_S, KILL_AFTER_S

REPO = Path(__file__).resolve().parents[1]
STAGE = REPO / ".gpu-stage"
#: Record format of the stage's manifest.json.
MANIFEST_FORMAT = 1
#: What one call to the GPU machine may carry (the working tree and the staged folder together): a parameter of the
#: allocation, 64 MiB by default.
TRANSFER_LIMIT = 64 * 2**20
#: Staged models: the folder name under hub/, and where its config comes from (`--hub` or the installed package).
HUB_MODELS = ("bert-base-uncased", "roberta-base", "roberta-large")
MINILM = "minilm"
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".onnx", ".h5", ".msgpack", ".ot", ".pt", ".gguf")
#: Tasks whose files travel whole: part A extracts SST-2's constants over all of it; WikiText is one corpus of articles.
WHOLE = ("sst2", "mlm")
#: Carried as wheels: the CUDA image's transformers (5.17) is older than papa's pin. Its tokenizers (0.23.2, one patch
#: below the pin, inside transformers' own range) runs as it is, and the check records that it is older than the pin;
#: seqeval, which the image lacks, is not imported by any step (the record's imports list shows it).
WHEELS = ("transformers",)
#: The staged folders packed into one archive: the .tar.xz that travels, unpacked on the machine.
PACKED = ("hub", "data", "site")
BUNDLE = "bundle.tar.xz"
#: Written into the stage once `unpack` has unpacked the bundle there.
UNPACKED = ".unpacked"

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
    from benchmarks.full_cost import GRID_TASKS

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
    """Wheels of `WHEELS` (for CPython `python` on x86-64 Linux) at the versions installed here: papa's pins."""
    pins = [f"{name}=={metadata.version(name)}" for name in WHEELS]
    out.mkdir(parents=True, exist_ok=True)
    platforms = [a for p in ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
                 for a in ("--platform", p)]
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                    "--python-version", python, "--implementation", "cp", *platforms, "-d", str(out), *pins],
                   check=True)
    return pins


def unzip_wheels(wheels: list[Path], site: Path) -> None:
    """The wheels unpacked into `site`, as `pip install --target` lays them out for a wheel without a .data folder
    (the ones carried here: their scripts are not needed)."""
    site.mkdir(parents=True, exist_ok=True)
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as whl:
            whl.extractall(site, [n for n in whl.namelist() if not n.split("/", 1)[0].endswith(".data")])
    (site / ".installed").write_text("\n".join(w.name for w in wheels), encoding="utf-8")


def pack_bundle(out: Path) -> Path:
    """`PACKED` folders of `out` into `out/BUNDLE`, the folders removed: what travels is the archive."""
    bundle = out / BUNDLE
    with tarfile.open(bundle, "w:xz", preset=6) as tar:
        for name in PACKED:
            if (out / name).is_dir():
                tar.add(out / name, arcname=name)
    for name in PACKED:
        shutil.rmtree(out / name, ignore_errors=True)
    return bundle


def unpack(stage_dir: Path) -> bool:
    """Unpack the stage's bundle beside it (once per machine); False when there is none (an unpacked stage)."""
    bundle = stage_dir / BUNDLE
    if not bundle.is_file():
        return False
    if not (stage_dir / UNPACKED).is_file():
        with tarfile.open(bundle, "r:xz") as tar:
            tar.extractall(stage_dir, filter="data")
        (stage_dir / UNPACKED).write_text(bundle.name, encoding="utf-8")
    return True


def travelling_files(repo: Path) -> list[str]:
    """What a call to the GPU machine copies of `repo` (relative paths): tracked files and untracked ones git does not
    ignore."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=repo,
                            capture_output=True, check=True).stdout.decode().split("\0")
    return [rel for rel in listed if rel and (repo / rel).is_file()]


def staged_bytes(stage_dir: Path, repo: Path = REPO) -> int:
    """Bytes one call carries: every file of the stage, and the working tree's travelling files when the stage lies
    inside it (a file of the stage that git does not ignore is counted once)."""
    stage_dir = stage_dir.resolve()
    staged = {f.resolve() for f in stage_dir.rglob("*") if f.is_file()}
    tree = set()
    if stage_dir.is_relative_to(repo.resolve()):
        tree = {(repo / rel).resolve() for rel in travelling_files(repo)}
    return sum(f.stat().st_size for f in staged | tree)


def _commit(repo: Path) -> dict:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True).stdout.strip()
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    return {"commit": git("rev-parse", "HEAD") or None, "dirty": dirty}


def device_command(stage: Path, python: str = "python3", smoke: bool = False, new: bool = False) -> str:
    """The command the GPU machine runs, from the checkout's root (`make gpu-check` runs it too, with its `python`):
    the check with `--fill` (the steps its device's newest committed folder lacks, else a new folder; `new`: a new
    folder) under the call's hard limit, packed into $OUT after every step and, whatever happened, once more after
    the call."""
    rel = stage.resolve().relative_to(REPO) if stage.resolve().is_relative_to(REPO) else stage
    archive = "--archive $OUT/gpu_check.tar.gz"
    check = f"{python} -m benchmarks.gpu_check"
    return (f"export PYTHONPATH=$PWD; timeout -k {KILL_AFTER_S} {CALL_LIMIT_S} {check} run --fill"
            f"{' --new-folder' if new else ''}{' --smoke' if smoke else ''} --stage {rel} {archive}; rc=$?; "
            f"{check} pack --stage {rel} {archive}; exit $rc")


def stage(out: Path, hub: Path, data_dir: Path, rows: int, wheels: bool, python: str,
          known: dict[str, bool | None] | None = None) -> dict:
    """Stage everything `run` reads into `out` (module docstring); refuse when the tree outgrows the transfer.
    `known`: the committed folders' code commits, each with whether it holds the probing changes (decided here, where
    git has the history; the machine may not)."""
    if out.exists():
        shutil.rmtree(out)
    manifest = {"format": MANIFEST_FORMAT, "made": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "source": _commit(REPO), "models": stage_models(hub, out / "hub"),
                "data": stage_data(data_dir, out / "data", rows), "rows": rows, "wheels": [],
                "has_probing": known or {}}
    if wheels:
        with tempfile.TemporaryDirectory() as tmp:
            manifest["wheels"] = download_wheels(Path(tmp), python)
            unzip_wheels(sorted(Path(tmp).glob("*.whl")), out / "site")
    manifest["bundle"] = pack_bundle(out).name
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    total = staged_bytes(out)
    manifest["bytes"] = total
    if total > TRANSFER_LIMIT:
        raise SystemExit(f"gpu_check stage: the working tree and {out} come to {total / 2**20:.1f} MiB, over the "
                         f"{TRANSFER_LIMIT / 2**20:.0f} MiB a call carries: stage fewer --rows, or --no-wheels "
                         "(the image's transformers then, recorded as older than the pin), or commit fewer large "
                         "files")
    return manifest
