"""The full grid's estimate with two changes to how it runs: a prediction from the committed rates, not a measurement.

The changes: (a) a store for every configuration, no configuration on the backbone path: each split's features go
where `grid_flops.choose_path` (the runner's rule) puts them on a node of 1 TiB and of 2 TiB of host memory (float32
on the device or in pinned host memory, copied ahead of the step; the same in bfloat16, ``--precision
bf16_with_store``; else on disk streamed in chunks, ``--batch-order chunks``, one read per epoch shared by the
point's seeds); (b) passes and training steps without launch overhead (graphed or compiled).

The model, every time from FLOPs (`grid_flops.row_flops`) and bytes:

* two arithmetic rates measured on the same device in the same precision, from its speed table (`bench.py --json`,
  eager): of the encoder shapes it timed, the one with the most FLOPs per call (the least launch-bound); R_pass the
  lower of its plain-forward timings, R_step its plain step (frozen weights, gradient through the activations);
* a backbone pass (forward, capture, fill) or an evaluation: max(FLOPs / R_pass, the bytes it writes or reads at
  its path's bandwidth); a λ, trained-constants or plain step: FLOPs / R_step; a probe step: max(FLOPs / R_step,
  its batch's bytes at its path's bandwidth);
* bandwidths: the device's memory and the host link (`peaks.py`, nominal), disk `DISK_GBPS` (assumed: one NVMe
  drive's sequential read, not measured), the point's seeds sharing each chunk read (`SEEDS`: each reads its own
  batches of it) where the host paths move each seed's batch;
* budgets: the device's as `full_cost.py` measured it, pinned host memory `HOST_SHARE` of the node's.

Launch overhead is taken as zero and small steps as running at a large shape's rate: optimistic for the probe's
steps (a small share of the grid), conservative where a graphed large step beats the eager bench's rate.
"""
from __future__ import annotations

from papa.core.vocabulary import BF16_SUFFIX
from papa.probing.feature_store import BYTES_PER_VALUE
from papa.runs.profiles import get_profile

from benchmarks.bench_flops import row_flops_per_seq, shape_of
from benchmarks.grid_flops import BF16_BYTES, PATHS, choose_path, feature_bytes, row_flops
from benchmarks.peaks import device_peaks

#: Host memory of the nodes the prediction is made for (bytes).
NODES = {"1 TiB": 2**40, "2 TiB": 2**41}
#: The share of a node's memory the pinned host store may take (the feature store's default host budget is 60% of
#: the memory available).
HOST_SHARE = 0.6
#: Disk bandwidth assumed for the streamed path (GB/s): not measured.
DISK_GBPS = 3.0
#: Seeds of a point of the full profile: they train together, so a chunk streamed from disk is read once for all.
SEEDS = len(get_profile("full").seeds)
#: The grid's goals: the whole grid's hours, its ratio to the FLOP floor at 40% of peak, BERT-base's hours.
GOALS = (("whole grid ≤ 25 GPU-hours", None, 25.0, None), ("whole grid ≤ 2× its FLOP floor at 40% of peak", None,
                                                            None, 2.0),
         ("BERT-base, every section, ≤ 1 GPU-hour", "bert-base-uncased", 1.0, None))


def node_key(node: str) -> str:
    """The key of a node's predicted seconds in a model's figures: ``predicted_1tib_s`` for "1 TiB"."""
    return f"predicted_{node.replace(' ', '').lower()}_s"


def arithmetic_rates(bench: dict) -> dict | None:
    """R_pass and R_step (TFLOP/s) from a speed table, with the shape they come from (module docstring), or None
    where it timed no encoder with both a plain forward and a plain step."""
    shapes: dict[tuple[str, int], dict[str, list[float]]] = {}
    for r in bench.get("rows", []):
        what = r["what"]
        kind = "pass" if what.startswith("plain forward (sdpa)") else "step" if what.startswith(
            "plain step: frozen") else None
        if kind is None or "compiled" in what or not r.get("seq_s") or shape_of(r["model"]) is None:
            continue
        flops = row_flops_per_seq(r["model"], what, r["n"])
        shapes.setdefault((r["model"], r["n"], r.get("batch") or bench["batch"][str(r["n"])]), {}).setdefault(
            kind, []).append(r["seq_s"] * flops / 1e12)
    both = [(k, v) for k, v in shapes.items() if "pass" in v and "step" in v]
    if not both:
        return None
    (model, n, batch), rates = max(both, key=lambda kv: kv[0][2] * row_flops_per_seq(kv[0][0], "plain forward",
                                                                                      kv[0][1]))
    return {"pass": min(rates["pass"]), "step": min(rates["step"]), "model": model, "n": n, "batch": batch,
            "dtype": bench.get("dtype")}


