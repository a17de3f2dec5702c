"""The estimate's columns from the committed H100 folder: FLOPs, the FLOP floor at the dense peak and at 40% of
it, the rate the estimate implies, part A against part B within 1.2×, blocks at their store's rate, and the
prediction with a store for every configuration (the path each split takes on a 1 TiB and a 2 TiB node)."""
from __future__ import annotations

import json

import pytest

from benchmarks import cost as grid
from benchmarks.cost import choose_path
from benchmarks.rates import SEEDS, interpolate, step_points, with_overhead
from benchmarks.suite import arithmetic_rates, feature_bytes, row_flops_per_seq
from conftest import REPO

pytestmark = pytest.mark.slow
FOLDER = REPO / "artifacts" / "gpu" / "2026-11-28-nvidia-h100-80gb-hbm3"
TIB = 2**40


@pytest.fixture(scope="module")
def h100():
    cost = grid.load([str(FOLDER / "full_cost_b_bf16.json"), str(FOLDER / "full_cost_a_bf16.json")])
    return cost, grid.estimate(cost)


def test_the_flop_floor_is_the_needed_flops_at_the_dense_peak(h100):
    cost, est = h100
    assert cost["bench"]["dtype"] == "bf16" and est["peak_tflops"] == 989.4  # H100 SXM, dense bf16
    for figures in (*est["per_model"].values(), est["totals"]):
        assert figures["flop_floor_s"] == pytest.approx(figures["flops_needed"] / 989.4e12)
        assert figures["flop_floor_40_s"] == pytest.approx(figures["flop_floor_s"] / 0.4)
        assert figures["tflops"] == pytest.approx(figures["flops"] / figures["estimate"] / 1e12)
        assert figures["flops"] >= figures["flops_needed"]  # the backbone path runs more than a store needs
    parts = est["part_flops"]
    assert sum(run for run, _ in parts.values()) == pytest.approx(est["totals"]["flops"])
    assert sum(needed for _, needed in parts.values()) == pytest.approx(est["totals"]["flops_needed"])
    # the floor is hours at most, the estimate a few percent of peak: launches, not arithmetic, set it
    assert est["totals"]["flop_floor_s"] / 3600 < 4 and est["totals"]["tflops"] / 989.4 < 0.05


def test_part_a_and_part_b_are_flagged_where_they_differ_by_more_than_1_2(h100):
    cost, est = h100
    out = grid.report(cost, est)
    checks = grid.part_a_check(cost)
    apart = 0
    for what, measured, predicted, _, _ in checks:
        ratio = measured / predicted
        ok = 1 / 1.2 <= ratio <= 1.2
        apart += not ok
        assert f"| {what} | {measured:.1f} | {predicted:.1f} |" in out
        assert f"| {ratio:.2f} | {'yes' if ok else '**no**'} |" in out
    assert f"within 1.2× on {len(checks) - apart} of {len(checks)} rows" in out


def test_the_runner_overhead_part_a_measured_multiplies_each_part_it_checks(h100):
    cost, est = h100
    overhead = est["prediction"]["runner_overhead"]
    checks = {group: measured / predicted for _, measured, predicted, _, group in grid.part_a_check(cost)}
    assert overhead == pytest.approx(checks) and set(overhead) == {"constants", "λ rankings", "frozen points",
                                                                   "trained constants"}
    for node, figures in est["prediction"]["nodes"].items():
        parts = figures["parts"]
        assert with_overhead(parts, {}) == pytest.approx(est["totals"][grid.node_key(node)])
        # every part of the estimate belongs to a group part A checks, each at its own group's ratio
        by_group = {part: overhead[part.split(":")[0].split(",")[0]] for part in parts}
        assert figures["with_runner_overhead_s"] == pytest.approx(sum(parts[p][0] * r for p, r in by_group.items()))
    row = " | ".join(f"{v['with_runner_overhead_s'] / 3600:.1f}" for v in est["prediction"]["nodes"].values())
    assert f"any other part 1×) | {row} |" in grid.report(cost, est)


