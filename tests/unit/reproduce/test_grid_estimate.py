"""The cost model's estimate (benchmarks/cost.py): every job costed once, evaluation counted once per seed, the floor
and its ratio printed per model and in all, schedules bounded by the work; a cost file of another format (older ones
record none) refused."""
from __future__ import annotations

import json
import math
from collections import Counter

import pytest

from benchmarks import cost as grid
from conftest import REPO

pytestmark = pytest.mark.slow
INF = float("inf")
BIG = 1e18  # bytes: every split fits


def _cost(**values) -> dict:
    """A format-2 cost file over every task and both size classes, each row `values` over a neutral default: all
    rates infinite and all steps free, every store's budget unbounded."""
    rows = []
    for model, layers, hidden in (("roberta-base", 12, 768), ("roberta-large", 24, 1024)):
        for task in grid.SIZES:
            row = {"model": model, "task": task, "layers": layers, "hidden": hidden, "read_per_example": 20.0,
                   "budget_bytes": {"device": BIG, "host": BIG, "disk": BIG},
                   "forward_seq_per_s": INF, "capture_seq_per_s": INF,
                   "fill_seq_per_s": {s: INF for s in grid.STORES},
                   "stored_step_s": {s: 0.0 for s in grid.STORES},
                   "stored_eval_seq_per_s": {s: INF for s in grid.STORES},
                   "rerun_step_s": 0.0, "lambda_step_s": 0.0, "trainable_step_s": 0.0, "plain_step_s": 0.0}
            row.update(values)
            rows.append(row)
    return {"format": 2, "device": "test", "torch": "x", "steps": rows, "points": []}


@pytest.fixture(scope="module")
def jobs():
    from papa.core.vocabulary import PAPER_NOTEBOOKS
    from papa.reproduce.jobs import notebook_jobs

    return notebook_jobs("full", PAPER_NOTEBOOKS)


