"""How far a run's numbers move between CPUs: the same grid points run under the kernels of other instruction sets.

    python artifacts/cross_cpu/cross_cpu.py --profile cpu --tasks sst2 cola --fractions 1 0
    python artifacts/cross_cpu/cross_cpu.py --profile quick --tasks sst2 --out /tmp/xcpu      # a smoke run

Float rounding differs between instruction sets, and PyTorch picks its kernels by what the CPU offers. Each setting
below runs `papa probe` in a fresh process with the environment variables that make PyTorch, oneDNN and MKL use
the kernels of another CPU; every setting runs the same points with the same seeds, so each row compares paired
runs. It prints, per task and fraction, the largest and mean absolute difference of a seed's score from the
machine's own kernels, and of the mean over seeds, and writes the rows and that summary as CSV with a JSON record
of the command, the CPU and the settings (`--out`, default artifacts/cross_cpu/<profile>).

Settings: `native` (the machine's own kernels), `avx2` (ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2
MKL_ENABLE_INSTRUCTIONS=AVX2) and `default` (ATEN_CPU_CAPABILITY=default: PyTorch's portable kernels). With
`--committed RESULTS` the rows of a stored results table with the same run ids (e.g. artifacts/cpu/results.csv,
made on another machine) are compared too.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from papa.core.artifacts import atomic_path

REPO = Path(__file__).resolve().parents[2]
SETTINGS = {
    "native": {},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    "default": {"ATEN_CPU_CAPABILITY": "default"},
}
KEY = ["task", "constants", "selection", "fraction_label", "seed", "metric"]


def _cpu() -> str:
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
        model = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    return f"{model.split(':', 1)[1].strip()} ({isa})"


def run_setting(setting: str, args: argparse.Namespace) -> pd.DataFrame:
    out = args.out / "runs" / setting  # constants, results: not committed (.gitignore); a rerun resumes them
    env = {**os.environ, **SETTINGS[setting]}
    for task in args.tasks:
        cmd = [sys.executable, "-m", "papa.cli", "probe", "--task", task, "--profile", args.profile,
               "--fractions", *args.fractions, "--out", str(out), "--quiet"]
        if args.seeds:
            cmd += ["--seeds", *args.seeds]
        if args.data_dir:
            cmd += ["--data-dir", args.data_dir]
        start = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
        print(f"  {setting:8s} {task:5s} {time.perf_counter() - start:7.1f} s", flush=True)
    rows = pd.read_csv(out / "results.csv")
    return rows[rows.task.isin(args.tasks) & rows.fraction_label.astype(str).isin(args.fractions)]


def compare(runs: dict[str, pd.DataFrame]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The paired rows (one column of values per setting) and, per task and fraction, the differences from native."""
    paired = None
    for setting, rows in runs.items():
        part = rows.set_index("run_id")[[*KEY, "value"]].rename(columns={"value": setting})
        paired = part if paired is None else paired.join(part[[setting]], how="inner")
    paired = paired.reset_index()
    summary = []
    for (task, fraction), group in paired.groupby(["task", "fraction_label"], sort=False):
        for setting in runs:
            if setting == "native":
                continue
            diff = (group[setting] - group["native"]).abs()
            summary.append(dict(task=task, fraction=fraction, setting=setting, seeds=len(group),
                                max_abs_diff=diff.max(), mean_abs_diff=diff.mean(),
                                diff_of_mean=abs(group[setting].mean() - group["native"].mean()),
                                identical=int((diff == 0).sum())))
    return paired, pd.DataFrame(summary)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--tasks", nargs="+", default=["sst2", "cola"])
    parser.add_argument("--fractions", nargs="+", default=["1", "0"])
    parser.add_argument("--seeds", nargs="+", default=None, help="default: the profile's")
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--data-dir", default=os.environ.get("PAPA_DATA_DIR") or None)
    parser.add_argument("--committed", type=Path, default=None, help="a stored results.csv to compare as well")
    parser.add_argument("--out", type=Path, default=None, help="default: artifacts/cross_cpu/<profile>")
    args = parser.parse_args(argv)
    if "native" not in args.settings:
        parser.error("the comparison is with the machine's own kernels: keep 'native' among --settings")
    args.out = args.out or REPO / "artifacts" / "cross_cpu" / args.profile
    start = time.perf_counter()
    runs = {setting: run_setting(setting, args) for setting in args.settings}
    if args.committed:
        stored = pd.read_csv(args.committed)
        runs["committed"] = stored[stored.run_id.isin(runs["native"].run_id)]
    paired, summary = compare(runs)
    given = argv if argv is not None else sys.argv[1:]
    record = dict(command="python artifacts/cross_cpu/cross_cpu.py " + " ".join(given),
                  cpu=_cpu(), settings={s: SETTINGS.get(s, "stored rows") for s in runs},
                  date=time.strftime("%Y-%m-%d"), seconds=round(time.perf_counter() - start))
    for name, write in (("paired.csv", lambda p: paired.to_csv(p, index=False)),
                        ("summary.csv", lambda p: summary.to_csv(p, index=False)),
                        ("record.json", lambda p: p.write_text(json.dumps(record, indent=2) + "\n"))):
        with atomic_path(args.out / name) as tmp:
            write(tmp)
    pd.set_option("display.width", 160)
    print(f"\n{record['cpu']}; {len(paired)} paired runs; differences from the machine's own kernels:")
    print(summary.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
