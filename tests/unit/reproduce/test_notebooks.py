"""The section notebooks' shape: a parameters cell with the common names, the cpu run's values, no logic in cells."""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import nbformat
import pytest

from conftest import REPO
from papa.core.errors import InputError
from papa.reproduce.batch import Batch
from papa.reproduce.notebooks import NOTEBOOKS, PROFILE_PARAMETERS, as_lab_writes, notebook_parameters, portable_paths
from papa.reproduce.stored import STORED_PROFILE
from papa.reproduce.timings import read_run

# Seeds and fractions are the profile's (papa.runs.profiles): no notebook takes them, so a profile file rules.
COMMON = {"profile", "device", "data_dir", "out_dir", "force"}


def _parameters(nb) -> dict:
    cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1, "exactly one cell tagged 'parameters'"
    values = {}
    for node in ast.parse(cells[0].source).body:
        assert isinstance(node, ast.Assign), "the parameters cell holds plain assignments only"
        values[node.targets[0].id] = ast.literal_eval(node.value)
    return values


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_has_parameters_and_the_stored_runs_values(name):
    nb = nbformat.read(REPO / "notebooks" / f"{name}.ipynb", as_version=4)
    params = _parameters(nb)
    assert COMMON <= set(params)
    assert params["profile"] == STORED_PROFILE and params["out_dir"] == f"../artifacts/{STORED_PROFILE}"
    assert params["force"] is False and params["data_dir"] is None
    assert not {"seeds", "fractions"} & set(params)
    # Every parameter is read by a later cell (a parameter no cell uses would be silently ignored).
    used = {node.id for c in nb.cells if c.cell_type == "code" and "parameters" not in c.metadata.get("tags", [])
            for node in ast.walk(ast.parse(c.source)) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    assert set(params) <= used, f"{name}: unused parameters {sorted(set(params) - used)}"
    # Every override a profile injects names a parameter the notebook has.
    for profile in PROFILE_PARAMETERS:
        assert set(notebook_parameters(name, Batch(profile, out_dir="x"))) <= set(params)
    # Cells call into papa; a cell that defines functions, classes or loops is a function missing from papa/.
    for cell in nb.cells:
        if cell.cell_type == "code":
            for node in ast.walk(ast.parse(cell.source)):
                assert not isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.For, ast.While)), \
                    f"{name}: logic in a cell:\n{cell.source}"
    assert any(c.cell_type == "markdown" and "paper" in c.source.lower() for c in nb.cells)


def test_stored_notebooks_hold_outputs_of_a_run():
    for name in NOTEBOOKS:
        nb = nbformat.read(REPO / "notebooks" / f"{name}.ipynb", as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert all(c.execution_count for c in code), f"{name} is stored without running it"
        assert not any(o.output_type == "error" for c in code for o in c.outputs), f"{name} has an error output"


def test_parameters_for_profiles(tmp_path):
    quick = notebook_parameters("02_main_results", Batch("quick", out_dir=tmp_path, data_dir="d", force=True))
    assert quick == {"profile": "quick", "out_dir": str(tmp_path.resolve()), "device": "cpu", "force": True,
                     "data_dir": str(Path("d").resolve()), "ranking_draws": [], "other_rankings": []}
    # the stored (cpu) notebook draws λ again and reads the full profile's rankings; quick does neither
    assert notebook_parameters("06_head_selection", Batch("quick", out_dir=tmp_path))["random_draws"] == 0
    # Inside the clone the output folder is given relative to notebooks/, where the notebooks run.
    inside = notebook_parameters("02_main_results", Batch("cpu", out_dir=REPO / "artifacts" / "cpu"))
    assert inside["out_dir"] == "../artifacts/cpu" and inside["profile"] == "cpu"
    full = notebook_parameters("02_main_results", Batch("full", out_dir=tmp_path))
    assert len(full["models"]) == 6 and "mnli" in full["tasks"]
    with pytest.raises(InputError, match="unknown notebook"):
        notebook_parameters("08_extra", Batch("quick", out_dir=tmp_path))
    with pytest.raises(ValueError, match="unknown profile"):
        notebook_parameters("01_method", Batch("huge", out_dir=tmp_path))


def test_portable_paths(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        'print("x")', outputs=[nbformat.v4.new_output("stream", text=f"wrote {tmp_path}/artifacts/cpu/a.png\n"
                                                                       f"read {tmp_path / 'data'}/glue_data\n")])])
    path = tmp_path / "n.ipynb"
    nbformat.write(nb, path)
    portable_paths(path, {f"{tmp_path}/": "", str(tmp_path / "data"): "$PAPA_DATA_DIR"})
    text = nbformat.read(path, as_version=4).cells[0].outputs[0].text
    assert text == "wrote artifacts/cpu/a.png\nread $PAPA_DATA_DIR/glue_data\n" and str(tmp_path) not in path.read_text()
    portable_paths(path, {"wrote artifacts": 'wrote "quoted"'})  # names with quotes keep the file valid JSON
    assert nbformat.read(path, as_version=4).cells[0].outputs[0].text.startswith('wrote "quoted"/cpu/a.png')


