"""What a bare GPU machine (no network, no hub, no data) needs for the GPU check, staged here into one ignored folder
that travels with the working tree: one .tar.xz of the configs and tokenizers of the models timed (no weights: every
model is built with seeded random weights), the data files (SST-2 and WikiText whole, of every other task a seeded
random subset) and the pinned transformers unzipped from its wheel, beside its manifest."""
from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STAGE = REPO / ".gpu-stage"
#: What one call to the GPU machine may carry, the working tree and the stage together (a parameter of the machine).
TRANSFER_LIMIT = 64 * 2**20
#: Staged models: the folder name under hub/ (from `--hub`), and MiniLM's (from the installed package).
HUB_MODELS, MINILM = ("bert-base-uncased", "roberta-base", "roberta-large"), "minilm"
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".onnx", ".h5", ".msgpack", ".ot", ".pt", ".gguf")
#: Tasks whose files travel whole: part A extracts SST-2's constants over all of it; WikiText is one corpus.
WHOLE = ("sst2", "mlm")
#: Carried as wheels: a CUDA image's transformers may be older than papa's pin (the check records what it imports).
WHEELS = ("transformers",)
#: The staged folders packed into the one archive that travels (`BUNDLE`), and the mark of a stage unpacked.
PACKED, BUNDLE, UNPACKED = ("hub", "data", "site"), "bundle.tar.xz", ".unpacked"
#: Pins checked against what runs: an older version than constraints.txt's is printed and recorded.
PINNED = ("torch", "transformers", "tokenizers", "huggingface_hub")


def _subset(text: str, reader: str, header: bool, rows: int, rng: random.Random) -> tuple[str, int, int]:
    """(`rows` random examples of a file in file order, examples kept, examples there were): lines of a TSV after its
    header, or blank-line separated sentences of a CoNLL file after one document start."""
    if reader == "conll":
        head, body = "-DOCSTART- -X- O O\n\n", [b.strip("\n") + "\n\n" for b in text.split("\n\n")
                                                 if b.strip() and not b.startswith("-DOCSTART-")]
    else:
        lines = text.splitlines(keepends=True)
        head, body = ("".join(lines[:1]), lines[1:]) if header else ("", lines)
    keep = sorted(rng.sample(range(len(body)), min(rows, len(body))))
    return head + "".join(body[i] for i in keep), len(keep), len(body)


def stage_data(data_dir: Path, out: Path, rows: int, seed: int = 0) -> dict[str, str]:
    """The local files of every task part B times, under `out` at their paths below `data_dir`: whole for `WHOLE`,
    else `rows` seeded random examples. Returns what each file holds."""
    from benchmarks.full_cost import GRID_TASKS
    from papa.tasks.registry import get_task

    held = {}
    for task in GRID_TASKS:
        source = get_task(task).local
        for name in (source.train_file, source.eval_file):
            src, dst = data_dir / name, out / name
            if not src.is_file() or name in held:
                continue  # MNLI is not in this data directory: part B times it on MRPC's lengths
            dst.parent.mkdir(parents=True, exist_ok=True)
            if task in WHOLE:
                shutil.copyfile(src, dst)
                held[name] = "whole"
                continue
            small, kept, there = _subset(src.read_text(encoding="utf-8"), source.reader, source.header, rows,
                                         random.Random(f"{seed}:{name}"))
            dst.write_text(small, encoding="utf-8")
            held[name] = f"{kept:,} of {there:,} examples, drawn at random (seed {seed}), in file order"
    return held


def stage_models(hub: Path, out: Path) -> dict[str, str]:
    """Config and tokenizer files of `HUB_MODELS` (from `hub`) and of MiniLM (the installed package), no weights."""
    from papa.method.models import DEFAULT_MODEL, resolve_model_path

    sources = {**{name: hub / name for name in HUB_MODELS}, MINILM: Path(resolve_model_path(DEFAULT_MODEL))}
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
    """The wheels unpacked into `site` as `pip install --target` lays out a wheel without a .data folder (a wheel is
    deflated file by file: one xz stream over its files is less than half its size)."""
    site.mkdir(parents=True, exist_ok=True)
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as whl:
            whl.extractall(site, [n for n in whl.namelist() if not n.split("/", 1)[0].endswith(".data")])
    (site / ".installed").write_text("\n".join(w.name for w in wheels), encoding="utf-8")


def pack_bundle(out: Path) -> Path:
    """`PACKED` folders of `out` into `out/BUNDLE`, the folders removed: what travels is the archive."""
    with tarfile.open(out / BUNDLE, "w:xz", preset=6) as tar:
        for name in PACKED:
            if (out / name).is_dir():
                tar.add(out / name, arcname=name)
    for name in PACKED:
        shutil.rmtree(out / name, ignore_errors=True)
    return out / BUNDLE


