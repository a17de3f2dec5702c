"""Where a run of the test suite spends its time, recorded from pytest's JUnit report and drawn as the table of
docs/tests.md (`block`, filled by ``python docs/gen_measurements.py``).

    pytest ... --junitxml=report.xml          # then
    python -m docs.test_durations REPORT.xml --name after --commit abc1234 --command "make test" \
        --conditions "fresh clone, 2 cores, idle" [--wall-s 1234] [--coverage coverage.json]

writes ``artifacts/timings/test_suite/<name>.json``: the counts, pytest's wall time (the report's own, or
``--wall-s``), each test's seconds (setup, call and teardown: JUnit's ``time``), the conditions as given, and with
``--coverage`` the line coverage of ``papa/`` from coverage.py's JSON report of that run (``coverage json
--include '<clone>/papa/*'``).
"""
from __future__ import annotations

import argparse
import json
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FOLDER = REPO / "artifacts" / "timings" / "test_suite"
#: Where a test lives, in the order the table lists them.
GROUPS = ("notebooks", "tests/acceptance", "tests/integration", "tests/unit")
#: The goal a single test is held to.
LONG_S = 60.0


def read_report(path: str | Path) -> dict:
    """The counts and each test's seconds of a JUnit report written by pytest."""
    root = ET.parse(path).getroot()
    suite = root.find("testsuite") if root.tag == "testsuites" else root
    tests = {}
    for case in suite.iter("testcase"):
        module = case.get("classname", "")  # tests.unit.test_x or notebooks.01_method.ipynb
        notebook = module.endswith(".ipynb")
        file = module.removesuffix(".ipynb").replace(".", "/") + (".ipynb" if notebook else ".py")
        tests[f"{file}::{case.get('name')}"] = round(float(case.get("time", 0.0)), 2)
    counts = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    return {**counts, "wall_s": round(float(suite.get("time", 0.0)), 1), "tests_s": tests}


def group(test: str) -> str:
    return next((g for g in GROUPS if test.startswith(g + "/")), "other")


def summary(record: dict) -> dict:
    """Seconds per group, the sum, the tests over `LONG_S` and the slowest test of a record."""
    tests = record["tests_s"]
    by_group = {g: round(sum(s for t, s in tests.items() if group(t) == g), 1) for g in GROUPS}
    slowest = max(tests.items(), key=lambda item: item[1])
    return {"by_group": by_group, "sum_s": round(sum(tests.values()), 1),
            "long": sorted(t for t, s in tests.items() if s > LONG_S), "slowest": slowest}


#: The recorded runs the table sets side by side: the start under coverage.py, the same under coverage.py now, and
#: now as CI runs it.
RUNS = ("before", "after-coverage", "after")


def block(names: tuple[str, ...] = RUNS, folder: Path = FOLDER) -> str:
    """The table of docs/tests.md: each recorded run side by side, then each run's ten slowest tests."""
    records = [json.loads((folder / f"{name}.json").read_text(encoding="utf-8")) for name in names]
    sums = [summary(r) for r in records]
    head = "| | " + " | ".join(f"{r['name']} (`{r['commit']}`)" for r in records) + " |"
    rows = [head, "|---" * (len(records) + 1) + "|",
            "| command | " + " | ".join(f"`{r['command']}`" for r in records) + " |",
            "| conditions | " + " | ".join(r["conditions"] for r in records) + " |",
            "| pytest's wall time | " + " | ".join(f"{r['wall_s']:.0f} s ({r['wall_s'] / 60:.1f} min)"
                                                   for r in records) + " |",
            "| tests: passed, skipped, failed | " + " | ".join(
                f"{r['tests'] - r['skipped'] - r['failures'] - r['errors']}, {r['skipped']}, "
                f"{r['failures'] + r['errors']}" for r in records) + " |",
            "| the tests' own seconds, summed | " + " | ".join(f"{s['sum_s']:.0f} s" for s in sums) + " |"]
    for g in GROUPS:
        rows.append(f"| … of which `{g}/` | " + " | ".join(f"{s['by_group'][g]:.0f} s" for s in sums) + " |")
    rows.append(f"| tests over {LONG_S:.0f} s | " + " | ".join(str(len(s["long"])) for s in sums) + " |")
    rows.append("| line coverage of `papa/` | " + " | ".join(
        f"{r['coverage']['percent']:.2f}% ({r['coverage']['covered']} of {r['coverage']['statements']} lines)"
        if r.get("coverage") else "not measured" for r in records) + " |")
    rows.append("| the slowest | " + " | ".join(f"`{s['slowest'][0]}` {s['slowest'][1]:.0f} s" for s in sums) + " |")
    out = ["\n".join(rows)]
    for record in records:
        slow = sorted(record["tests_s"].items(), key=lambda item: -item[1])[:10]
        out.append(f"The ten slowest tests of {record['name']}:\n\n| seconds | test |\n|---:|---|\n"
                   + "\n".join(f"| {s:.1f} | `{t}` |" for t, s in slow))
    return "\n\n".join(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--name", required=True)
    parser.add_argument("--commit", required=True)
    parser.add_argument("--command", required=True)
    parser.add_argument("--conditions", required=True)
    parser.add_argument("--wall-s", type=float, default=None, help="pytest's wall time, if not the report's own")
    parser.add_argument("--coverage", type=Path, default=None, help="coverage.py's JSON report of the same run")
    args = parser.parse_args(argv)
    record = {"name": args.name, "commit": args.commit, "command": args.command, "conditions": args.conditions,
              **read_report(args.report)}
    if args.wall_s is not None:
        record["wall_s"] = args.wall_s
    if args.coverage is not None:
        totals = json.loads(args.coverage.read_text(encoding="utf-8"))["totals"]
        record["coverage"] = {"statements": totals["num_statements"], "covered": totals["covered_lines"],
                              "percent": round(totals["percent_covered"], 2)}
    FOLDER.mkdir(parents=True, exist_ok=True)
    out = FOLDER / f"{args.name}.json"
    out.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{len(record['tests_s'])} tests, {record['wall_s']} s -> {out.relative_to(REPO)}")


if __name__ == "__main__":
    main()