@pytest.fixture
def profile_file(tmp_path):
    """A profile file whose seeds and fractions differ from every built-in profile's; unregistered afterwards."""
    from papa.runs.profiles import PROFILES

    path = tmp_path / "my.json"
    path.write_text(json.dumps({"name": "seeds-fractions-test", "base": "quick", "seeds": [5, 7],
                                "fractions": ["1", "1/4", "0"]}))
    yield path
    PROFILES.pop("seeds-fractions-test", None)


def test_a_profile_file_sets_the_reproductions_seeds_and_fractions(tmp_path, profile_file):
    """`papa reproduce --profile my.json` runs the file's seeds and fractions: the notebooks take them from the
    profile (here read off the notebooks as jobs, the path `papa reproduce --workers` and `papa jobs` take)."""
    from papa.reproduce.jobs import notebook_jobs

    path = profile_file
    for name in NOTEBOOKS:
        assert {"seeds", "fractions"}.isdisjoint(notebook_parameters(name, Batch(str(path), out_dir=tmp_path)))
    jobs = notebook_jobs(str(path), folder=tmp_path)
    assert jobs and {j.profile for j in jobs} == {"seeds-fractions-test"}
    assert {j.seed for j in jobs} == {5, 7}
    # Sections 4.2, 5.4 and 5.5 draw curves over the profile's fractions; Tables 1 and 2 compare at 1 and 0 only.
    assert {j.fraction for j in jobs} == {"1", "1/4", "0"}
    assert {j.fraction for j in jobs if j.selection != "none"} == {"1/4"}


def test_profile_file_gets_the_notebook_parameters_of_its_base(tmp_path, monkeypatch):
    """A profile file based on `full` runs the paper's models (at its own sizes); it reaches the kernel, which runs
    in notebooks/, by a path that works from there."""
    from papa.runs import profiles

    monkeypatch.setattr(profiles, "PROFILES", dict(profiles.PROFILES))  # registrations stay inside this test
    monkeypatch.setattr(profiles, "_BASES", {})
    full_file = tmp_path / "tiny-full.json"
    full_file.write_text(json.dumps({"name": "tiny-full", "base": "full", "train_limit": 2, "seeds": [0]}))
    on_top = tmp_path / "on-top.json"
    on_top.write_text(json.dumps({"name": "on-top", "base": str(full_file), "epochs": 1}))
    quick_file = tmp_path / "tiny-quick.json"
    quick_file.write_text(json.dumps({"name": "tiny-quick", "train_limit": 2}))
    monkeypatch.chdir(tmp_path)

    full = notebook_parameters("02_main_results", Batch("full", out_dir=tmp_path))
    for path in ("tiny-full.json", str(on_top)):  # relative to here, and absolute
        params = notebook_parameters("02_main_results", Batch(path, out_dir=tmp_path))
        assert params["models"] == full["models"] and params["tasks"] == full["tasks"]
        assert Path(params["profile"]).is_absolute() and Path(params["profile"]).resolve() == (tmp_path / path)
    assert "models" not in notebook_parameters("02_main_results", Batch("tiny-quick.json", out_dir=tmp_path))
    assert [profiles.builtin_base(p) for p in ("full", "tiny-full", "on-top", "tiny-quick", "cpu")] == \
        ["full", "full", "full", "quick", "cpu"]
    profiles.register_profile(profiles.Profile("in-memory", 1, 1, 1, 1, 1, 1))
    assert profiles.builtin_base("in-memory") is None  # no file, no base: the notebooks' own parameters


