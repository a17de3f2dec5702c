"""`make gpu-check SMOKE=1`: the GPU check's every step on the CPU at tiny sizes, run as a bare GPU machine runs it:
from a copy of the checkout and its staged folder alone (no ../shared, no PAPA_DATA_DIR), so the script cannot rot
between runs on a GPU; and the docs' GPU blocks render from the folder it writes."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from benchmarks import cost as grid
from benchmarks import gpu_check, gpu_stage
from docs import performance_pages
from conftest import REPO

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _checkout_copy(dest: Path) -> Path:
    """The files a call to the GPU machine copies: tracked, and untracked that git does not ignore."""
    for rel in gpu_stage.travelling_files(REPO):
        if not rel.startswith("artifacts/"):  # the check reads no artifact; notebooks it does
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(REPO / rel, dest / rel)
    return dest


@pytest.fixture(scope="module")
def smoke(tmp_path_factory, data_dir, hub_dir):
    """Stage from ../shared into a copy of the checkout, then run the smoke from that copy with nothing else."""
    root = tmp_path_factory.mktemp("gpu") / "machine"  # no ../shared beside it
    repo = _checkout_copy(root / "repo")
    stage = repo / ".gpu-stage"
    manifest = gpu_stage.stage(stage, hub_dir, data_dir, rows=64, wheels=False, python="3.12")
    # The printed command, with the smoke flag and this interpreter (the machine's python3 is its own): what
    # `make gpu-check SMOKE=1` runs.
    command = gpu_check.device_command(stage, python=sys.executable, smoke=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAPA_", "HF_"))}
    env.update(OUT=str(root / "out"))
    (root / "out").mkdir()
    done = subprocess.run(command, shell=True, cwd=repo, env=env, capture_output=True, text=True, timeout=900)
    return {"root": root, "repo": repo, "manifest": manifest, "done": done, "out": repo / "artifacts" / "gpu_smoke",
            "archive": root / "out" / "gpu_check.tar.gz"}


def test_the_printed_command_runs_every_step_from_the_staged_checkout_alone(smoke):
    done = smoke["done"]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "gpu_check run --fill: artifacts/gpu_smoke, every step" in done.stdout  # no folder to complete there
    record = gpu_check.read_check(smoke["out"])
    assert [s["name"] for s in record["steps"]] == list(gpu_check.STEP_NAMES)
    assert {s["status"] for s in record["steps"]} == {"ok"}, [s for s in record["steps"] if s["status"] != "ok"]
    assert record["smoke"] is True and record["source"] == smoke["manifest"]["source"]
    # every step read the staged files, named from the checkout's root: no path outside the copy, and no path of
    # the machine in anything the run wrote (the folder is committed)
    argv = [a for s in record["steps"] for a in s["argv"]]
    assert "--hub" in argv and argv[argv.index("--hub") + 1] == ".gpu-stage/hub" and "shared" not in " ".join(argv)
    for written in smoke["out"].rglob("*"):
        if written.is_file():
            assert str(smoke["root"]) not in written.read_text(encoding="utf-8"), written
    with tarfile.open(smoke["archive"]) as tar:
        assert {"gpu_smoke/check.json", "gpu_smoke/estimate.md"} <= set(tar.getnames())


def test_the_check_imports_nothing_the_gpu_image_lacks(smoke):
    imported = set(gpu_check.read_check(smoke["out"])["imports"])
    assert imported.isdisjoint(gpu_check.NOT_ON_GPU_IMAGE), imported & set(gpu_check.NOT_ON_GPU_IMAGE)
    assert {"torch", "transformers", "papa"} <= imported  # the record is of this run's imports


def test_each_output_holds_what_its_reader_needs(smoke):
    out = smoke["out"]
    costs = [json.loads((out / f).read_text()) for f in ("full_cost_b_bf16.json", "full_cost_b_fp32.json")]
    for cost in costs:
        assert {(r["model"], r["task"]) for r in cost["steps"]} == {
            (f"roberta-{size}", task) for size in ("base", "large") for task in grid.SIZES}
    point = json.loads((out / "full_cost_a_bf16.json").read_text())["points"][0]
    assert {"constants_s", "ranking_s", "lambda_point_s", "trainable_point_s"} <= set(point)
    estimate = json.loads((out / "estimate.json").read_text())
    assert estimate["jobs"] > 0 and estimate["totals"]["estimate"] > 0 and "bert-base-uncased" in estimate["per_model"]
    for name in ("steps_bf16", "steps_bf16_compiled"):  # the training steps, each mode beside eager
        rows = json.loads((out / f"{name}.json").read_text())["rows"]
        assert {r["mode"] for r in rows} == ({"eager", "compiled"} if "compiled" in name else {"eager"})
    assert json.loads((out / "store_grid.json").read_text())["rows"]  # the stores' fetch
    collected = re.search(r"(\d+) tests collected", (out / "logs" / "cuda_tests.log").read_text())
    assert collected and int(collected[1]) > 0  # the CUDA tests' files, collected on the CPU (a GPU runs them)
    for name in ("bench_fp32", "bench_bf16", "bench_fp32_compiled", "bench_bf16_compiled", "bench_grid"):
        bench = json.loads((out / f"{name}.json").read_text())
        assert bench["tiny"] and any(r["met"] is not None for r in bench["rows"])
        assert ("compiled" in name) == any("compiled" in r["what"] for r in bench["rows"])
        assert ("grid" in name) == any("saturating" in r["what"] for r in bench["rows"])


def test_the_docs_blocks_render_from_the_folder(smoke):
    table = performance_pages.gpu_table_block(smoke["out"])
    for row in ("| MiniLM-L6 | 16 | capture", "| BERT-base | 16 | attention-free", "compiled (eager)"):
        assert row in table, table
    estimate = performance_pages.gpu_estimate_block(smoke["out"])
    assert "| **all** |" in estimate and "bert-base-uncased" in estimate
    goals = {g["goal"]: g for g in performance_pages.goals(smoke["out"])}
    for goal, *_ in grid.GOALS:  # the smoke's cost ran in float32: a bf16 goal is not read off it
        assert goals[goal]["met"] is None and goals[goal]["value"] == "the estimate is in float32"
    speed = [goals[f"{w}, {dtype}"] for w, _ in performance_pages.SPEED_GOALS for dtype in ("float32", "bf16")]
    assert all(isinstance(g["met"], bool) and "MiniLM-L6 n = 16" in g["value"] for g in speed)
    saturating = [goals[w] for w, _ in performance_pages.SATURATING_GOALS]  # read off the bench at the grid's shapes
    assert all(isinstance(g["met"], bool) and "RoBERTa-large" in g["value"] for g in saturating)
    steps = [goals[f"{performance_pages.STEP_GOAL[0]}, {mode}"] for mode in ("graphed", "compiled")]
    assert steps[0] == {"goal": steps[0]["goal"], "value": "not run", "met": None}  # a CPU has no graphed steps
    assert isinstance(steps[1]["met"], bool) and "lambda" in steps[1]["value"]


def test_a_stage_over_the_transfer_limit_is_refused(tmp_path, data_dir, hub_dir, monkeypatch):
    monkeypatch.setattr(gpu_stage, "TRANSFER_LIMIT", 1024)
    with pytest.raises(SystemExit, match="over the 0 MiB a call carries"):
        gpu_stage.stage(tmp_path / "stage", hub_dir, data_dir, rows=8, wheels=False, python="3.12")


def test_run_without_a_stage_says_what_to_do(tmp_path):
    with pytest.raises(SystemExit, match="run `make gpu-stage`"):
        gpu_check.run(list(gpu_check.STEPS), tmp_path / "out", tmp_path / "nothing", smoke=True, budget=10,
                      archive=None)
