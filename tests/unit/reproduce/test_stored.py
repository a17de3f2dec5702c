"""The stored notebooks are the cpu run's, and nbval, as configured, compares the cells tagged for it (papa.reproduce.
stored, the root conftest.py, pyproject's nbval options)."""
from __future__ import annotations

import json
import subprocess
import sys

import nbformat
import pytest

from conftest import REPO
from papa.core.errors import InputError
from papa.core.vocabulary import NOTEBOOKS
from papa.reproduce.stored import (COMPARED, STORED_PROFILE, is_progress_bar, store_run_notebooks, stored_notebook,
                                   with_values)

PARAMETERS = ('model = "m"                      # which model\n'
              'sentences = ["a b",\n'
              '             "c d"]\n'
              'profile = "quick"                # quick | cpu\n'
              'out_dir = "../artifacts/quick"   # where\n'
              'data_dir = None\n'
              'draws = []                       # more draws')


def test_with_values_rewrites_the_assignments_and_keeps_the_comments():
    source = with_values(PARAMETERS, {"profile": "cpu", "out_dir": "../artifacts/cpu", "draws": ["part1", "seed1"],
                                      "sentences": ["x"], "model": "m"})
    assert source.splitlines() == [
        'model = "m"                      # which model',  # unchanged: as written
        'sentences = ["x"]',
        'profile = "cpu"                  # quick | cpu',
        'out_dir = "../artifacts/cpu"     # where',
        'data_dir = None',
        'draws = ["part1", "seed1"]       # more draws']
    assert with_values(PARAMETERS, {"draws": ["part1", "part2", "seed1"]}).endswith(
        'draws = ["part1", "part2", "seed1"]  # more draws')
    with pytest.raises(InputError, match="assigns no seeds"):
        with_values(PARAMETERS, {"seeds": 3})


def _executed(profile: str = STORED_PROFILE) -> dict:
    """A notebook as papa reproduce leaves it: the parameters cell, papermill's injected one, outputs with a bar."""
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell(PARAMETERS, metadata={"tags": ["parameters"]})
    injected = nbformat.v4.new_code_cell(f'profile = "{profile}"\nout_dir = "../artifacts/{profile}"\n'
                                         'data_dir = "$PAPA_DATA_DIR"\ndraws = ["part1"]\n',
                                         metadata={"tags": ["injected-parameters"], "papermill": {"duration": 1}})
    run_meta = {"papermill": {"duration": 2}, "execution": {"iopub.status.busy": "2026-11-28T18:00:00Z"}}
    bar = "cola grid:  40%|████      | 10/25 [00:01<00:02, 5.0it/s]"
    work = nbformat.v4.new_code_cell("run()", metadata=run_meta, outputs=[
        nbformat.v4.new_output("stream", name="stderr", text=bar),
        nbformat.v4.new_output("stream", name="stderr", text="a warning worth reading\n"),
        nbformat.v4.new_output("stream", name="stdout", text="done\n")])
    nb.cells = [params, injected, work]
    nb.metadata["papermill"] = {"parameters": {"profile": profile}}
    return json.loads(nbformat.writes(nb))


def test_a_stored_notebook_says_what_ran_and_holds_no_bar(tmp_path):
    path = tmp_path / "02_main_results.ipynb"
    path.write_text(json.dumps(_executed()), encoding="utf-8")
    nb = stored_notebook(path)
    assert len(nb["cells"]) == 2 and "papermill" not in nb["metadata"]
    params = "".join(nb["cells"][0]["source"])
    assert 'profile = "cpu"                  # quick | cpu' in params and 'draws = ["part1"]' in params
    assert "data_dir = None" in params  # the reader's data, not the run's
    work = nb["cells"][1]
    assert work["metadata"] == {}
    assert ["".join(o["text"]) for o in work["outputs"]] == ["a warning worth reading\n", "done\n"]
    path.write_text(json.dumps(_executed("quick")), encoding="utf-8")
    with pytest.raises(InputError, match="ran at profile 'quick'"):
        stored_notebook(path)