def test_local_models_replace_hub_ids_with_folders(tmp_path):
    """`model_dir` holds one folder per model, named as its hub id with '/' as '--' (like a hub mirror)."""
    deberta = tmp_path / "microsoft--deberta-base"
    deberta.mkdir()
    (deberta / "config.json").write_text("{}")
    (tmp_path / "roberta-base").mkdir()  # no config.json: not a model folder, the hub id stays
    params = notebook_parameters("07_mlm_electra", Batch("full", out_dir=tmp_path / "out", model_dir=tmp_path))
    assert params["models"] == ["bert-base-uncased", "roberta-base", str(deberta.resolve()),
                                "google/electra-base-discriminator"]
    assert notebook_parameters("01_method", Batch("full", out_dir=tmp_path, model_dir=tmp_path))[
        "model"] == "roberta-base"
    assert "models" not in notebook_parameters("02_main_results", Batch("quick", out_dir=tmp_path, model_dir=tmp_path))
    with pytest.raises(InputError, match="no model directory"):
        notebook_parameters("01_method", Batch("full", out_dir=tmp_path, model_dir=tmp_path / "none"))


def test_only_some_of_the_profiles_models(tmp_path):
    """`models` splits the full profile, e.g. into its base and its large models."""
    from papa.reproduce.notebooks import PAPER_BASE, PAPER_LARGE

    large = notebook_parameters("02_main_results", Batch("full", out_dir=tmp_path, models=PAPER_LARGE))
    assert large["models"] == list(PAPER_LARGE)
    assert notebook_parameters("04_alternative_matrices", Batch("full", out_dir=tmp_path, models=PAPER_BASE))[
        "models"] == ["roberta-base"]
    assert notebook_parameters("01_method", Batch("full", out_dir=tmp_path, models=PAPER_BASE))[
        "model"] == "roberta-base"
    with pytest.raises(InputError, match="01_method runs roberta-base .*none of"):
        notebook_parameters("01_method", Batch("full", out_dir=tmp_path, models=PAPER_LARGE))
    with pytest.raises(InputError, match="06_head_selection runs roberta-base .*leave it out"):
        notebook_parameters("06_head_selection", Batch("full", out_dir=tmp_path, models=PAPER_LARGE))
    with pytest.raises(InputError, match="its own default model"):
        notebook_parameters("02_main_results", Batch("quick", out_dir=tmp_path, models=PAPER_BASE))


def test_kernels_start_without_the_transport_warning(tmp_path, monkeypatch):
    """ipykernel warns on every start that a local kernel talks over TCP without encryption; the batch starts its
    kernels with their log at ERROR, which leaves that line out (the cells' own output is unaffected)."""
    from papa.reproduce import notebooks

    started = []

    def execute(source, target, **kwargs):
        started.append(kwargs)
        nbformat.write(nbformat.read(source, as_version=4), target)

    monkeypatch.setattr("papermill.execute_notebook", execute)
    times = notebooks.run_notebooks(Batch("quick", names=["03_constant_patterns"], out_dir=tmp_path / "out",
                                           progress=False))
    assert len(started) == 1 and "--IPKernelApp.log_level=ERROR" in started[0]["extra_arguments"]
    assert started[0]["progress_bar"] is False
    assert list(times["notebook"]) == ["03_constant_patterns"] and list(times["new_runs"]) == [0]
    assert (tmp_path / "out" / "notebooks" / "03_constant_patterns.ipynb").is_file()
    run = read_run(tmp_path / "out" / "reproduction.json")  # the batch records itself
    assert run["started_empty"] and run["notebooks"] == ["03_constant_patterns"] and run["machine"]["cores"] >= 1
    notebooks.run_notebooks(Batch("quick", names=["03_constant_patterns"], out_dir=tmp_path / "out", progress=True,
                                  command="papa reproduce --notebooks 03_constant_patterns"))
    assert started[1]["progress_bar"]["desc"] == "[1/1] 03_constant_patterns"  # a bar of the notebook's cells
    run = read_run(tmp_path / "out" / "reproduction.json")
    assert not run["started_empty"] and run["command"] == "papa reproduce --notebooks 03_constant_patterns"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_a_notebook_runs_what_its_section_declares(name):
    """`papa jobs` lists a notebook's jobs from its section's declaration (`grids` of its module in
    papa.sections.registry.SECTIONS) without running the notebook, so the notebook must run exactly that: its
    declaration called once, each grid it declares run through `section.run`, and no grid runner called any other
    way."""
    from papa.paper.grids import draws_an_order
    from papa.reproduce.notebooks import default_parameters, notebook_grids
    from papa.sections.registry import SECTIONS, section_grids

    source = "\n".join(c.source for c in nbformat.read(REPO / "notebooks" / f"{name}.ipynb", as_version=4).cells
                       if c.cell_type == "code")
    assert "run_grid(" not in source and "run_grids(" not in source and "learning_curves(" not in source.replace(
        "section.learning_curves(", "")
    if not hasattr(SECTIONS[name], "grids"):
        assert "section.run(" not in source and notebook_grids(name) == []
        return
    assert source.count("section.grids(") == 1
    run = [line.split("section.run(declared[", 1)[1].split("]", 1)[0].strip("\"'") for line in source.splitlines()
           if "section.run(declared[" in line]
    assert source.count("section.run(") == len(run)
    values = default_parameters(name)
    declared = section_grids(name, {**values, "out_dir": str(REPO / "notebooks" / values["out_dir"])})
    # the grids that draw an order again (the profile's other draws, other profiles' rankings) run together
    orders = {k for k in declared if draws_an_order(k)}
    if orders:
        assert source.count("section.run_orders(declared") == 1 and not orders & set(run)
    assert set(declared) - orders <= set(run)
    # a grid declared only with some parameters (other draws of an order) is run where it is declared
    assert all(f'if "{key}" in declared' in source for key in set(run) - set(declared))


