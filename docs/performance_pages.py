"""The measured blocks of docs/performance.md and docs/scaling.md, read off the committed records: the studies'
beside their scripts (artifacts/timings/, cpu_recheck/, run_options/) and the newest folder of `make gpu-check`
(artifacts/gpu/<date>-<device>/: its record, speed tables and estimate)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
GPU_ROOT = REPO / "artifacts" / "gpu"
#: The record format these blocks read (benchmarks/gpu_check.py writes it).
FORMAT = 2
#: Studies recorded as benchmarks, now scripts beside their records: the same program with the same options.
MOVED = {"feature_store": "artifacts/timings/feature_store.py", "recheck_committed": "artifacts/cpu_recheck/recheck.py",
         "run_options": "artifacts/run_options/run_options.py", "cross_cpu": "artifacts/cross_cpu/cross_cpu.py"}


def typed(command: str) -> str:
    """A recorded command as it is typed today: a benchmark recorded as a script (`python benchmarks/x.py`) or a
    module (`python -m benchmarks.x`) that is now a study's script beside its records, by that script's path."""
    command = re.sub(r"\bbenchmarks/(\w+)\.py\b", r"-m benchmarks.\1", command)
    return re.sub(r"-m benchmarks\.(\w+)\b", lambda m: MOVED.get(m[1], m[0]), command)


def feature_store_block(path: Path = REPO / "artifacts" / "timings" / "feature_store_cpu.json") -> str:
    """The point's wall times against its floor, from artifacts/timings/feature_store.py's record."""
    r = json.loads(path.read_text(encoding="utf-8"))
    m = r["machine"]
    lines = [f"`{typed(r['command'])}` ({m['cpus']} cores, torch {m['torch']}; MiniLM, SST-2, {r['train_examples']:,} "
             f"training and {r['eval_examples']:,} evaluation examples, {r['seeds']} seeds × {r['epochs']} epochs; "
             f"padded training features {r['padded_gib']:.2f} GiB, `PAPA_FEATURE_CACHE_GB={r['budget_gib']:.2f}`; "
             f"the store went to: {r['placement']}):", "", "| | seconds |", "|---|---|"]
    order = ("floor:", "floor", "stored", "backbone")  # the floor's parts, the floor, the runner, the path before
    rows = sorted(r["seconds"].items(), key=lambda item: next(i for i, p in enumerate(order) if item[0].startswith(p)))
    lines += [f"| {name} | {seconds:,.1f} |" for name, seconds in rows]
    lines += ["", f"The stored point takes **{r['stored_over_floor']:.2f}× its floor** (target ≤ 1.3); the path "
              f"before took **{r['backbone_over_stored']:.1f}×** the stored point's time ({r['backbone_path']})."]
    return "\n".join(lines)


def recheck_block(folder: Path = REPO / "artifacts" / "cpu_recheck") -> str:
    """Committed cpu-profile runs against the same runs made by today's runner (artifacts/cpu_recheck/recheck.py)."""
    record = json.loads((folder / "recheck.json").read_text(encoding="utf-8"))
    compared = (typed(record["command"]).split(" --made-by ")[0] + " --made-by … --out "
                + folder.relative_to(REPO).as_posix())
    lines = [f"The recomputed runs were made by: {typed(record['made_by'])}; compared by `{compared}`.", "",
             "| task | constants | fraction | pairs (run ids) | equal | largest difference |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['task']} | {r['constants']} | {r['fraction_label']} | {r['pairs']} | {r['equal']} | "
              f"{r['largest']:.4f} |" for r in record["summary"]]
    return "\n".join(lines)


def run_options_block(folder: Path = REPO / "artifacts" / "run_options" / "cpu") -> str:
    """Each run option − float32 eager, paired by seed, from artifacts/run_options/run_options.py's table and record."""
    record = json.loads((folder / "run_options.json").read_text(encoding="utf-8"))
    table = pd.read_csv(folder / "comparison.csv")
    machine = record["machine"]
    lines = [f"`{typed(record['command'])}` ({machine['cpus']} cores, torch {machine['torch']}; each "
             "setting's wall time is in its run_options.json):", "",
             "| setting − float32 eager | task | fraction | difference | 95% interval | detectable | seeds |",
             "|---|---|---|---|---|---|---|"]
    for _, row in table.iterrows():
        lines.append(f"| {row['setting']} | {row['task']} | {row['fraction_label']} | {row['difference']:+.4f} | "
                     f"[{row['low']:+.4f}, {row['high']:+.4f}] | {row['detectable']:.4f} | {row['seeds']} |")
    return "\n".join(lines)


