"""What a notebook's kernel and the CLI pay in imports before any work, beside ``import torch, transformers``.

    python artifacts/timings/import_time.py [--repeats 5]

Each import runs in a fresh interpreter, the cases interleaved so that a machine's drift spreads over all of them;
the table gives each case's median and minimum wall time and its median's ratio to the reference (the goal: a section
module within 1.5x of it; docs/tests.md quotes the numbers). ``tests/unit/test_imports.py`` guards which packages
load, not seconds.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

REFERENCE = "import torch, transformers"
CASES = (
    REFERENCE,
    "from papa.sections import main_results",
    "from papa.sections import (alternative_matrices, constant_patterns, data_dependence, decoders, head_selection, "
    "main_results, method, mlm_electra)",
    "import papa.cli",
)


def seconds(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    times: dict[str, list[float]] = {case: [] for case in CASES}
    seconds("import torch")  # the first start reads the files from disk; every case after finds them cached
    for _ in range(args.repeats):
        for case in CASES:
            times[case].append(seconds(case))
    reference = statistics.median(times[REFERENCE])
    print(f"{'import':<60} {'median s':>9} {'min s':>7} {'x ref':>6}")
    for case, runs in times.items():
        median = statistics.median(runs)
        print(f"{case.replace(chr(10), '; ')[:60]:<60} {median:9.2f} {min(runs):7.2f} {median / reference:6.2f}")


if __name__ == "__main__":
    main()