def test_default_parameters_are_read_without_running_the_cell(tmp_path):
    from papa.reproduce.notebooks import default_parameters

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell('models = ["a", "b"]\nforce = False  # a comment\n',
                                          metadata={"tags": ["parameters"]})]
    nbformat.write(nb, tmp_path / "x.ipynb")
    assert default_parameters("x", tmp_path) == {"models": ["a", "b"], "force": False}
    nb.cells[0].source = "import os\nmodels = os.listdir('.')"
    nbformat.write(nb, tmp_path / "x.ipynb")
    with pytest.raises(InputError, match="may only assign literals"):
        default_parameters("x", tmp_path)


def test_other_models_and_tasks_are_set_as_each_notebook_takes_them(tmp_path):
    from papa.reproduce.notebooks import with_subjects

    mine = ["org/my-encoder"]
    main = notebook_parameters("02_main_results", Batch("quick", out_dir=tmp_path, with_models=mine,
                                                            with_tasks=["sst2"]))
    assert main["models"] == mine and main["tasks"] == ["sst2"] and main["profile"] == "quick"
    method = notebook_parameters("01_method", Batch("quick", out_dir=tmp_path, with_models=mine, with_tasks=["cola"]))
    assert method["model"] == "org/my-encoder" and method["task"] == "cola"
    assert notebook_parameters("07_mlm_electra", Batch("quick", out_dir=tmp_path, with_tasks=["cola"]))[
        "downstream_task"] == "cola"
    with pytest.raises(InputError, match=r"03_constant_patterns takes one model, and with_models=\['a', 'b'\] gives 2"):
        with_subjects("03_constant_patterns", {}, {"model": "m", "task": "t"}, ["a", "b"], None)
    assert with_subjects("x", {"p": 1}, {"p": 1}, ["a", "b"], ["t"]) == {"p": 1}  # names neither: as it is


def test_list_parameters_given_as_papermill_strings():
    from papa.paper.tables import listed

    assert listed("tasks", ["sst2"]) == ["sst2"]
    assert listed("tasks", '["sst2", "cola"]') == ["sst2", "cola"]  # papermill -p tasks '["sst2", "cola"]'
    assert listed("tasks", "sst2,cola") == listed("tasks", "sst2, cola") == ["sst2", "cola"]
    assert listed("models", "roberta-base") == ["roberta-base"]
    for bad in ("", "[sst2", "[1, 2]", 3, None, []):
        with pytest.raises(ValueError, match="parameter tasks takes a list of names, e.g. papermill -p tasks"):
            listed("tasks", bad)


def _widget(model: str, **state) -> dict:
    return {"model_module": "@jupyter-widgets/controls", "model_name": model, "model_module_version": "2.0.0",
            "state": state}


