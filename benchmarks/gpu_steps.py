"""The GPU check's steps (benchmarks/gpu_check.py), in order of priority, and the limits of one call to a GPU machine.

The check is made for a time-limited GPU allocation (a preemptible instance, a short queue slot): one call runs at
most 7 minutes under a hard timeout (`CALL_LIMIT_S`), a parameter of the allocation. The check is therefore cut
into calls: each runs the steps its folder still lacks, in `STEPS` order, as many as `CALL_BUDGET_S` holds by their
measured times (the committed folders' check.json) or else their `usual_s`, and the next call (`--fill`) goes on
where it stopped. The first steps measure the newest code paths (the CUDA tests of the compiled and graphed steps,
the steps' speed, the stores' fetch at the grid's shapes, the bench at the grid's shapes and a saturating batch); the
older rows follow.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import threading
import sys
from dataclasses import dataclass
from pathlib import Path

#: The hard limit of one call (the device tool's 7 minutes), and the share of it the steps may plan for: the rest is
#: the wheels' install, the imports, describing the machine and packing the folder, with a margin for a step that
#: runs over its usual time.
CALL_LIMIT_S = 420
CALL_BUDGET_S = 330
#: Seconds between the hard limit's SIGTERM and its SIGKILL: the check's own handler writes and packs in that time.
KILL_AFTER_S = 15


@dataclass(frozen=True)
class Step:
    """One benchmark call: `script`'s main (a module of benchmarks/, or a dotted module path) with `args`
    (placeholders {hub}, {data}, {out}), then `gpu` on a CUDA machine or `smoke` on the CPU; `usual_s` is its time
    on one H100: rounded up from the check.json of artifacts/gpu/2026-11-28-nvidia-h100-80gb-hbm3 where the step
    finished there, a guess where it did not (named in `GUESSED`), by which `run` plans a step that no committed
    folder has measured."""

    name: str
    script: str
    args: tuple[str, ...]
    gpu: tuple[str, ...]
    smoke: tuple[str, ...]
    usual_s: float


#: Steps whose `usual_s` no GPU has measured yet (the next folder's check.json replaces the guess).
GUESSED = ("cuda_tests", "steps_bf16", "store_grid", "bench_grid", "bench_bf16_compiled", "bench_fp32_compiled",
           "steps_bf16_compiled", "cost_b_fp32")

#: The test files whose CUDA cases (compiled and graphed steps, compiled attached models) only a GPU runs.
CUDA_TESTS = ("tests/unit/method/test_compile.py", "tests/unit/probing/test_step_modes.py")
#: Seconds one CUDA test may run (pytest-timeout, pinned in constraints.txt, where installed) and one test file (its
#: own process, killed past it): a hung kernel or compilation costs its test or its file, not the call.
TEST_TIMEOUT_S = 60
TEST_FILE_TIMEOUT_S = 150
#: The environment variable naming the file `pytest_runtest_logreport` appends each finished test's result to.
TEST_RESULTS_ENV = "GPU_CHECK_TEST_RESULTS"

_MINILM_DATA = ("--minilm", "{hub}/minilm", "--data-dir", "{data}")
_BENCH_GPU = ("--device", "cuda", "--batch", "64", "16")
_BENCH_SMOKE = ("--device", "cpu", "--tiny", "--lengths", "16", "--batch", "2", "--repeats", "1")
_COMPILED_SMOKE = (*_BENCH_SMOKE, "--models", "minilm", "--compile", "eager")
_COST = ("--hub", "{hub}", "--data-dir", "{data}")
# The smoke's cost runs in float32 whatever the step's precision (the last --precision wins): bf16 autocast on a CPU
# without bf16 units tripled its time (the MLM probe's backward), and bench_bf16 already runs papa's paths under it.
_COST_SMOKE = ("--device", "cpu", "--tiny", "--steps", "1", "--repeats", "1", "--sample", "16", "--forward-batch", "2",
               "--forward-batches", "1", "--precision", "float32")

#: In order of priority: the CUDA tests, the eager and graphed steps, the stores and the bench at the grid's shapes,
#: then the eager table, the cost in bf16 (the goals' precision) and its estimate, then the compiled
#: tables and steps and the float32 cost.
STEPS = (
    Step("cuda_tests", "pytest", ("--junit", "{out}/cuda_tests.xml", *CUDA_TESTS),
         ("--test-device", "cuda"), ("--test-device", "cpu", "--collect-only"), 100),
    Step("steps_bf16", "steps", ("--hub", "{hub}", "--precision", "bf16", "--json", "{out}/steps_bf16.json"),
         ("--device", "cuda", "--modes", "eager", "graphed"), ("--device", "cpu", "--smoke", "--modes", "eager"), 80),
    Step("store_grid", "feature_store", ("--json", "{out}/store_grid.json"),
         ("--paths", "--shapes", "grid"), ("--smoke",), 50),
    Step("bench_grid", "bench", (*_MINILM_DATA, "--hub", "{hub}", "--headline", "--dtype", "bf16",
                                 "--json", "{out}/bench_grid.json"),
         ("--device", "cuda", "--repeats", "3"),
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
    Step("estimate_bf16", "estimate", ("{out}/full_cost_b_bf16.json", "{out}/full_cost_a_bf16.json"), (), (), 5),
    Step("bench_bf16_compiled", "bench", (*_MINILM_DATA, "--dtype", "bf16", "--grid-size", "0", "--json",
                                          "{out}/bench_bf16_compiled.json"),
         (*_BENCH_GPU, "--repeats", "3", "--compile"), _COMPILED_SMOKE, 150),
    Step("bench_fp32_compiled", "bench", (*_MINILM_DATA, "--grid-size", "0", "--json",
                                          "{out}/bench_fp32_compiled.json"),
         (*_BENCH_GPU, "--repeats", "3", "--compile"), _COMPILED_SMOKE, 150),
    Step("steps_bf16_compiled", "steps", ("--hub", "{hub}", "--precision", "bf16", "--tasks", "sst2", "ner",
                                          "--json", "{out}/steps_bf16_compiled.json"),
         ("--device", "cuda", "--modes", "eager", "compiled"),
         ("--device", "cpu", "--smoke", "--modes", "eager", "compiled", "--kinds", "lambda", "--tasks", "sst2"), 240),
    Step("cost_b_fp32", "full_cost", (*_COST, "--parts", "B", "--json", "{out}/full_cost_b_fp32.json"),
         ("--device", "cuda"), _COST_SMOKE, 300),
)
STEP_NAMES = tuple(s.name for s in STEPS)


class PytestStep:
    """The `pytest` step's main: each CUDA test file in a child process of its own, killed past
    `TEST_FILE_TIMEOUT_S` (nbval's options left out: the GPU image has no nbval), with ``PAPA_TEST_DEVICE`` set, a
    per-test `TEST_TIMEOUT_S` where pytest-timeout is installed, its output printed into the step's log, a JUnit report
    per file (`<junit stem>.<file stem>.xml`) and every test's result appended as it finishes to `<junit stem>.jsonl`
    (this module is the children's plugin), so that a stopped call keeps what ran. The child is remembered so that the
    call's hard limit can stop it (`stop`)."""

    child: subprocess.Popen | None = None

    def __call__(self, argv: list[str]) -> int:
        device, junit, collect, files = _pytest_args(argv)
        results = Path(junit).with_suffix(".jsonl")
        results.unlink(missing_ok=True)
        env = {**os.environ, "PAPA_TEST_DEVICE": device, TEST_RESULTS_ENV: str(results),
               "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        per_test = [f"--timeout={TEST_TIMEOUT_S}"] if importlib.util.find_spec("pytest_timeout") else []
        if not per_test:
            print(f"pytest-timeout is not installed here: each test file is limited to {TEST_FILE_TIMEOUT_S} s, "
                  "not each test", flush=True)
        worst = 0
        for file in files:
            xml = Path(junit).with_suffix(f".{Path(file).stem}.xml")
            command = [sys.executable, "-m", "pytest", "-o", "addopts=", "-p", "no:cacheprovider", "-p", __name__,
                       *per_test, "-q", "-rs", f"--junitxml={xml}", *(["--collect-only"] if collect else []), file]
            print("$ PAPA_TEST_DEVICE=" + device + " " + " ".join(command[1:]), flush=True)
            code = self._run(command, env)
            if code is None:
                code = 124  # `timeout`'s status for a command it stopped
                _append_result(results, {"test": file, "when": "file", "outcome": "timeout",
                                         "seconds": TEST_FILE_TIMEOUT_S})
                print(f"{file}: stopped after {TEST_FILE_TIMEOUT_S} s", flush=True)
            worst = worst or code
        return worst

    def _run(self, command: list[str], env: dict) -> int | None:
        """The child's exit status, or None when `TEST_FILE_TIMEOUT_S` stopped it."""
        self.child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        timer = threading.Timer(TEST_FILE_TIMEOUT_S, self.stop)
        timer.start()
        try:
            for line in self.child.stdout:
                print(line, end="", flush=True)
            code = self.child.wait()
        finally:
            stopped = not timer.is_alive()
            timer.cancel()
            self.child = None
        return None if stopped and code < 0 else code

    def stop(self) -> None:
        """Stop the child process, if one runs."""
        if self.child is not None and self.child.poll() is None:
            self.child.kill()


def _append_result(path: Path, result: dict) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(result) + "\n")


def pytest_runtest_logreport(report) -> None:
    """pytest's hook, in the CUDA tests' children: each test's result appended as it finishes (its call, or the
    setup or teardown that did not pass)."""
    path = os.environ.get(TEST_RESULTS_ENV)
    if path and (report.when == "call" or report.outcome != "passed"):
        _append_result(Path(path), {"test": report.nodeid, "when": report.when, "outcome": report.outcome,
                                    "seconds": round(report.duration, 2)})


def _pytest_args(argv: list[str]) -> tuple[str, str, bool, list[str]]:
    """(test device, JUnit path, collect only, test files) of the pytest step's arguments, checked."""
    import argparse

    parser = argparse.ArgumentParser(prog="gpu_check pytest step")
    parser.add_argument("--test-device", choices=("cpu", "cuda"), required=True)
    parser.add_argument("--junit", type=Path, required=True)
    parser.add_argument("--collect-only", action="store_true")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args(argv)
    missing = [f for f in args.files if not Path(f).is_file()]
    if missing:
        raise FileNotFoundError(f"test files not in this checkout: {', '.join(missing)}")
    return args.test_device, str(args.junit), args.collect_only, args.files


PYTEST = PytestStep()