NO_GPU_RUN = ("No run of `make gpu-check` is committed yet. On a CUDA machine, `make gpu-stage` here and "
              "`make gpu-check` there write `artifacts/gpu/<date>-<device>/`; commit it and run "
              "`python docs/gen_measurements.py` to fill this block.")
#: The speed table's targets: (goal, what the bench row starts with), each in float32 and bf16, eager.
SPEED_GOALS = (("capture ≥ 0.85× the plain forward", "capture (papa)"),
               ("attention-free ≥ 95% of its MAC ceiling", "attention-free"))
#: The targets of the bench at the grid's shapes (bench_grid.json): (goal, the variant its saturating rows name).
SATURATING_GOALS = (("capture ≥ 0.85× the plain forward at a saturating batch", "capture (papa)"),
                    ("1/2 heads ≥ 1.0× the plain forward at a saturating batch", "1/2 input-dependent"))
#: The training steps' target: (goal, the step kinds it reads, least speed-up over eager), read off each steps file
#: (steps_bf16.json: graphed; steps_bf16_compiled.json: compiled), at Table 3's batches.
STEP_GOAL = ("λ and trained-constant steps ≥ 5× faster than eager bf16 steps", ("lambda", "trainable"), 5.0)


def latest(root: Path = GPU_ROOT) -> Path | None:
    """The newest folder a full (not smoke) check wrote under `root`: by the date its name starts with (on one date,
    the last name in order)."""
    return next((p.parent for p in sorted(root.glob("*/check.json"), key=lambda p: p.parent.name, reverse=True)
                 if not json.loads(p.read_text(encoding="utf-8")).get("smoke")), None)


def read_record(folder: Path) -> dict:
    """`folder`'s check.json, refused (saying what to do) unless of `FORMAT`: each call's code and machine, each
    step's call."""
    path = folder / "check.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    if record.get("format") != FORMAT:
        raise ValueError(f"{path}: a GPU check record that is of format {record.get('format')!r}; the docs read "
                         f"format {FORMAT}, whose record names each call's code and machine and each step's call: "
                         "make the check again into a new folder (make gpu-check).")
    return record