def _bandwidths(device: str) -> dict[str, float]:
    """Bytes per second of each path on `device` (module docstring), by the path's name without ``_bf16``."""
    peaks = device_peaks(device)
    hbm, link = (peaks.hbm, peaks.link) if peaks else (float("inf"), float("inf"))
    return {"device": hbm * 1e9, "pinned_host": link * 1e9, "disk_streamed": min(link, DISK_GBPS) * 1e9}


def predicted_row(row: dict, rates: dict, bandwidth: dict[str, float], host_budget: float) -> dict:
    """`row` with every rate and step predicted (module docstring), its stores keyed by path."""
    f, batch = row_flops(row), row.get("batch_size") or 1
    r_pass, r_step = rates["pass"] * 1e12, rates["step"] * 1e12
    out = dict(row, budget_bytes={"device": row["budget_bytes"].get("device", 0), "host": host_budget},
               fill_seq_per_s={}, stored_step_s={}, stored_eval_seq_per_s={})
    for path in PATHS:
        base = path.removesuffix(BF16_SUFFIX)
        value = BF16_BYTES if path.endswith(BF16_SUFFIX) else BYTES_PER_VALUE
        per_example = feature_bytes(1, row, value) / bandwidth[base]
        shared = SEEDS if base == "disk_streamed" else 1  # one read of a chunk for every seed
        out["fill_seq_per_s"][path] = 1 / max(f["fill"] / r_pass, per_example)
        out["stored_step_s"][path] = max(f["stored_step"] / r_step, batch * per_example / shared)
        out["stored_eval_seq_per_s"][path] = 1 / max(f["stored_eval"] / r_pass, per_example)
    for store in ("fill_seq_per_s", "stored_step_s", "stored_eval_seq_per_s"):
        out[store]["host"] = out[store]["pinned_host"]  # what the backbone path and the blocks would read
    out.update(forward_seq_per_s=r_pass / f["forward"], capture_seq_per_s=r_pass / f["capture"],
               **{f"{k}_s": f[k] / r_step for k in ("rerun_step", "lambda_step", "trainable_step", "plain_step")})
    return out


def _chooser(bf16: bool, record: dict):
    """A `Tally` chooser: `choose_path` on the split's bytes and the row's budgets, each choice recorded."""
    def choose(examples: int, row: dict, budgets: dict[str, float]) -> str:
        path, _ = choose_path(feature_bytes(examples, row), budgets["device"], budgets["host"], bf16)
        record[(row["model"], row["task"], examples)] = path
        return path
    return choose


def predict(cost: dict, est: dict) -> None:
    """Into `est`: ``prediction`` (the rates, and per node the estimate's figures and each split's path), and each
    model's and the totals' predicted seconds per node (``predicted_1tib_s``, ``predicted_2tib_s``)."""
    from benchmarks import grid_estimate

    rates = arithmetic_rates(cost["bench"])
    if rates is None:
        return
    # bfloat16 storage is a stated option in either precision (bf16_with_store, bf16_store): allowed where float32
    # features fit no memory
    bandwidth = _bandwidths(cost.get("device", ""))
    est["prediction"] = {"rates": rates, "nodes": {}, "disk_gbps": DISK_GBPS, "host_share": HOST_SHARE}
    for node, memory in NODES.items():
        rows = [predicted_row(r, rates, bandwidth, HOST_SHARE * memory) for r in cost["steps"]]
        paths: dict[tuple, str] = {}
        pred = grid_estimate.estimate(dict(cost, steps=rows), choose=_chooser(True, paths), predict=False)
        est["prediction"]["nodes"][node] = {"totals": pred["totals"], "per_model": pred["per_model"],
                                            "parts": pred["parts"], "unfit": pred["unfit"], "paths": {
                                                f"{m} {t} {n}": p for (m, t, n), p in sorted(paths.items())}}
        key = node_key(node)
        for model, figures in pred["per_model"].items():
            est["per_model"][model][key] = figures["estimate"]
        est["totals"][key] = pred["totals"]["estimate"]


