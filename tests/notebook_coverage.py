"""Which functions of `papa` a batch run of the notebooks executes: to show that a smaller profile still runs every
code path a larger one (or an earlier version) ran.

    python -m tests.notebook_coverage --out after.json [--profile quick] [--notebooks 08_decoders ...]
    python -m tests.notebook_coverage --compare before.json after.json

The first form runs ``python -m papa.cli reproduce`` (this interpreter's papa, from the current directory's clone)
into a temporary output folder under coverage.py, the notebooks' kernels included (``[run] patch = subprocess``),
and records every function and method of ``papa/`` with at least one line run (qualified names read off the source
with `ast`, so a later comparison needs no source). The second prints the functions one record ran and the other did
not; it exits 1 when the second ran fewer. Its records are artifacts/timings/quick/coverage*.json (docs/tests.md).
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _functions(path: Path) -> list[tuple[str, int, int]]:
    """(qualified name, first line, last line) of every function and method in a source file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []

    def visit(node, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                    found.append((name, first, child.end_lineno))
                visit(child, f"{name}.")

    visit(tree, "")
    return found


def functions_run(executed: dict[str, list[int]], root: Path) -> dict[str, int]:
    """``module:qualname`` -> lines run in its body (nested functions count for themselves only), for every function
    of ``root/papa`` with at least one line run beyond its ``def`` line."""
    out = {}
    for file, lines in executed.items():
        path = Path(file).resolve()
        if not path.is_relative_to(root / "papa"):
            continue
        module = ".".join(path.relative_to(root).with_suffix("").parts)
        ran = set(lines)
        spans = _functions(path)
        for name, first, last in spans:
            inner = {n for other, a, b in spans if other.startswith(f"{name}.") for n in range(a, b + 1)}
            body = {n for n in ran if first < n <= last and n not in inner}
            if body:
                out[f"{module}:{name}"] = len(body)
    return dict(sorted(out.items()))


def measure(profile: str, notebooks: list[str], root: Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        rc = tmp / ".coveragerc"
        rc.write_text(f"[run]\nparallel = true\npatch = subprocess\ndata_file = {tmp / '.coverage'}\n"
                      f"source = {root / 'papa'}\n", encoding="utf-8")
        command = [sys.executable, "-m", "coverage", "run", f"--rcfile={rc}", "-m", "papa.cli", "reproduce",
                   "--profile", profile, "--out", str(tmp / "out"), "--quiet"]
        if notebooks:
            command += ["--notebooks", *notebooks]
        start = time.perf_counter()
        subprocess.run(command, cwd=root, check=True, env={**os.environ, "COVERAGE_RCFILE": str(rc)})
        seconds = time.perf_counter() - start
        subprocess.run([sys.executable, "-m", "coverage", "combine", f"--rcfile={rc}", "-q"], cwd=tmp, check=True)
        import coverage

        data = coverage.CoverageData(basename=str(tmp / ".coverage"))
        data.read()
        executed = {f: sorted(data.lines(f) or []) for f in data.measured_files()}
    return {"profile": profile, "notebooks": notebooks or "all", "seconds_under_coverage": round(seconds, 1),
            "functions": functions_run(executed, root)}


def compare(before: dict, after: dict) -> int:
    lost = sorted(set(before["functions"]) - set(after["functions"]))
    gained = sorted(set(after["functions"]) - set(before["functions"]))
    print(f"functions run: {len(before['functions'])} before, {len(after['functions'])} after; "
          f"{len(lost)} no longer run, {len(gained)} newly run")
    for name in lost:
        print(f"  - {name}")
    for name in gained:
        print(f"  + {name}")
    return 1 if lost else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="where to write the record (JSON)")
    parser.add_argument("--profile", default="quick")
    parser.add_argument("--notebooks", nargs="*", default=[])
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args(argv)
    if args.compare:
        before, after = (json.loads(Path(p).read_text(encoding="utf-8")) for p in args.compare)
        return compare(before, after)
    if not args.out:
        parser.error("give --out FILE (or --compare BEFORE AFTER)")
    record = measure(args.profile, args.notebooks, Path.cwd().resolve())
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"{len(record['functions'])} functions of papa/ run in {record['seconds_under_coverage']} s -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