def _rows(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["rows"] if path.is_file() else []


def _versions(machine: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in machine["versions"].items() if v)


def _code(source: dict) -> str:
    dirty = " with uncommitted changes" if source["dirty"] else ""
    return f"{source['commit'][:10]}{dirty}" if source.get("commit") else "?"


def header(folder: Path) -> str:
    """The folder, its machine, and its steps by the call that ran them, with each call's code (and software where
    it differs from the folder's)."""
    record = read_record(folder)
    m, steps = record["machine"], record["steps"]
    shown = {"ok": "{name} {seconds:.0f} s", "skipped": "{name} skipped", "failed": "{name} failed ({why})",
             "interrupted": "{name} interrupted after {seconds:.0f} s ({why})"}
    ran = []
    for i, c in enumerate(record["calls"]):
        if mine := [s for s in steps if s["call"] == i]:
            other = f"; {_versions(c['machine'])}" if _versions(c["machine"]) != _versions(m) else ""
            when = c["started"][:16].replace("T", " ")
            ran.append(f"call {i + 1} ({when} UTC, code at {_code(c['source'])}{other}): "
                       + ", ".join(shown[s["status"]].format(**s) for s in mine))
    where = folder.relative_to(REPO).as_posix() if folder.is_relative_to(REPO) else folder.name
    return (f"`{where}`: {m['device']}{', driver ' + m['driver'] if m.get('driver') else ''}, CUDA "
            f"{m['cuda'] or 'none'}; {_versions(m)}; Steps, by the call that ran them: " + "; ".join(ran) + ".")


def goals(folder: Path, hours: bool = True) -> list[dict]:
    """Every goal as `folder` reads them, {goal, value, met} (met None where a step did not run): the hours the
    estimate step read off its estimate (with `hours`), the speed table's, the saturating batch's, the steps'."""
    estimate = folder / "estimate.json"
    found = json.loads(estimate.read_text(encoding="utf-8")).get("goals", []) if hours and estimate.is_file() else []
    for dtype in ("fp32", "bf16"):
        rows = _rows(folder / f"bench_{dtype}.json")
        for goal, what in SPEED_GOALS:
            read = [r for r in rows if r["what"].startswith(what) and r["met"] is not None]
            value = ", ".join(f"{r['model'].removesuffix(' (random)')} n = {r['n']}: {r['ratio']:.2f}×" for r in read)
            found.append({"goal": f"{goal}, {'float32' if dtype == 'fp32' else dtype}", "value": value or "not run",
                          "met": all(r["met"] for r in read) if read else None})
    rows = _rows(folder / "bench_grid.json")
    for goal, what in SATURATING_GOALS:
        read = [r for r in rows if "saturating" in r["what"] and what in r["what"] and r["met"] is not None]
        value = ", ".join(f"{r['model'].removesuffix(' (random)')}: {r['ratio']:.2f}×" for r in read)
        found.append({"goal": goal, "value": value or "not run", "met": all(r["met"] for r in read) if read else None})
    goal, kinds, least = STEP_GOAL
    for name, mode in (("steps_bf16", "graphed"), ("steps_bf16_compiled", "compiled")):
        read = [r for r in _rows(folder / f"{name}.json")
                if r["kind"] in kinds and r["mode"] == mode and r["speedup_vs_eager"] is not None]
        value = ", ".join(f"{r['model']} {r['task']} {r['kind']}: {r['speedup_vs_eager']:.2f}×" for r in read)
        found.append({"goal": f"{goal}, {mode}", "value": value or "not run",
                      "met": all(r["speedup_vs_eager"] >= least for r in read) if read else None})
    return found


def gpu_table_block(folder: Path | None = None) -> str:
    """The speed table of the newest GPU check (`folder`), each ratio from its bench file's one timing call, bold
    where the row's target is not met, and the speed goals."""
    folder = folder or latest()
    if folder is None:
        return NO_GPU_RUN
    cells: dict[tuple, dict[str, str]] = {}
    for dtype in ("fp32", "bf16"):
        for compiled in (False, True):
            for r in _rows(folder / f"bench_{dtype}{'_compiled' if compiled else ''}.json"):
                if r["ratio"] is None or ("compiled" in r["what"]) != compiled or not (r["target"] or compiled):
                    continue
                text = f"{r['ratio']:.2f}× {r['ratio_of']}"
                cells.setdefault((r["model"].removesuffix(" (random)"), r["n"], r["what"], r["target"] or "–"), {})[
                    dtype] = f"**{text}**" if r["met"] is False else text
    lines = [header(folder), "", "| model | n | what | target | float32 | bf16 |", "|---|---|---|---|---|---|"]
    lines += [f"| {m} | {n} | {what} | {target} | {c.get('fp32', '–')} | {c.get('bf16', '–')} |"
              for (m, n, what, target), c in cells.items()]
    verdict = {True: "met", False: "**not met**", None: "not read"}
    lines += ["", "| goal | reading | verdict |", "|---|---|---|"]  # the estimate's goals are in its own block
    lines += [f"| {g['goal']} | {g['value']} | {verdict[g['met']]} |" for g in goals(folder, hours=False)]
    return "\n".join(lines)


def gpu_estimate_block(folder: Path | None = None) -> str:
    """The full grid's estimate from the newest GPU check's cost, as its estimate step wrote it (estimate.md: the
    tables `python -m benchmarks.cost` prints, the goals now and predicted among them)."""
    folder = folder or latest()
    if folder is None:
        return NO_GPU_RUN
    ran = any(s["name"].startswith("estimate") and s["status"] == "ok" for s in read_record(folder)["steps"])
    printed = ("`estimate.md`, the tables `python -m benchmarks.cost` printed from the folder's cost files:\n\n"
               + (folder / "estimate.md").read_text(encoding="utf-8").strip()
               if ran and (folder / "estimate.md").is_file() else "The estimate step did not run.")
    return "\n".join([header(folder), "", printed])
