"""The prediction's prices (`benchmarks/cost.py`): each step at what was measured at its own shape, each store path's
bandwidth, the disk's a stated input, the fallbacks named, and the runner's overhead part A measured
(docs/scaling.md)."""
from __future__ import annotations

import json
import statistics
from pathlib import Path

from benchmarks.suite import arithmetic_rates, feature_bytes, row_flops
from papa.core.vocabulary import BF16_SUFFIX
from papa.probing.feature_store import BYTES_PER_VALUE
from papa.probing.feature_store import choose_path as store_choose_path
from papa.runs.profiles import get_profile

#: The disk's read bandwidth (GB/s) where `--disk-gbps` gives none and no store-path measurement does (assumed), and
#: the bandwidths the prediction's total is also shown at.
DISK_GBPS, DISK_SENSITIVITY = 3.0, (1.0, 3.0, 10.0)
#: Seeds of a point of the full profile: they train together, so a chunk streamed from disk is read once for all.
SEEDS = len(get_profile("full").seeds)
#: The paths a split can take on an accelerator: float32 on the device or in pinned host memory, the same in
#: bfloat16 (``--precision bf16_with_store``: 2 bytes a value), or streamed from disk in chunks (``--batch-order
#: chunks``; a disk budget no split reaches: the node's disk holds any).
PATHS = ("device", "pinned_host", "device_bf16", "pinned_host_bf16", "disk_streamed", "disk_streamed_bf16")
BF16_BYTES, DISK_UNBOUNDED = 2, 2**60
#: The store part B measured a path's compute in: a chunk streamed from disk is read on the device.
MEASURED_AS = {"device": "device", "pinned_host": "host", "disk_streamed": "device"}
#: benchmarks/steps.py's kinds by part B's names; its modes, first found first (graphed and compiled: no launches).
STEPS_KINDS, MODES = {"lambda": "lambda_step", "trainable": "trainable_step", "stored": "stored_step"}, (
    "graphed", "compiled", "eager")
#: What the GPU check writes beside the cost files (benchmarks/steps.py, benchmarks/store_paths.py).
STEPS_FILE, STORE_FILE = "steps_bf16.json", "store_grid.json"
#: MNLI's lengths: without an MNLI TSV in the data folder, part B's MNLI rows are random ids at the real lengths of MRPC
#: rows. They set only the attention mask: every example is padded to the task's fixed length (Table 3), so no step's
#: work depends on them.
MNLI_LENGTHS = ("MRPC's where no MNLI TSV is in the data folder; they set only the attention mask, every example "
                "being padded to the task's fixed length (Table 3: 256), so no step's work depends on them")


def size_class(model: str) -> str:  # base models take roberta-base's rows, large ones roberta-large's
    return "roberta-large" if "large" in model else "roberta-base"


def choose_path(nbytes: float, device_budget: float, host_budget: float, bf16: bool = True) -> tuple[str, int]:
    """(path, bytes per value) of a split of `nbytes` in float32: the runner's rule, with the batch order ``chunks``
    and an unbounded disk, bfloat16 only where `bf16` allows it (on disk, bfloat16 first)."""
    budgets = {"device": int(device_budget), "host": int(host_budget), "disk": DISK_UNBOUNDED}
    path = store_choose_path(int(nbytes), budgets, allow_bf16=bf16, batch_order="chunks")
    return path, BF16_BYTES if path.endswith(BF16_SUFFIX) else BYTES_PER_VALUE


def read_measured(folder: Path, device: str) -> dict:
    """The steps and store-path measurements of `device` beside the cost files, where the folder has them."""
    out, steps, store = {}, folder / STEPS_FILE, folder / STORE_FILE
    if steps.is_file():
        record = json.loads(steps.read_text(encoding="utf-8"))
        rows = [r for r in record.get("rows", []) if r.get("device") == device and r.get("step_s")]
        if rows and not record.get("smoke"):
            out["steps"] = rows
    if store.is_file():
        record = json.loads(store.read_text(encoding="utf-8"))
        if (record.get("machine") or {}).get("cuda") == device and record.get("rows"):
            out["store"] = record
    return out


