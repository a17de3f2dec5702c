"""benchmarks/grid_estimate.py on the committed H100 and H200 measurements: the sums and schedules are consistent."""
from __future__ import annotations

import json
import sys

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import grid_estimate  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=["full_cost.json", "h200/full_cost.json"])
def estimate(request):
    with open(REPO / "artifacts" / "gpu" / request.param) as fh:
        return grid_estimate.estimate(json.load(fh))


def test_every_full_job_is_costed_once(estimate):
    from papa.core.vocabulary import PAPER_NOTEBOOKS
    from papa.reproduce.jobs import notebook_jobs

    assert estimate["jobs"] == len(notebook_jobs("full", PAPER_NOTEBOOKS)) == len(estimate["runs"])
    assert all(t > 0 for t, _ in estimate["runs"]) and all(t > 0 for t in estimate["prep"].values())
    # every preparation a run waits for is costed, and each is costed once
    assert {k for _, needs in estimate["runs"] for k in needs} == set(estimate["prep"])
    total = estimate["prep_s"] + estimate["runs_s"]
    assert sum(estimate["per_model_s"].values()) == pytest.approx(total)


def test_schedules_are_bounded_by_the_work(estimate):
    total = estimate["prep_s"] + estimate["runs_s"]
    assert grid_estimate.on_workers(estimate, 1) == pytest.approx(total)
    for k in (2, 4, 8):
        t = grid_estimate.on_workers(estimate, k)
        assert total / k <= t + 1e-6 and t <= grid_estimate.on_workers(estimate, k // 2 if k > 2 else 1)
    longest = max(t for t, _ in estimate["runs"])
    assert longest <= estimate["chain_s"] <= total
