"""The speed table's arithmetic: dense peaks of known devices, FLOPs, TFLOP/s and % of peak per row, the
launch-bound mark, and the headline's shapes (Table 3's and a saturating batch), smoke-run on the CPU."""
from __future__ import annotations

import json

import pytest

from benchmarks import bench
from benchmarks.suite import (
    LAUNCH_BOUND_SHARE,
    Row,
    arithmetic,
    device_peaks,
    format_row,
    launch_bound,
    peak_tflops,
    row_flops_per_seq,
)
from conftest import REPO
from papa.method.cost import encoder_shape, pass_flops

FOLDER = REPO / "artifacts" / "gpu" / "2026-11-28-nvidia-h100-80gb-hbm3"


@pytest.mark.parametrize("name, kind, bf16, fp32", [
    ("NVIDIA H100 80GB HBM3", "H100 SXM", 989.4, 66.9), ("NVIDIA H100 PCIe", "H100 PCIe", 756.5, 51.2),
    ("NVIDIA H200", "H200 SXM", 989.4, 66.9), ("NVIDIA A100-SXM4-80GB", "A100", 312.0, 19.5)])
def test_known_devices_have_dense_peaks(name, kind, bf16, fp32):
    peaks = device_peaks(name)
    assert peaks.name == kind and peaks.tflops("bf16") == bf16 and peaks.tflops("float32") == fp32
    assert peaks.tflops("tf32") == pytest.approx(bf16 / 2, rel=0.01)
    assert device_peaks("Intel(R) Xeon(R) Processor, 16 cores") is None and peak_tflops("cpu", "bf16") is None


def test_a_row_under_a_tenth_of_peak_is_launch_bound():
    assert LAUNCH_BOUND_SHARE == 0.10
    assert launch_bound(98.0, 989.4) and not launch_bound(100.0, 989.4) and launch_bound(1.0, None) is None


@pytest.mark.parametrize("dtype, model, n, what, share, bound", [
    ("bf16", "MiniLM-L6", 128, "plain forward (sdpa)", 0.028, True),
    ("fp32", "BERT-base (random)", 512, "plain forward (sdpa)", 0.563, False)])
def test_committed_rows_get_tflops_and_their_share_of_peak(dtype, model, n, what, share, bound):
    """MiniLM at 64 × 128 in bf16 runs at 3% of the H100's peak; BERT-base in float32 at over half of the CUDA
    cores' (TF32 is off): arithmetic sets that one's time."""
    table = json.loads((FOLDER / f"bench_{dtype}.json").read_text())
    [r] = [r for r in table["rows"] if (r["model"], r["n"], r["what"]) == (model, n, what)]
    row = Row(r["model"], r["n"], r["what"], r["seq_s"])
    arithmetic(row, peak_tflops(table["device"], dtype))
    assert row.flops_per_seq == row_flops_per_seq(model, what, n)
    assert row.tflops == pytest.approx(r["seq_s"] * row.flops_per_seq / 1e12)
    assert row.peak_share == pytest.approx(share, abs=0.001) and row.launch_bound is bound
    text = format_row(row)
    assert f"| {row.tflops:.1f} | {row.peak_share:.1%}{', launch-bound' if bound else ''} |" in text


def test_rows_are_counted_by_their_variant():
    base = encoder_shape(768, 3072, 12)
    assert row_flops_per_seq("BERT-base (random)", "capture (papa)", 128) == pass_flops(base, 128)
    assert row_flops_per_seq("BERT-base", "1/2 input-dependent, Q/K dropped", 128) == pass_flops(
        base, 128, replaced_share=0.5)
    assert row_flops_per_seq("BERT-base", "λ step (θ + probe trainable)", 128) > row_flops_per_seq(
        "BERT-base", "plain step: frozen weights", 128) > 2 * pass_flops(base, 128)
    assert row_flops_per_seq("SmolLM2-135M", "capture (papa)", 128) is None
    assert row_flops_per_seq("MiniLM-L6", "CoLA grid, 15 runs", 64) is None


def test_the_headline_takes_table_3s_shapes_and_a_saturating_batch():
    shapes = bench.headline_shapes()
    assert [(s.label, s.n, s.batch, s.batches) for s in shapes[:-1]] == [
        ("SST2 (Table 3)", 64, 32, 1), ("COLA (Table 3)", 64, 16, 1), ("MRPC (Table 3)", 128, 16, 1),
        ("NER/POS (Table 3)", 128, 8, 1)]
    sat = shapes[-1]
    assert sat.saturating and sat.n * sat.batch * sat.batches >= 65536 and sat.n * sat.batch <= 16384
    assert not any(s.saturating for s in shapes[:-1])


@pytest.mark.slow
def test_the_headline_runs_on_the_cpu(tmp_path):
    out = tmp_path / "bench.json"
    assert bench.main(["--headline", "bert-base", "--tiny", "--quick", "--saturate-tokens", "64",
                       "--batch-tokens", "32", "--threads", "1", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    shapes = {r["what"].split("] ")[0] for r in rows}
    assert len(shapes) == 5 and len(rows) == 30  # six variants at each shape, every ratio from one call
    judged = [r for r in rows if r["met"] is not None]
    assert {r["what"].split("] ")[1] for r in judged} == {
        "capture (papa)", "1/2 input-dependent, Q/K dropped", "λ step (θ + probe trainable)"}
    assert all("saturating" in r["what"] for r in judged)
    assert all(r["flops_per_seq"] and r["tflops"] and r["peak_share"] is None for r in rows)  # a CPU: no peak
