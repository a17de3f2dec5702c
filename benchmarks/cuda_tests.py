"""The GPU check's CUDA tests (benchmarks/gpu_check.py, step ``cuda_tests``): the test files whose CUDA cases only a
GPU runs, one pytest process per file, each test's result kept as it finishes, so that a stopped call keeps what ran.

    python -m benchmarks.cuda_tests --test-device cuda --junit OUT/cuda_tests.xml FILE [FILE ...]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

#: Seconds one test (pytest-timeout, where installed) and one test file (its own process) may run, and where each
#: finished test's result is appended: a hung kernel or compilation costs its test or its file, not the call.
TEST_TIMEOUT_S, TEST_FILE_TIMEOUT_S, TEST_RESULTS_ENV = 60, 150, "GPU_CHECK_TEST_RESULTS"


def main(argv: list[str] | None = None) -> int:
    """Each CUDA test file in a pytest process of its own, killed past `TEST_FILE_TIMEOUT_S`, with
    ``PAPA_TEST_DEVICE`` set, a per-test `TEST_TIMEOUT_S` where pytest-timeout is installed, a JUnit report per file
    (`<junit stem>.<file stem>.xml`) and each test's result appended as it finishes to `<junit stem>.jsonl` (this
    module is the children's plugin), so that a stopped call keeps what ran."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--test-device", choices=("cpu", "cuda"), required=True)
    p.add_argument("--junit", type=Path, required=True)
    p.add_argument("--collect-only", action="store_true")
    p.add_argument("files", nargs="+")
    args = p.parse_args(argv)
    if missing := [f for f in args.files if not Path(f).is_file()]:
        raise FileNotFoundError(f"test files not in this checkout: {', '.join(missing)}")
    results = args.junit.with_suffix(".jsonl")
    results.unlink(missing_ok=True)
    # nbval's options left out (addopts): the GPU image has no nbval
    env = {**os.environ, "PAPA_TEST_DEVICE": args.test_device, TEST_RESULTS_ENV: str(results),
           "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    per_test = [f"--timeout={TEST_TIMEOUT_S}"] if importlib.util.find_spec("pytest_timeout") else []
    if not per_test:
        print(f"pytest-timeout is not installed here: each test file is limited to {TEST_FILE_TIMEOUT_S} s, not each "
              "test", flush=True)
    worst = 0
    for file in args.files:
        command = [sys.executable, "-m", "pytest", "-o", "addopts=", "-p", "no:cacheprovider", "-p", __name__,
                   *per_test, "-q", "-rs", f"--junitxml={args.junit.with_suffix(f'.{Path(file).stem}.xml')}",
                   *(["--collect-only"] if args.collect_only else []), file]
        print(f"$ PAPA_TEST_DEVICE={args.test_device} " + " ".join(command[1:]), flush=True)
        try:
            done = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  timeout=TEST_FILE_TIMEOUT_S)
            print(done.stdout, end="", flush=True)
            code = done.returncode
        except subprocess.TimeoutExpired as stopped:
            print(stopped.stdout.decode() if isinstance(stopped.stdout, bytes) else stopped.stdout or "", end="")
            code = 124  # `timeout`'s status for a command it stopped
            _append_result(results, {"test": file, "when": "file", "outcome": "timeout",
                                     "seconds": TEST_FILE_TIMEOUT_S})
            print(f"{file}: stopped after {TEST_FILE_TIMEOUT_S} s", flush=True)
        worst = worst or code
    return worst


def _append_result(path: Path, result: dict) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(result) + "\n")


def pytest_runtest_logreport(report) -> None:
    """pytest's hook, in the CUDA tests' processes: each test's result appended as it finishes (its call, or the
    setup or teardown that did not pass)."""
    if (path := os.environ.get(TEST_RESULTS_ENV)) and (report.when == "call" or report.outcome != "passed"):
        _append_result(Path(path), {"test": report.nodeid, "when": report.when, "outcome": report.outcome,
                                    "seconds": round(report.duration, 2)})


if __name__ == "__main__":
    sys.exit(main())
