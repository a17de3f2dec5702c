"""How a rerun of the stored notebooks is compared with them (tests/stored_numbers.py): what a cell prints, the
copy of the committed run the rerun writes into, and what it changed there. The rerun itself is nbval's one
execution of each notebook (the root conftest.py)."""
from __future__ import annotations

import copy
import json
import re
import time

import pytest

from conftest import REPO
from papa.core.errors import InputError
from papa.core.vocabulary import NOTEBOOKS
from tests.stored_numbers import NOT_REPLAYED, changed_files, differences, not_replayed, printed, replay_folder


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


def test_replay_folder_puts_the_copy_where_the_stored_notebooks_write(tmp_path):
    run = tmp_path / "run"
    (run / "tables").mkdir(parents=True)
    (run / "tables" / "a.csv").write_text("x\n1\n")
    (run / "notebooks").mkdir()  # the executed notebooks are not copied
    (run / "notebooks" / "02.ipynb").write_text("{}")
    cwd = replay_folder(run, tmp_path / "work")
    assert cwd == (tmp_path / "work" / "notebooks").resolve() and cwd.is_dir()
    copy = cwd.parent / "artifacts" / "cpu"  # the stored notebooks' out_dir, "../artifacts/cpu", seen from there
    assert (copy / "tables" / "a.csv").read_text() == "x\n1\n" and not (copy / "notebooks").exists()


def test_replay_folder_refuses_notebooks_that_write_outside_it(tmp_path):
    nb = {"cells": [_cell('out_dir = "../../elsewhere"')], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    nb["cells"][0]["metadata"]["tags"] = ["parameters"]
    (tmp_path / "nbs").mkdir()
    (tmp_path / "nbs" / "02_main_results.ipynb").write_text(json.dumps(nb))
    with pytest.raises(InputError, match="one folder beside their own"):
        replay_folder(tmp_path, tmp_path / "work", ["02_main_results"], tmp_path / "nbs")


def test_changed_files_names_what_a_replay_rewrote_or_added(tmp_path):
    run, copy = tmp_path / "run", tmp_path / "copy"
    for folder in (run, copy):
        (folder / "tables").mkdir(parents=True)
        (folder / "tables" / "a.csv").write_text("x\n1.0\n")
        (folder / "tables" / "c.csv").write_text("z\n")
        (folder / "notebooks").mkdir()
    (copy / "tables" / "c.csv").write_text("z\n2\n")  # changed before the notebook ran: not its doing
    since = time.time_ns()
    (copy / "tables" / "a.csv").write_text("x\n1.00000001\n")  # the last digit moved
    (copy / "tables" / "b.csv").write_text("y\n")
    (copy / "notebooks" / "02.ipynb").write_text("{}")  # not part of the copy
    assert changed_files(run, copy) == (["tables/a.csv", "tables/c.csv"], ["tables/b.csv"])
    assert changed_files(run, copy, since_ns=since) == (["tables/a.csv"], ["tables/b.csv"])


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_a_drifted_number_in_any_stored_notebook_is_reported(name):
    """What nbval's run of a stored notebook is compared with (the root conftest.py): a stored number changed in
    memory is reported, in the cell that printed it, and nothing else is."""
    stored = _stored(name)
    again = copy.deepcopy(stored)
    assert differences(name, stored, again) == []
    texts = [(o, "text") if o["output_type"] == "stream" else (o["data"], "text/plain")
             for c in again["cells"] if c["cell_type"] == "code" and not not_replayed("".join(c["source"]))
             for o in c["outputs"] if o.get("name") == "stdout" or "text/plain" in o.get("data", {})]
    holder, key = next((h, k) for h, k in reversed(texts) if re.search(r"\d\.\d", "".join(h[k])))
    holder[key] = re.sub(r"(\d)\.(\d)", lambda m: f"{(int(m[1]) + 1) % 10}.{m[2]}", "".join(holder[key]), count=1)
    found = differences(name, stored, again)
    assert len(found) == 1 and found[0].startswith(f"{name} code cell ")
