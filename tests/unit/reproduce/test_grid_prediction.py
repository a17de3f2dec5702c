"""The estimate's columns from the committed H100 folder: FLOPs, the FLOP floor at the dense peak and at 40% of
it, the rate the estimate implies, part A against part B within 1.2×, blocks at their store's rate, and the
prediction with a store for every configuration (the path each split takes on a 1 TiB and a 2 TiB node)."""
from __future__ import annotations

import pytest

from benchmarks import grid_estimate, grid_prediction
from benchmarks.bench_flops import row_flops_per_seq
from benchmarks.grid_flops import choose_path, feature_bytes
from conftest import REPO

pytestmark = pytest.mark.slow
FOLDER = REPO / "artifacts" / "gpu" / "2026-11-28-nvidia-h100-80gb-hbm3"
TIB = 2**40


@pytest.fixture(scope="module")
def h100():
    cost = grid_estimate.load([str(FOLDER / "full_cost_b_bf16.json"), str(FOLDER / "full_cost_a_bf16.json")])
    return cost, grid_estimate.estimate(cost)


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
    out = grid_estimate.report(cost, est)
    checks = grid_estimate.part_a_check(cost)
    apart = 0
    for what, measured, predicted, _ in checks:
        ratio = measured / predicted
        ok = 1 / 1.2 <= ratio <= 1.2
        apart += not ok
        assert f"| {what} | {measured:.1f} | {predicted:.1f} |" in out
        assert f"| {ratio:.2f} | {'yes' if ok else '**no**'} |" in out
    assert f"within 1.2× on {len(checks) - apart} of {len(checks)} rows" in out


def test_blocks_are_charged_where_they_live():
    rows = []
    for model, layers, hidden in (("roberta-base", 12, 768), ("roberta-large", 24, 1024)):
        for task in grid_estimate.SIZES:
            rows.append({"model": model, "task": task, "layers": layers, "hidden": hidden, "read_per_example": 20.0,
                         "budget_bytes": {"device": 0, "host": 0, "disk": 0}, "forward_seq_per_s": 1e30,
                         "capture_seq_per_s": 1e30, "fill_seq_per_s": {"device": 1.0, "host": 1e30, "disk": 1e30},
                         "stored_step_s": {s: 0.0 for s in grid_estimate.STORES},
                         "stored_eval_seq_per_s": {s: 1e30 for s in grid_estimate.STORES}, "rerun_step_s": 0.0,
                         "lambda_step_s": 0.0, "trainable_step_s": 0.0, "plain_step_s": 0.0})
    cost = {"format": 2, "device": "test", "torch": "x", "steps": rows, "points": []}
    slow_device = grid_estimate.estimate(cost)["unfit_blocks_s"]
    for r in rows:
        r["fill_seq_per_s"]["device"] = 1e30
    assert slow_device > 0
    assert grid_estimate.estimate(cost)["unfit_blocks_s"] == pytest.approx(0, abs=1e-6)


def test_the_rates_come_from_the_speed_tables_most_arithmetic_shape(h100):
    cost, _ = h100
    rates = grid_prediction.arithmetic_rates(cost["bench"])
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
           "roberta-large mnli 392702": ("disk_streamed", "pinned_host_bf16"),
           "roberta-base sst2 67349": ("pinned_host", "pinned_host"),
           "roberta-large sst2 67349": ("pinned_host", "pinned_host"),
           "roberta-large mnli 9832": ("pinned_host", "pinned_host")}
    for split, (one, two) in big.items():
        assert (nodes["1 TiB"]["paths"][split], nodes["2 TiB"]["paths"][split]) == (one, two)
    others = {s for s in nodes["1 TiB"]["paths"] if s not in big}
    assert others and all(nodes[n]["paths"][s] == "device" for n in nodes for s in others)
    for figures in (*est["per_model"].values(), est["totals"]):
        assert 0 < figures["predicted_2tib_s"] <= figures["predicted_1tib_s"] * 1.2
        assert figures["predicted_2tib_s"] < figures["estimate"]
    out = grid_estimate.report(cost, est)
    assert "a prediction, not a measurement" in out and "| whole grid ≤ 25 GPU-hours |" in out


def test_the_path_is_chosen_from_bytes_and_budgets_by_the_runners_rule():
    """The estimate's choice is the runner's (`papa.probing.feature_store.choose_path`): float32 in memory, then
    bfloat16 in memory, then disk (float32 first), streamed in chunks."""
    row = {"read_per_example": 54.0, "layers": 24, "hidden": 1024}
    mnli = feature_bytes(392702, row)  # roberta-large's MNLI training split in float32: about 2 TiB
    assert 1.9 * TIB < mnli < 2.0 * TIB
    device = 26 * 2**30
    assert choose_path(mnli, device, 0.6 * TIB) == ("disk_streamed", 4)
    assert choose_path(mnli, device, 1.2 * TIB) == ("pinned_host_bf16", 2)
    assert choose_path(mnli, device, 1.2 * TIB, bf16=False) == ("disk_streamed", 4)
    assert choose_path(mnli, device, 2.4 * TIB) == ("pinned_host", 4)
    assert choose_path(device, device, 0) == ("device", 4)
    assert choose_path(device + 2, device, 0) == ("device_bf16", 2)


def test_a_chunk_streamed_from_disk_is_read_once_for_every_seed(h100):
    cost, _ = h100
    row = next(r for r in cost["steps"] if r["model"] == "roberta-large" and r["task"] == "mnli")
    rates = {"pass": 1e6, "step": 1e6}  # arithmetic takes no time: the bytes decide
    bandwidth = {"device": 1e12, "pinned_host": 1e10, "disk_streamed": 1e10}
    predicted = grid_prediction.predicted_row(row, rates, bandwidth, TIB)["stored_step_s"]
    assert predicted["disk_streamed"] == pytest.approx(predicted["pinned_host"] / grid_prediction.SEEDS)
    assert predicted["disk_streamed_bf16"] == pytest.approx(predicted["disk_streamed"] / 2)