def launch_s(cost: dict) -> float:
    """The per-step launch overhead of an eager step: the median of part B's probe steps on device-stored features,
    whose arithmetic is negligible (0 where none was measured)."""
    times = [r["stored_step_s"]["device"] for r in cost["steps"] if "device" in r.get("stored_step_s", {})]
    return statistics.median(times) if times else 0.0


def step_points(rows: list[dict], launch: float) -> dict[tuple[str, str], list[tuple[float, float, float, str]]]:
    """(size class, part B's kind) -> sorted [(tokens per step, FLOP/s without launches, launch s, mode)] from a steps
    benchmark's rows, each shape in its first mode of `MODES` (an eager step's time less `launch`)."""
    best: dict[tuple, dict] = {}
    for r in rows:
        if r.get("kind") in STEPS_KINDS and r.get("mode") in MODES:
            key = (size_class(r["model"]), STEPS_KINDS[r["kind"]], r["task"], r["n"] * r["batch_size"])
            if key not in best or MODES.index(r["mode"]) < MODES.index(best[key]["mode"]):
                best[key] = r
    points: dict[tuple[str, str], list] = {}
    for (size, kind, _, tokens), r in best.items():
        fixed = launch if r["mode"] == "eager" else 0.0
        points.setdefault((size, kind), []).append(
            (tokens, r["flops_per_step"] / max(r["step_s"] - fixed, 1e-9), fixed, r["mode"]))
    return {k: sorted(v) for k, v in points.items()}


def interpolate(points: list[tuple[float, float, float, str]], tokens: float) -> tuple[float, float, str]:
    """(FLOP/s, launch s, mode) at `tokens` per step: linear between the two points that bracket it, else the
    nearest point's."""
    below, above = [p for p in points if p[0] <= tokens], [p for p in points if p[0] >= tokens]
    if not (below and above):
        return (below[-1] if below else above[0])[1:]
    (t0, r0, f0, m0), (t1, r1, f1, m1) = below[-1], above[0]
    w = 0.0 if t1 == t0 else (tokens - t0) / (t1 - t0)
    return r0 + w * (r1 - r0), f0 + w * (f1 - f0), m0 if w < 0.5 else m1


class Prices:
    """Each step of a part-B row as the prediction prices it: a steps benchmark's rate interpolated at the row's
    tokens per step, where the folder has one for its size class and kind; else part B's step at the row's own
    shape (eager, launches included); else the speed table's plain-step rate plus `launch` (a named fallback).
    ``sources``: kind -> {where its prices came from}."""

    def __init__(self, cost: dict, launch: float | None = None):
        self.launch = launch_s(cost) if launch is None else launch
        self.points = step_points(cost.get("measured", {}).get("steps", []), self.launch)
        self.rates = arithmetic_rates(cost.get("bench") or {})
        self.sources: dict[str, set[str]] = {}

    def _noted(self, kind: str, source: str, seconds: float) -> float:
        self.sources.setdefault(kind, set()).add(source)
        return seconds

    def step(self, row: dict, kind: str, flops: float, store: str = "device") -> float:
        """Seconds of one step of `kind` (part B's name, without ``_s``) of `row` (a probe step: read from `store`)."""
        points = self.points.get((size_class(row["model"]), kind))
        if points and (kind != "stored_step" or store == "device"):
            rate, fixed, mode = interpolate(points, row["n"] * row["batch_size"])
            return self._noted(kind, f"steps benchmark ({mode}) at its tokens per step", fixed + flops / rate)
        measured = row.get("stored_step_s", {}).get(store) if kind == "stored_step" else row.get(f"{kind}_s")
        if measured is not None:
            return self._noted(kind, "part B at the row's own shape (eager)", measured)
        if self.rates is None:
            raise ValueError(f"{row['model']} {row['task']}: no measured {kind} and no speed table to fall back on")
        return self._noted(kind, f"fallback: the speed table's plain step ({self.rates['step']:.1f} TFLOP/s) + "
                           f"{self.launch * 1e3:.1f} ms launch", self.launch + flops / (self.rates["step"] * 1e12))


