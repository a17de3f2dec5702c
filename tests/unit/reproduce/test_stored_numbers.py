"""Every number a stored notebook prints is what the committed cpu run gives today (papa.reproduce.stored_numbers):
the stored notebooks are replayed in one kernel on a copy of artifacts/cpu (every probe run cached) and each cell's
printed text compared with the stored one; a drifted number fails, naming the cell and the lines."""
from __future__ import annotations

import copy
import json
import os
import re

import pytest

from conftest import REPO
from papa.core.vocabulary import NOTEBOOKS
from papa.reproduce.stored_numbers import (NOT_REPLAYED, changed_files, differences, not_replayed, printed, replay,
                                          replayed_run)


def _stored(name: str) -> dict:
    return json.loads((REPO / "notebooks" / f"{name}.ipynb").read_text(encoding="utf-8"))


def _cell(source: str, *outputs: dict) -> dict:
    return {"cell_type": "code", "source": source, "metadata": {}, "outputs": list(outputs)}


def test_printed_joins_the_streams_keeps_plain_text_and_masks_durations():
    cell = _cell("x", {"output_type": "stream", "name": "stdout", "text": ["cola: 1s\n", "sst"]},
                 {"output_type": "stream", "name": "stdout", "text": "2: 12 s\n"},
                 {"output_type": "stream", "name": "stderr", "text": "a warning\n"},
                 {"output_type": "execute_result", "data": {"text/plain": "0.80 to 0.99", "text/html": "<b>"}})
    assert printed(cell) == "cola: <duration>\nsst2: <duration>\n0.80 to 0.99"


def test_a_changed_number_is_reported_with_its_cell():
    nb = {"cells": [_cell("print(rho)", {"output_type": "stream", "name": "stdout", "text": "sst2 0.80 to 0.99\n"}),
                    _cell("forward_timings(m)", {"output_type": "execute_result", "data": {"text/plain": "0.72"}})]}
    again = copy.deepcopy(nb)
    assert differences("nb", nb, again) == []
    again["cells"][0]["outputs"][0]["text"] = "sst2 0.80 to 0.94\n"
    again["cells"][1]["outputs"][0]["data"]["text/plain"] = "0.95"  # timings are not compared
    found = differences("nb", nb, again)
    assert len(found) == 1 and "code cell 0 (print(rho))" in found[0]
    assert "-sst2 0.80 to 0.99" in found[0] and "+sst2 0.80 to 0.94" in found[0]


def test_every_cell_left_out_of_the_replay_is_in_a_stored_notebook():
    sources = ["".join(c["source"]) for name in NOTEBOOKS for c in _stored(name)["cells"] if c["cell_type"] == "code"]
    for piece in NOT_REPLAYED:  # an entry that matches nothing would hide nothing, and should go
        assert any(piece in s for s in sources), piece
    assert sum(bool(not_replayed(s)) for s in sources) == len(NOT_REPLAYED)  # one cell each, no more


RUN = REPO / "artifacts" / "cpu"


@pytest.fixture(scope="module")
def replay_dir(tmp_path_factory):
    if not os.environ.get("PAPA_DATA_DIR", "").strip():
        pytest.skip("no data directory: set PAPA_DATA_DIR (the notebooks read the task data)")
    return tmp_path_factory.mktemp("replay")


@pytest.fixture(scope="module")
def replayed(replay_dir):
    return replay(NOTEBOOKS, RUN, replay_dir)


def test_changed_files_names_what_a_replay_rewrote_or_added(tmp_path):
    run, copy = tmp_path / "run", tmp_path / "copy"
    for folder in (run, copy):
        (folder / "tables").mkdir(parents=True)
        (folder / "tables" / "a.csv").write_text("x\n1.0\n")
        (folder / "notebooks").mkdir()
    (copy / "tables" / "a.csv").write_text("x\n1.00000001\n")  # the last digit moved
    (copy / "tables" / "b.csv").write_text("y\n")
    (copy / "notebooks" / "02.ipynb").write_text("{}")  # not part of the copy
    assert changed_files(run, copy) == (["tables/a.csv"], ["tables/b.csv"])


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_the_stored_notebook_prints_what_the_committed_run_gives(name, replayed):
    stored = _stored(name)
    assert differences(name, stored, replayed[name]) == []
    # and the comparison sees a drift: one stored number changed in memory is reported
    texts = [(o, "text") if o["output_type"] == "stream" else (o["data"], "text/plain")
             for c in stored["cells"] if c["cell_type"] == "code" and not not_replayed("".join(c["source"]))
             for o in c["outputs"] if o.get("name") == "stdout" or "text/plain" in o.get("data", {})]
    holder, key = next((h, k) for h, k in reversed(texts) if re.search(r"\d\.\d", "".join(h[k])))
    holder[key] = re.sub(r"(\d)\.(\d)", lambda m: f"{(int(m[1]) + 1) % 10}.{m[2]}", "".join(holder[key]), count=1)
    assert len(differences(name, stored, replayed[name])) == 1


def _git(*args: str) -> list[str]:
    import subprocess

    done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)
    return done.stdout.split("\0") if done.returncode == 0 else []


@pytest.mark.slow
@pytest.mark.integration
def test_rerunning_every_notebook_leaves_the_committed_run_as_it_is(replayed, replay_dir):
    """Issue 74: a rerun leaves `git status` clean. Every section notebook, executed again on a copy of the committed
    run, rewrites no committed file of it in any byte and adds none that git would show (an extracted constants
    file, a lock, is ignored)."""
    if not _git("rev-parse", "-z", "--git-dir"):
        pytest.skip("not a git checkout")
    changed, added = changed_files(RUN, replayed_run(NOTEBOOKS, replay_dir))
    where = RUN.relative_to(REPO).as_posix()
    tracked = {p.removeprefix(f"{where}/") for p in _git("ls-files", "-z", where) if p}
    assert [p for p in changed if p in tracked] == []
    ignored = {p.removeprefix(f"{where}/") for p in _git("check-ignore", "-z",
                                                          *[f"{where}/{p}" for p in added]) if p} if added else set()
    assert [p for p in added if p not in tracked and p not in ignored] == []