def _path_rows(prediction: dict) -> list[str]:
    """Where each split goes on each node."""
    nodes = list(prediction["nodes"])
    splits = sorted({s for v in prediction["nodes"].values() for s in v["paths"]},
                    key=lambda s: (s.split()[0], s.split()[1], -int(s.split()[2])))
    out = ["| size class | task | examples | " + " | ".join(f"path, {n} node" for n in nodes) + " |",
           "|---|---|---|" + "---|" * len(nodes)]
    for split in splits:
        model, task, examples = split.split()
        out.append(f"| {model} | {task} | {int(examples):,} | "
                   + " | ".join(prediction["nodes"][n]["paths"].get(split, "–") for n in nodes) + " |")
    return out


def _goal_rows(est: dict) -> list[str]:
    """The goals (`GOALS`): the estimate now and predicted on each node."""
    nodes = list(est["prediction"]["nodes"])
    out = ["| goal | now | " + " | ".join(f"predicted, {n}" for n in nodes) + " |", "|---|---|" + "---|" * len(nodes)]
    for goal, model, hours, ratio in GOALS:
        figures = est["per_model"][model] if model else est["totals"]
        keys = ["estimate"] + [node_key(n) for n in nodes]
        cells = []
        for key in keys:
            if hours is not None:
                value = figures[key] / 3600
                cells.append(f"{value:.1f} h ({'met' if value <= hours else '**not met**'})")
            elif figures.get("flop_floor_40_s"):
                value = figures[key] / figures["flop_floor_40_s"]
                cells.append(f"{value:.2f}× ({'met' if value <= ratio else '**not met**'})")
            else:
                cells.append("–")
        out.append(f"| {goal} | " + " | ".join(cells) + " |")
    return out


def report_rows(est: dict) -> list[str]:
    """The prediction's section of the estimate's Markdown (`grid_estimate.report`)."""
    p, nodes = est["prediction"], list(est["prediction"]["nodes"])
    r = p["rates"]
    out = [f"**With a store for every configuration and no launch overhead: a prediction, not a measurement** "
           f"(`benchmarks/grid_prediction.py`). Every "
           f"split stored where `choose_path` puts it on the node, no configuration on the backbone path; a pass "
           f"takes its FLOPs at R_pass = {r['pass']:.1f} TFLOP/s or its bytes at its path's bandwidth, whichever is "
           f"longer, a training step its FLOPs at R_step = {r['step']:.1f} TFLOP/s: the rates this device measured "
           f"in {r['dtype']} on {r['model']} at n = {r['n']}, batch {r['batch']} (its speed table's most arithmetic "
           f"per call; the lower of its plain-forward timings, and its plain step), launch overhead taken as zero. "
           f"Pinned host memory: {p['host_share']:.0%} of the node's; disk {p['disk_gbps']:.0f} GB/s (assumed).\n"]
    out += _path_rows(p)
    out += ["", "| model | FLOP floor at 40% of peak (h) | now (h) | "
            + " | ".join(f"predicted, {n} (h)" for n in nodes) + " |", "|---|---|---|" + "---|" * len(nodes)]
    for model, v in [*sorted(est["per_model"].items()), ("**all**", est["totals"])]:
        floor = "–" if v.get("flop_floor_40_s") is None else f"{v['flop_floor_40_s'] / 3600:.2f}"
        out.append(f"| {model} | {floor} | {v['estimate'] / 3600:.1f} | " + " | ".join(
            f"{v[node_key(n)] / 3600:.1f}" for n in nodes) + " |")
    out += ["", "| part | " + " | ".join(f"predicted, {n} (h)" for n in nodes) + " |", "|---|" + "---|" * len(nodes)]
    for part in p["nodes"][nodes[0]]["parts"]:
        out.append(f"| {part} | " + " | ".join(f"{p['nodes'][n]['parts'].get(part, (0.0,))[0] / 3600:.2f}"
                                             for n in nodes) + " |")
    return [*out, "", *_goal_rows(est)]