def test_blocks_are_charged_where_they_live():
    rows = []
    for model, layers, hidden in (("roberta-base", 12, 768), ("roberta-large", 24, 1024)):
        for task in grid.SIZES:
            rows.append({"model": model, "task": task, "layers": layers, "hidden": hidden, "read_per_example": 20.0,
                         "budget_bytes": {"device": 0, "host": 0, "disk": 0}, "forward_seq_per_s": 1e30,
                         "capture_seq_per_s": 1e30, "fill_seq_per_s": {"device": 1.0, "host": 1e30, "disk": 1e30},
                         "stored_step_s": {s: 0.0 for s in grid.STORES},
                         "stored_eval_seq_per_s": {s: 1e30 for s in grid.STORES}, "rerun_step_s": 0.0,
                         "lambda_step_s": 0.0, "trainable_step_s": 0.0, "plain_step_s": 0.0})
    cost = {"format": 2, "device": "test", "torch": "x", "steps": rows, "points": []}
    slow_device = grid.estimate(cost)["unfit_blocks_s"]
    for r in rows:
        r["fill_seq_per_s"]["device"] = 1e30
    assert slow_device > 0
    assert grid.estimate(cost)["unfit_blocks_s"] == pytest.approx(0, abs=1e-6)


def test_the_rates_come_from_the_speed_tables_most_arithmetic_shape(h100):
    cost, _ = h100
    rates = arithmetic_rates(cost["bench"])
    assert (rates["model"], rates["n"], rates["batch"]) == ("BERT-base (random)", 512, 16)
    rows = {r["what"]: r["seq_s"] for r in cost["bench"]["rows"] if r["model"] == "BERT-base (random)" and r["n"] == 512}
    forward = min(rows["plain forward (sdpa)"], rows["plain forward (sdpa), again"])
    assert rates["pass"] == pytest.approx(forward * row_flops_per_seq("BERT-base", "plain forward", 512) / 1e12)
    step = rows["plain step: frozen weights, grad through activations"]
    assert rates["step"] == pytest.approx(step * row_flops_per_seq("BERT-base", "plain step: frozen", 512) / 1e12)


def test_every_split_is_stored_on_1_and_2_tib_nodes(h100):
    cost, est = h100
    nodes = est["prediction"]["nodes"]
    assert all(v["unfit"] == 0 and "frozen points: backbone path (no store fits)" not in v["parts"]
               for v in nodes.values())
    big = {"roberta-base mnli 392702": ("pinned_host_bf16", "pinned_host"),
           "roberta-large mnli 392702": ("disk_streamed_bf16", "pinned_host_bf16"),
           "roberta-base sst2 67349": ("pinned_host", "pinned_host"),
           "roberta-large sst2 67349": ("pinned_host", "pinned_host"),
           "roberta-large mnli 9832": ("pinned_host", "pinned_host")}
    for split, (one, two) in big.items():
        assert (nodes["1 TiB"]["paths"][split], nodes["2 TiB"]["paths"][split]) == (one, two)
    others = {s for s in nodes["1 TiB"]["paths"] if s not in big}
    assert others and all(nodes[n]["paths"][s] == "device" for n in nodes for s in others)
    for figures in (*est["per_model"].values(), est["totals"]):
        assert 0 < figures["predicted_1tib_s"] < figures["estimate"] and figures["predicted_2tib_s"] > 0
    out = grid.report(cost, est)
    assert "a prediction, not a measurement" in out and "| whole grid ≤ 25 GPU-hours |" in out


def test_the_path_is_chosen_from_bytes_and_budgets_by_the_runners_rule():
    """The estimate's choice is the runner's (`papa.probing.feature_store.choose_path`): float32 in memory, then
    bfloat16 in memory, then disk (bfloat16 first where the precision allows it), streamed in chunks."""
    row = {"read_per_example": 54.0, "layers": 24, "hidden": 1024}
    mnli = feature_bytes(392702, row)  # roberta-large's MNLI training split in float32: about 2 TiB
    assert 1.9 * TIB < mnli < 2.0 * TIB
    device = 26 * 2**30
    assert choose_path(mnli, device, 0.6 * TIB) == ("disk_streamed_bf16", 2)  # on disk, bf16 first
    assert choose_path(mnli, device, 0.6 * TIB, bf16=False) == ("disk_streamed", 4)
    assert choose_path(mnli, device, 1.2 * TIB) == ("pinned_host_bf16", 2)
    assert choose_path(mnli, device, 1.2 * TIB, bf16=False) == ("disk_streamed", 4)
    assert choose_path(mnli, device, 2.4 * TIB) == ("pinned_host", 4)
    assert choose_path(device, device, 0) == ("device", 4)
    assert choose_path(device + 2, device, 0) == ("device_bf16", 2)