@pytest.mark.parametrize("name", ["full_cost.json", "h200/full_cost.json"])
def test_cost_files_without_a_format_are_refused(name, capsys):
    """They record no format (they have no plain forward or step for a floor, and their probe step was rescaled by
    SST-2's real point): the format check refuses them by that alone, and says to rerun full_cost.py."""
    path = REPO / "artifacts" / "gpu" / name
    with pytest.raises(ValueError, match="records no format: an older full_cost.py wrote it; the cost model "
                                         "reads format 2. Such a file has no plain forward"):
        grid.estimate(json.loads(path.read_text()))
    assert grid.main([str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: a cost file that records no format" in err and "Rerun benchmarks/full_cost.py" in err


def test_the_format_is_read_not_sniffed(tmp_path):
    """A file of another format number is refused whatever its rows hold; the committed format-2 files load."""
    with pytest.raises(ValueError, match="a cost file that is of format 3; the cost model reads format 2. Rerun"):
        grid.estimate({**_cost(), "format": 3})
    folder = REPO / "artifacts" / "gpu" / "2026-11-28-nvidia-h100-80gb-hbm3"
    cost = grid.load([str(folder / "full_cost_b_bf16.json"), str(folder / "full_cost_a_bf16.json")])
    assert cost["format"] == grid.COST_FORMAT and cost["steps"] and cost["points"]
    part_a = tmp_path / "a.json"
    part_a.write_text(json.dumps({**_cost(), "steps": []}))
    with pytest.raises(ValueError, match="no part-B rows"):  # a current file, but nothing to multiply
        grid.estimate(grid.load([str(part_a)]))


def test_every_job_is_costed_once(jobs):
    est = grid.estimate(_cost(forward_seq_per_s=100.0, capture_seq_per_s=50.0, lambda_step_s=0.1,
                                       trainable_step_s=0.1, plain_step_s=0.05,
                                       stored_step_s={s: 0.01 for s in grid.STORES}))
    points = Counter(j.point for j in jobs)
    assert est["jobs"] == len(jobs) and est["points"] == len(points) == len(est["runs"])
    assert {k for _, needs in est["runs"] for k in needs} <= set(est["prep"])
    total = est["prep_s"] + est["runs_s"]
    assert est["totals"]["estimate"] == pytest.approx(total)
    assert sum(m["estimate"] for m in est["per_model"].values()) == pytest.approx(total)
    assert sum(est["per_task"].values()) == pytest.approx(total) and set(est["per_task"]) == set(grid.SIZES)
    assert sum(e for e, _ in est["parts"].values()) == pytest.approx(total)
    assert sum(f for _, f in est["parts"].values()) == pytest.approx(est["totals"]["floor"])


def test_evaluation_is_counted_once_per_seed(jobs):
    """Everything free but the probe's evaluation over the store (1 example/s): the estimate is one pass over the
    evaluation set per run, not two (adding it to a point time that holds it already would count it twice)."""
    est = grid.estimate(_cost(stored_eval_seq_per_s={s: 1.0 for s in grid.STORES}))
    assert est["totals"]["estimate"] == pytest.approx(sum(grid.SIZES[j.task][1] for j in jobs))


def test_a_frozen_point_runs_the_backbone_once_whatever_its_seeds(jobs):
    """Only the stores' fill costs (1 example/s): one pass over training + evaluation examples per frozen head
    configuration, and one over the evaluation examples per trained-constants seed (after its training)."""
    est = grid.estimate(_cost(fill_seq_per_s={s: 1.0 for s in grid.STORES}))
    expected = 0
    for point, seeds in Counter(j.point for j in jobs).items():
        task, constants, fraction = point[1], point[2], point[5]
        train, evals = grid.SIZES[task]
        trained = constants.startswith("trainable_") and fraction != "1"
        expected += seeds * evals if trained else train + evals
    assert est["totals"]["estimate"] == pytest.approx(expected)


def test_floor_is_the_plain_passes_the_protocol_needs(jobs):
    """Plain forward at 1 example/s, plain step free: the floor is one forward per frozen point's examples, one per
    trained seed's evaluation examples, and one per example of each extraction corpus (at each length)."""
    from papa.tasks.registry import get_task

    est = grid.estimate(_cost(forward_seq_per_s=1.0))
    expected, corpora = 0, set()
    for point, seeds in Counter(j.point for j in jobs).items():
        model, task, constants, corpus, fraction = point[0], point[1], point[2], point[3], point[5]
        train, evals = grid.SIZES[task]
        trained = constants.startswith("trainable_") and fraction != "1"
        expected += seeds * evals if trained else train + evals
        if constants in ("average", "trainable_average"):
            source = task if corpus in ("task", "none") else corpus
            corpora.add((model, source, get_task(task).hparams.max_length))
    expected += sum(grid.SIZES[source][0] for _, source, _ in corpora)
    assert est["totals"]["floor"] == pytest.approx(expected)
    # an extraction per length: MNLI's corpus at SST-2's n = 64 is not MNLI's own at n = 256
    keys = {k for k in est["prep"] if k[0] == "constants" and k[2] == "mnli"}
    assert {k[3] for k in keys} >= {64, 128, 256}


def test_the_estimate_is_printed_beside_the_floor(capsys, tmp_path):
    cost = _cost(forward_seq_per_s=200.0, capture_seq_per_s=100.0, lambda_step_s=0.2, trainable_step_s=0.2,
                 plain_step_s=0.1, fill_seq_per_s={s: 150.0 for s in grid.STORES},
                 stored_step_s={s: 0.02 for s in grid.STORES}, rerun_step_s=0.15)
    path = tmp_path / "cost.json"
    path.write_text(json.dumps(cost).replace("Infinity", "1e30"))
    assert grid.main([str(path), "--workers", "1", "4"]) == 0
    out = capsys.readouterr().out
    est = grid.estimate(json.loads(path.read_text()))
    h = 3600.0
    for model, v in est["per_model"].items():  # a test device: no peak, so no FLOP floor and no share of it
        assert (f"| {model} | {v['flops_needed'] / 1e15:,.0f} | – | – | {v['estimate'] / h:.1f} | – | "
                f"{v['tflops']:.1f} | – | {v['floor'] / h:.1f} | {v['backbone'] / h:.1f} |") in out
    t = est["totals"]
    assert (f"| **all** | **{t['flops_needed'] / 1e15:,.0f}** | **–** | **–** | **{t['estimate'] / h:.1f}** | **–** | "
            f"**{t['tflops']:.1f}** | **–** | **{t['floor'] / h:.1f}** | **{t['backbone'] / h:.1f}** |") in out
    assert t["floor"] < t["estimate"] < t["backbone"]


def test_splits_no_store_holds_take_the_backbone_path(jobs):
    cost = _cost(rerun_step_s=1.0, budget_bytes={"device": 0, "host": 0, "disk": 0})
    est = grid.estimate(cost)
    frozen = Counter(j.point for j in jobs if not (j.constants.startswith("trainable_") and j.fraction != "1"))
    assert est["unfit"] >= len(frozen)  # every frozen point (and every trained one, whose evaluation is stored)
    assert est["totals"]["estimate"] == pytest.approx(est["totals"]["backbone"])
    # in blocks (one backbone pass per epoch, free here) they would cost only their probe steps (free): nothing
    assert est["unfit_blocks_s"] == 0 < est["unfit_backbone_s"]
    # a budget given on the command line replaces the measured one
    assert grid.estimate(cost, {"disk": BIG})["unfit"] == 0


def test_schedules_are_bounded_by_the_work():
    est = grid.estimate(_cost(forward_seq_per_s=100.0, capture_seq_per_s=50.0, lambda_step_s=0.1,
                                       trainable_step_s=0.1, stored_step_s={s: 0.01 for s in grid.STORES}))
    total = est["prep_s"] + est["runs_s"]
    assert grid.on_workers(est, 1) == pytest.approx(total)
    for k in (2, 4, 8):
        t = grid.on_workers(est, k)
        assert total / k <= t + 1e-6 and t <= grid.on_workers(est, k // 2 if k > 2 else 1)
    longest = max(t for t, _ in est["runs"])
    assert longest <= est["chain_s"] <= total


def test_part_a_is_checked_against_part_b_not_used_to_scale_it():
    cost = _cost(capture_seq_per_s=1000.0, lambda_step_s=0.5, trainable_step_s=0.25,
                 fill_seq_per_s={s: 100.0 for s in grid.STORES},
                 stored_step_s={s: 0.125 for s in grid.STORES},
                 stored_eval_seq_per_s={s: 1000.0 for s in grid.STORES})
    before = grid.estimate(cost)["totals"]["estimate"]
    cost["points"] = [{"model": "roberta-base", "train_examples": 320, "eval_examples": 100, "constants_s": 70.0,
                       "constants_examples": 67349, "ranking_s": 9.0, "lambda_point_s": 99.0,
                       "lambda_point_store": "host", "trainable_point_s": 5.0}]
    assert grid.estimate(cost)["totals"]["estimate"] == before
    checks = {what.split(": ")[1].split(",")[0]: (measured, predicted)
              for what, measured, predicted, _, _ in grid.part_a_check(cost)}
    assert checks["constants"] == (70.0, pytest.approx(67.349))
    assert checks["λ ranking"] == (9.0, pytest.approx(10 * 0.5))
    assert checks["λ-ranked point 1/2"] == (99.0, pytest.approx(420 / 100 + 10 * 0.125 + 100 / 1000))
    assert checks["trained constants"] == (5.0, pytest.approx(10 * 0.25 + 100 / 100 + 100 / 1000))
    assert math.isfinite(checks["trained constants"][1])


def test_a_part_b_file_and_a_part_a_file_read_as_one(tmp_path, capsys):
    cost = _cost(capture_seq_per_s=1000.0, fill_seq_per_s={s: 100.0 for s in grid.STORES})
    b, a, other = tmp_path / "B.json", tmp_path / "A.json", tmp_path / "other.json"
    b.write_text(json.dumps(cost).replace("Infinity", "1e30"))
    a.write_text(json.dumps({"format": 2, "device": "test", "torch": "x", "steps": [], "points": [
        {"model": "roberta-base", "train_examples": 320, "eval_examples": 100, "constants_s": 70.0,
         "constants_examples": 67349, "ranking_s": 9.0}]}))
    other.write_text(json.dumps({"format": 2, "device": "another card", "steps": [], "points": []}))
    assert grid.main([str(b), str(a)]) == 0
    out = capsys.readouterr().out
    assert "| roberta-base, SST-2: constants, 67,349 sentences | 70.0 | 67.3 | capture rate |" in out
    assert grid.main([str(b), str(other)]) == 2
    assert "measured on 'another card'" in capsys.readouterr().err


def test_a_file_without_every_task_is_refused():
    cost = _cost()
    cost["steps"] = [r for r in cost["steps"] if r["task"] != "mnli"]
    with pytest.raises(ValueError, match="no part-B row for roberta-base mnli, roberta-large mnli"):
        grid.estimate(cost)