def test_storing_a_run_needs_every_section_executed(tmp_path):
    (tmp_path / "run" / "notebooks").mkdir(parents=True)
    (tmp_path / "run" / "notebooks" / "01_method.ipynb").write_text(json.dumps(_executed()), encoding="utf-8")
    with pytest.raises(InputError, match="no executed notebook for 02_main_results"):
        store_run_notebooks(tmp_path / "run", tmp_path / "stored")
    assert not (tmp_path / "stored").exists()


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_the_stored_notebooks_are_the_cpu_runs(name):
    nb = json.loads((REPO / "notebooks" / f"{name}.ipynb").read_text(encoding="utf-8"))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert not any("injected-parameters" in c["metadata"].get("tags", []) for c in code)
    assert not any(is_progress_bar(o) for c in code for o in c["outputs"]), f"{name}: a progress bar is stored"
    first = "".join("".join(o.get("text", "")) for c in code for o in c["outputs"] if o["output_type"] == "stream")
    assert first.startswith(f"Outputs below: profile {STORED_PROFILE}, "), first[:200]
    assert any(COMPARED in c["metadata"].get("tags", []) for c in code), f"{name}: nbval would compare nothing"
    for cell in code:  # every check line is compared: it is the same on every profile and CPU (papa.paper.checks)
        if "checks.check_table(" in "".join(cell["source"]):
            assert COMPARED in cell["metadata"].get("tags", [])


@pytest.mark.slow
def test_nbval_as_configured_compares_the_tagged_cells_and_fails_on_an_error(tmp_path):
    """With the repository's nbval options, a compared cell whose output changed fails, a cell not compared may
    print anything, and a cell that raises fails wherever it is."""
    def run(cells) -> int:
        nb = nbformat.v4.new_notebook(cells=cells)
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        (tmp_path / "t.ipynb").write_text(nbformat.writes(nb), encoding="utf-8")
        (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
                               "--nbval-current-env", "t.ipynb"], cwd=tmp_path, capture_output=True).returncode

    def cell(source, text, compared):
        return nbformat.v4.new_code_cell(source, execution_count=1, metadata={"tags": [COMPARED]} if compared else {},
                                         outputs=[nbformat.v4.new_output("stream", text=text)])

    assert run([cell("print('a line')", "a line\n", True), cell("print(2)", "1\n", False)]) == 0
    assert run([cell("print('a line')", "another line\n", True)]) == 1
    assert run([cell("raise ValueError('broken')", "", False)]) == 1


def test_the_stored_explorer_is_a_picture_until_it_runs(tmp_path):
    """A widget view stored without its kernel shows nothing on GitHub or the docs site (and nbconvert prefers it to
    the picture beside it), so the stored explorer keeps the picture alone, and no widget state."""
    from papa.reproduce.stored import store_picture_of_widgets

    view = {"model_id": "box", "version_major": 2, "version_minor": 0}
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {
        "version_major": 2, "version_minor": 0, "state": {"box": {"model_name": "VBoxModel", "state": {}}}}}
    nb.cells = [nbformat.v4.new_code_cell("explorer", outputs=[nbformat.v4.new_output(
        "execute_result", execution_count=1, data={"application/vnd.jupyter.widget-view+json": view,
                                                   "image/png": "iVBORw0KGgo=", "text/plain": "explorer"})])]
    path = tmp_path / "explorer.ipynb"
    nbformat.write(nb, path)
    assert store_picture_of_widgets(path) is True
    written = json.loads(path.read_text(encoding="utf-8"))
    assert set(written["cells"][0]["outputs"][0]["data"]) == {"image/png", "text/plain"}
    assert "widgets" not in written["metadata"]
    assert store_picture_of_widgets(path) is False  # as stored
    stored = json.loads((REPO / "notebooks" / "explorer.ipynb").read_text(encoding="utf-8"))
    outputs = [o for c in stored["cells"] for o in c.get("outputs", [])]
    assert [set(o.get("data", {})) for o in outputs] == [{"image/png", "text/plain"}]  # the committed one: a picture


def test_an_empty_display_is_cleared_and_a_filled_one_is_not():
    """What a finished bar leaves in a notebook (an empty display) is dropped when storing; other outputs are kept."""
    from papa.reproduce.stored import is_cleared

    assert is_cleared({"output_type": "display_data", "data": {}, "metadata": {}})
    assert not is_cleared({"output_type": "display_data", "data": {"text/plain": "x"}, "metadata": {}})
    assert not is_cleared({"output_type": "stream", "name": "stdout", "text": ""})
