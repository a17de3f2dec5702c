"""No verdict moves when one evaluation example is left out of the committed run (`papa.paper.claims.leave_one_out`):
a perturbation within the data's precision."""
from __future__ import annotations

import shutil

import pandas as pd
import pytest

from conftest import REPO
from papa.core.errors import InputError
from papa.core.run_folder import RunFolder
from papa.paper.claims.leave_one_out import leave_one_out
from papa.paper.tables import LEARNS_TABLES
from papa.sections.registry import profile_claims

CPU_RUN = REPO / "artifacts" / "cpu"


def _verdicts(readings) -> list[tuple[str, str, str]]:
    """(claim, part, verdict) of every claim, each of its parts and their members, and the causal LMs' reading."""
    def parts(claim, prefix, found):
        for part in found:
            yield claim, prefix + part.name, part.verdict
            yield from parts(claim, prefix + part.name + " / ", part.members)

    out = []
    for r in readings:
        out += [(r.claim, "", r.verdict), *parts(r.claim, "", r.parts)]
        if r.decoder is not None:
            out += [(r.claim, "causal LMs", r.decoder.verdict), *parts(r.claim, "causal LMs: ", r.decoder.parts)]
    return out


@pytest.fixture(scope="module")
def base():
    from docs import gen_measurements

    return gen_measurements.cpu_run(), gen_measurements.cpu_claims()  # computed once per test session


@pytest.mark.slow  # scores the committed run's 1,070 runs again and reads every claim on them
def test_no_verdict_moves_with_the_first_evaluation_example_left_out(base, tmp_path):
    run, claims = base
    fewer = leave_one_out(run, 0, RunFolder.at(tmp_path / "run"))
    moved = fewer.results.value - run.results.value
    assert (moved.abs() > 0).mean() > 0.5, "leaving an example out must move most runs' scores"
    assert moved.abs().max() < 0.02
    for name in LEARNS_TABLES:
        before, after = pd.read_csv(run.folder.table(name)), pd.read_csv(fewer.folder.table(name))
        assert (before[["model", "task"]] == after[["model", "task"]]).all().all()
        assert ((after["mean"] - before["mean"]).abs().between(1e-9, 0.02)).all()
        assert ((after["majority"] - before["majority"]).abs() < 0.01).all()
    again = profile_claims(fewer, "cpu")
    before, after = _verdicts(claims), _verdicts(again)
    assert [v[:2] for v in before] == [v[:2] for v in after], "the same claims and parts are read"
    assert [b for b, a in zip(before, after) if b != a] == [], "a verdict moved with one example left out"
    numbers = lambda readings: [p.numbers for r in readings for p in r.parts]  # noqa: E731
    assert numbers(claims) != numbers(again), "the perturbation must reach the numbers the verdicts read"


def test_a_run_without_predictions_or_a_used_folder_is_refused_first(tmp_path):
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(CPU_RUN / "results.csv", bare / "results.csv")
    with pytest.raises(InputError, match="stores its runs' predictions"):
        leave_one_out(bare, 0, RunFolder.at(tmp_path / "out"))
    used = tmp_path / "used"
    used.mkdir()
    (used / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="not empty"):
        leave_one_out(CPU_RUN, 0, RunFolder.at(used))
    with pytest.raises(InputError, match="outside run"):
        leave_one_out(CPU_RUN, 10 ** 6, RunFolder.at(tmp_path / "out"))
    assert not (tmp_path / "out").exists()