def bandwidths(nominal: dict[str, float], disk_gbps: float | None, store: dict | None
               ) -> tuple[dict[str, float], dict[str, str]]:
    """(bytes/s, source) of each path's reads: a store-path benchmark's median (the bytes the probe reads, once per
    seed, a chunk once) where it timed the path, else `nominal` (the device's `Peaks`); the disk `disk_gbps` where
    given, else measured, else `DISK_GBPS`, at most the host link."""
    found: dict[str, list[float]] = {}
    for r in (store or {}).get("rows", []):
        base = next((b for b in MEASURED_AS if r["path"].startswith(b)), None)
        if base is not None and r.get("ms_per_step"):
            reads = 1 if "chunks" in r["path"] else (store.get("seeds") or 1)
            found.setdefault(base, []).append(r["kept_gib"] * 2**30 * reads / (r["steps"] * r["ms_per_step"] / 1e3))
    rate, out, why = {b: statistics.median(v) for b, v in found.items()}, {}, {}
    for base in MEASURED_AS:
        if base == "disk_streamed" and (disk_gbps is not None or base not in rate):
            gbps = DISK_GBPS if disk_gbps is None else disk_gbps
            out[base] = min(gbps * 1e9, nominal["pinned_host"])
            why[base] = f"{gbps:g} GB/s, {'assumed' if disk_gbps is None else 'given'}"
        elif base in rate:
            out[base], why[base] = rate[base], f"{rate[base] / 1e9:.1f} GB/s, the store-path benchmark"
        else:
            out[base], why[base] = nominal[base], f"{nominal[base] / 1e9:,.0f} GB/s, the device's nominal"
    return out, why


def predicted_row(row: dict, prices: Prices, bandwidth: dict[str, float], host_budget: float) -> dict:
    """`row` with its steps priced (`Prices`) and its stores keyed by path: a pass, a probe step or an evaluation
    takes part B's time in the store the path is computed in (bf16 paths: the float32 store's) or its bytes at the
    path's bandwidth, whichever is longer (a chunk streamed from disk read once for the point's seeds)."""
    f, batch = row_flops(row), row.get("batch_size") or 1
    out = dict(row, budget_bytes={"device": row["budget_bytes"].get("device", 0), "host": host_budget},
               fill_seq_per_s={}, stored_step_s={}, stored_eval_seq_per_s={})
    for path in PATHS:
        base = path.removesuffix(BF16_SUFFIX)
        store = MEASURED_AS[base] if MEASURED_AS[base] in row["stored_step_s"] else "host"
        per_example = feature_bytes(1, row, BF16_BYTES if path.endswith(BF16_SUFFIX) else BYTES_PER_VALUE) \
            / bandwidth[base]
        out["fill_seq_per_s"][path] = 1 / max(1 / row["fill_seq_per_s"][store], per_example)
        out["stored_step_s"][path] = max(prices.step(row, "stored_step", f["stored_step"], store),
                                         batch * per_example / (SEEDS if base == "disk_streamed" else 1))
        out["stored_eval_seq_per_s"][path] = 1 / max(1 / row["stored_eval_seq_per_s"][store], per_example)
    for store in ("fill_seq_per_s", "stored_step_s", "stored_eval_seq_per_s"):
        out[store]["host"] = out[store]["pinned_host"]  # what the backbone path and the blocks would read
    out.update({f"{k}_s": prices.step(row, k, f[k]) for k in ("rerun_step", "lambda_step", "trainable_step",
                                                              "plain_step")})
    return out


def runner_overhead(checks: list[tuple[str, float, float, str, str]]) -> dict[str, float]:
    """Part A's measured / predicted for each group of the estimate's parts it checks: the runner's own work (set-up,
    encoding, host copies, launches between timed calls) that part B does not time."""
    found: dict[str, list[float]] = {}
    for _, measured, predicted, _, group in checks:
        if predicted > 0:
            found.setdefault(group, []).append(measured / predicted)
    return {group: statistics.median(r) for group, r in found.items()}


def with_overhead(parts: dict[str, list[float]], overhead: dict[str, float]) -> float:
    """Seconds of the estimate's `parts`, each times its group's runner overhead (1 where part A checks none)."""
    return sum(v[0] * overhead.get(part.split(":")[0].split(",")[0], 1.0) for part, v in parts.items())