def unpack(stage_dir: Path) -> bool:
    """Unpack the stage's bundle beside it (once per machine); False when there is none (an unpacked stage)."""
    if not (stage_dir / BUNDLE).is_file():
        return False
    if not (stage_dir / UNPACKED).is_file():
        with tarfile.open(stage_dir / BUNDLE, "r:xz") as tar:
            tar.extractall(stage_dir, filter="data")
        (stage_dir / UNPACKED).write_text(BUNDLE, encoding="utf-8")
    return True


def release(version: str) -> tuple[int, ...]:
    """The release numbers of `version`, for ordering as pip orders the pins checked: the leading integer of each
    dot-separated part up to the first without one, trailing zeros dropped ("5.23.0+cu130" is (5, 23)); a
    pre-release orders as its release ("2.0rc1" is (2,))."""
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
    lines = constraints.read_text(encoding="utf-8").splitlines() if constraints.is_file() else []
    pins = {name.lower().replace("-", "_"): version for name, _, version in (line.strip().partition("==")
                                                                            for line in lines) if version}
    older = []
    for name in PINNED:
        with contextlib.suppress(metadata.PackageNotFoundError):
            found, pin = metadata.version(name), pins.get(name.lower())
            if pin and release(found) < release(pin):
                older.append(f"{name} {found} (pinned {pin})")
    return older


def use_staged_wheels(stage_dir: Path, pins: list[str]) -> list[str]:
    """Put the stage's site/ (unpacked from its bundle, or installed from its wheels/ once per machine) first on the
    path, this process's and its children's, and check that the pinned versions are the ones imported; returns the
    pins (nothing staged: [])."""
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
    if wrong := [f"{pin} ({metadata.version(pin.split('==')[0])} found)" for pin in pins
                 if metadata.version(pin.split("==")[0]) != pin.split("==")[1]]:
        raise SystemExit(f"gpu_check run: the staged wheels did not take: {', '.join(wrong)}; delete {site} and run "
                         "again")
    return pins


def travelling_files(repo: Path) -> list[str]:
    """What a call to the GPU machine copies of `repo`: tracked files and untracked ones git does not ignore."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=repo,
                            capture_output=True, check=True).stdout.decode().split("\0")
    return [rel for rel in listed if rel and (repo / rel).is_file()]


def staged_bytes(stage_dir: Path, repo: Path = REPO) -> int:
    """Bytes one call carries: every file of the stage, and the working tree's travelling files when the stage lies
    inside it (a file of the stage that git does not ignore counted once)."""
    stage_dir = stage_dir.resolve()
    files = {f.resolve() for f in stage_dir.rglob("*") if f.is_file()}
    if stage_dir.is_relative_to(repo.resolve()):
        files |= {(repo / rel).resolve() for rel in travelling_files(repo)}
    return sum(f.stat().st_size for f in files)


def source(repo: Path = REPO) -> dict:
    """The code's commit, and whether it has uncommitted changes."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True).stdout.strip()
    return {"commit": git("rev-parse", "HEAD") or None, "dirty": bool(git("status", "--porcelain",
                                                                          "--untracked-files=no"))}


def stage(out: Path, hub: Path, data_dir: Path, rows: int, wheels: bool, python: str,
          known: dict[str, bool | None] | None = None) -> dict:
    """Stage everything a call reads into `out`; refuse when the tree and the stage outgrow `TRANSFER_LIMIT`.
    `known`: the committed folders' code commits, each with whether it holds the probing changes (decided here,
    where git has the history; the machine may not)."""
    if out.exists():
        shutil.rmtree(out)
    manifest = {"format": 1, "made": datetime.now(timezone.utc).isoformat(timespec="seconds"), "source": source(),
                "models": stage_models(hub, out / "hub"), "data": stage_data(data_dir, out / "data", rows),
                "rows": rows, "wheels": [], "has_probing": known or {}}
    if wheels:
        with tempfile.TemporaryDirectory() as tmp:
            manifest["wheels"] = download_wheels(Path(tmp), python)
            unzip_wheels(sorted(Path(tmp).glob("*.whl")), out / "site")
    manifest["bundle"] = pack_bundle(out).name
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    manifest["bytes"] = total = staged_bytes(out)
    if total > TRANSFER_LIMIT:
        raise SystemExit(f"gpu_check stage: the working tree and {out} come to {total / 2**20:.1f} MiB, over the "
                         f"{TRANSFER_LIMIT / 2**20:.0f} MiB a call carries: stage fewer --rows, or --no-wheels (the "
                         "image's transformers then, recorded as older than the pin), or commit fewer large files")
    return manifest