def test_an_executed_notebook_is_written_as_jupyterlab_writes_it(tmp_path):
    """The kernel's display name becomes the installed kernelspec's (Lab's), widget state that no output shows
    (a progress bar cleared while the cells ran) goes, a shown widget keeps what it refers to, and a second pass
    changes nothing."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    shown = nbformat.v4.new_output("display_data", data={
        "application/vnd.jupyter.widget-view+json": {"model_id": "box", "version_major": 2, "version_minor": 0}})
    nb.cells = [nbformat.v4.new_code_cell("explorer", outputs=[shown]), nbformat.v4.new_code_cell("bar")]
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"version_major": 2, "version_minor": 0,
        "state": {"box": _widget("VBoxModel", children=["IPY_MODEL_slider"], layout="IPY_MODEL_box_layout"),
                  "slider": _widget("IntSliderModel", value=3), "box_layout": _widget("LayoutModel"),
                  "bar": _widget("FloatProgressModel", value=0.0), "bar_style": _widget("ProgressStyleModel")}}}
    path = tmp_path / "n.ipynb"
    nbformat.write(nb, path)
    assert as_lab_writes(path) is True
    written = nbformat.read(path, as_version=4)
    assert written.metadata.kernelspec.display_name == "Python 3 (ipykernel)"
    assert set(written.metadata.widgets["application/vnd.jupyter.widget-state+json"]["state"]) == {
        "box", "slider", "box_layout"}
    assert as_lab_writes(path) is False
    nb.cells = nb.cells[1:]  # nothing shown: no widget state at all
    nbformat.write(nb, path)
    as_lab_writes(path)
    assert "widgets" not in nbformat.read(path, as_version=4).metadata


@pytest.mark.parametrize("name", [*NOTEBOOKS, "explorer"])
def test_the_stored_notebooks_are_as_jupyterlab_writes_them(name, tmp_path):
    """Opening a stored notebook in JupyterLab does not mark it modified (`make notebooks` writes them so)."""
    copy = tmp_path / f"{name}.ipynb"
    copy.write_bytes((REPO / "notebooks" / f"{name}.ipynb").read_bytes())
    assert as_lab_writes(copy) is False, f"notebooks/{name}.ipynb: run `make notebooks` (or as_lab_writes on it)"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_the_checks_are_out_of_the_story(name):
    """Every cell that checks a table for nbval is tagged "check" (the docs site leaves those cells out) and
    collapsed, source and output, in JupyterLab; no other cell is: the story's cells stay open."""
    nb = nbformat.read(REPO / "notebooks" / f"{name}.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        checks = "section.check_table(" in cell.source
        tagged = "check" in cell.metadata.get("tags", [])
        collapsed = cell.metadata.get("jupyter", {}) == {"source_hidden": True, "outputs_hidden": True}
        assert checks == tagged == collapsed, (name, cell.source[:80])


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_a_section_notebook_calls_into_one_section_module(name):
    """A section notebook imports its section's module (papa.sections.<section>) and nothing else of papa but the
    method's public face (`import papa`): what it calls is that module's, so a reader opens one file."""
    from papa.sections.registry import SECTIONS

    source = "\n".join(c.source for c in nbformat.read(REPO / "notebooks" / f"{name}.ipynb", as_version=4).cells
                       if c.cell_type == "code")
    imports = [line.strip() for line in source.splitlines() if "papa" in line and "import" in line.split("#")[0]]
    module = SECTIONS[name].__name__.rsplit(".", 1)[1]
    assert not hasattr(SECTIONS[name], "claims") or SECTIONS[name].claims.notebook == name
    assert sorted(set(imports) - {"import papa"}) == [f"from papa.sections import {module} as section"]
    called = set(re.findall(r"\bsection\.(\w+)", source))
    assert called and called <= set(SECTIONS[name].__all__), sorted(called - set(SECTIONS[name].__all__))


@pytest.mark.parametrize("name", [*NOTEBOOKS, "explorer"])
def test_papermill_reads_every_parameter(name):
    """papermill parses each line of the parameters cell (a comment holding " = " made it warn "Unable to parse
    line" at every batch run and leave that parameter out of its record)."""
    from papermill.translators import PythonTranslator

    nb = nbformat.read(REPO / "notebooks" / f"{name}.ipynb", as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    assigned = [line.split("=", 1)[0].strip() for line in cell.source.splitlines()
                if "=" in line.split("#", 1)[0] and not line.startswith((" ", "#"))]
    assert [p.name for p in PythonTranslator.inspect(cell)] == assigned