def test_a_chunk_streamed_from_disk_is_read_once_for_every_seed(h100):
    cost, _ = h100
    row = next(r for r in cost["steps"] if r["model"] == "roberta-large" and r["task"] == "mnli")
    bandwidth = {"device": 1e12, "pinned_host": 1e6, "disk_streamed": 1e6}  # slow enough that the bytes decide
    predicted = grid.predicted_row(row, grid.Prices(cost), bandwidth, TIB)["stored_step_s"]
    assert predicted["disk_streamed"] == pytest.approx(predicted["pinned_host"] / SEEDS)
    assert predicted["disk_streamed_bf16"] == pytest.approx(predicted["disk_streamed"] / 2)


def _steps_row(model: str, task: str, kind: str, mode: str, n: int, batch: int, seconds: float, flops: float) -> dict:
    return {"model": model, "task": task, "kind": kind, "mode": mode, "n": n, "batch_size": batch,
            "device": "NVIDIA H100 80GB HBM3", "step_s": seconds, "flops_per_step": flops}


def test_a_folders_steps_and_store_measurements_feed_the_prediction(tmp_path):
    """The steps and store-path benchmarks' JSONs beside the cost files (what the GPU check writes) price the
    prediction's steps and paths: graphed before eager, interpolated in tokens per step, the disk measured."""
    for name in ("full_cost_b_bf16.json", "full_cost_a_bf16.json", "bench_bf16.json"):
        (tmp_path / name).write_text((FOLDER / name).read_text())
    rows = [_steps_row("roberta-large", "sst2", "lambda", mode, 64, 32, seconds, 2e12)
            for mode, seconds in (("eager", 0.08), ("graphed", 0.02))]
    rows += [_steps_row("roberta-large", "ner", "lambda", "graphed", 128, 8, 0.01, 1e12)]  # 1,024 tokens a step
    (tmp_path / "steps_bf16.json").write_text(json.dumps({"format": 1, "smoke": False, "rows": rows}))
    store = {"seeds": 1, "machine": {"cuda": "NVIDIA H100 80GB HBM3"},
             "rows": [{"shape": "roberta-large mnli", "path": "disk_streamed_bf16: chunks", "ms_per_step": 1.0,
                       "steps": 1000, "kept_gib": 5.0, "device": "cuda"}]}
    (tmp_path / "store_grid.json").write_text(json.dumps(store))
    cost = grid.load([str(tmp_path / "full_cost_b_bf16.json"), str(tmp_path / "full_cost_a_bf16.json")])
    assert sorted(cost["measured"]) == ["steps", "store"]
    prices = grid.Prices(cost)
    large = next(r for r in cost["steps"] if r["model"] == "roberta-large" and r["task"] == "sst2")
    assert prices.step(large, "lambda_step", 2e12) == pytest.approx(0.02)  # graphed, at its own 2,048 tokens
    mnli = next(r for r in cost["steps"] if r["model"] == "roberta-large" and r["task"] == "mnli")  # 2,048 tokens
    assert prices.step(mnli, "lambda_step", 1e12) == pytest.approx(0.01)
    base = next(r for r in cost["steps"] if r["model"] == "roberta-base" and r["task"] == "sst2")
    assert prices.step(base, "lambda_step", 1.0) == base["lambda_step_s"]  # no roberta-base point: part B's own
    est = grid.estimate(cost)
    p = est["prediction"]
    assert "5.4 GB/s, the store-path benchmark" in p["bandwidth"]["disk_streamed"]
    assert any("steps benchmark (graphed)" in s for s in p["sources"]["lambda_step"])
    assert "part B at the row's own shape (eager)" in p["sources"]["lambda_step"]
    slow = p["disk_sensitivity"]["1 TiB"]
    assert slow["1"] >= slow["3"] >= slow["10"] > 0
    assert grid.estimate(cost, disk_gbps=1.0)["prediction"]["disk_gbps"] == 1.0  # a stated input wins


def test_steps_between_two_measured_shapes_are_interpolated_in_tokens_per_step():
    points = [(1024, 10e12, 0.0, "graphed"), (4096, 40e12, 0.0, "graphed")]
    assert interpolate(points, 2048)[0] == pytest.approx(20e12)
    assert interpolate(points, 512)[0] == 10e12 and interpolate(points, 8192)[0] == 40e12  # else the nearest
    eager = step_points([_steps_row("bert-base-uncased", "sst2", "stored", "eager", 64, 32, 0.005, 1e9)], 0.004)
    assert eager[("roberta-base", "stored_step")] == [(2048, pytest.approx(1e12), 0.004, "eager")]  # launch apart
