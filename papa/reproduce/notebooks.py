"""Batch regeneration: execute the section notebooks with papermill for one profile.

A batch injects the common parameters (profile, folders, device, force) and the profile's overrides of the cpu
run's values (`PROFILE_PARAMETERS`); work is cached below the notebooks, so a rerun only re-executes the cells.
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pandas as pd

from papa.core.artifacts import atomic_path, check_output_dir
from papa.core.errors import Arg, InputError, PapaError
from papa.core.run_folder import RunFolder
from papa.core.settings import RunSettings
from papa.core.vocabulary import ELECTRA_BASE, NOTEBOOKS, PAPER_BASE, PAPER_LARGE, PAPER_TASKS
from papa.core.phases import read_phase_times
from papa.reproduce.batch import NOTEBOOK_DIR, Batch
from papa.reproduce.timings import TIME_COLUMNS, record_notebook_time, record_run, result_rows
from papa.runs.profiles import PROFILES, Profile, builtin_base, get_profile

# ipykernel's log at ERROR: no warning that a local kernel talks over unencrypted TCP in every stored notebook.
KERNEL_ARGUMENTS = ["--IPKernelApp.log_level=ERROR"]


class NotebookFailed(PapaError):
    """A cell of a notebook of the batch raised (papermill's error is the cause); the batch stops there."""


# Per profile, per notebook: the parameters that differ from the notebook's own (the cpu run's).
_NO_DRAWS = {"02_main_results": {"ranking_draws": [], "other_rankings": []},
             "06_head_selection": {"ranking_draws": [], "random_draws": 0, "other_rankings": []},
             "08_decoders": {"ranking_draws": [], "random_draws": 0}}
PROFILE_PARAMETERS: dict[str, dict[str, dict]] = {
    # the smoke run draws each head order once
    "quick": _NO_DRAWS,
    # the notebooks' own values, each head order drawn again
    "cpu": {},
    "full": {
        "01_method": {"model": "roberta-base"},
        "02_main_results": {**_NO_DRAWS["02_main_results"], "models": [*PAPER_BASE, *PAPER_LARGE],
                            "tasks": list(PAPER_TASKS)},
        "03_constant_patterns": {"model": "roberta-base", "task": "sst2"},
        "04_alternative_matrices": {"models": ["roberta-base", "roberta-large"], "tasks": list(PAPER_TASKS)},
        "05_data_dependence": {"models": ["roberta-base", "roberta-large"],
                               "tasks": ["cola", "mrpc", "sst2", "ner", "pos"], "other_corpus": "mnli"},
        "06_head_selection": {**_NO_DRAWS["06_head_selection"], "models": ["roberta-base"], "tasks": ["mnli"]},
        "07_mlm_electra": {"models": [*PAPER_BASE, ELECTRA_BASE], "downstream_task": "mnli"},
        "08_decoders": _NO_DRAWS["08_decoders"],
    },
}


#: Each notebook's parameters that name what it runs on: (the models, a list; one model), (the tasks; one task).
SUBJECT_PARAMETERS = {"models": ("models", "model"), "tasks": ("tasks", "task", "downstream_task")}


def with_subjects(name: str, params: dict, defaults: dict, models: Sequence[str] | None,
                  tasks: Sequence[str] | None) -> dict:
    """`params` of notebook `name` set to run on `models` and `tasks` (None: its own), as its `defaults` take them
    (a list, or one); several given to a notebook that takes one are refused."""
    out = dict(params)
    for given, what in ((models, "models"), (tasks, "tasks")):
        if not given:
            continue
        keys = SUBJECT_PARAMETERS[what]
        key = next((k for k in keys if k in defaults), None)
        if key is None:
            continue
        if key == keys[0]:
            out[key] = list(given)
        elif len(given) == 1:
            out[key] = given[0]
        else:
            several, alone = _subject_arg(what, given), [Arg("names", [name], flag="--notebooks"),
                                                         _subject_arg(what, given[:1])]
            raise InputError(f"notebook {name} takes one {key.replace('_', ' ')}, and {several} gives {len(given)}: "
                             f"run it on its own, e.g. {alone[0]} {alone[1]}", advice=[several, *alone])
    return out


def _subject_arg(what: str, values: Sequence[str]) -> Arg:
    """The argument (flag) that gives the notebooks other models or tasks, with `values`."""
    if what == "models":
        return Arg("with_models", list(values), flag="--models")
    return Arg("with_tasks", list(values), flag="--tasks")


def notebook_parameters(name: str, batch: Batch) -> dict:
    """The parameters papermill injects into notebook `name` when `batch` runs it; paths inside the clone are given
    relative to the notebooks' folder, so that executed notebooks name no path of the machine."""
    return injected_parameters(name, batch, get_profile(batch.profile))  # an unknown profile fails here


def injected_parameters(name: str, batch: Batch, prof: Profile) -> dict:
    """`notebook_parameters` for a batch whose profile its caller has already resolved to `prof`."""
    if name not in NOTEBOOKS:
        raise InputError(f"unknown notebook {name!r}; the notebooks are {', '.join(NOTEBOOKS)}")
    here = batch.notebook_dir.resolve()
    profile = batch.profile
    if not (isinstance(profile, str) and profile in PROFILES):  # a file: the kernel runs in the notebooks' folder
        profile = _where_notebooks_run(profile, here)
    params = {"profile": str(profile), "out_dir": _where_notebooks_run(batch.out, here), "device": batch.device,
              "force": batch.force}
    if batch.data_dir is not None:  # given relative to where papa runs, not to the notebooks' folder
        params["data_dir"] = str(Path(batch.data_dir).resolve())
    params.update(PROFILE_PARAMETERS.get(builtin_base(prof) or "", {}).get(name, {}))
    if batch.models is not None:
        params = _only_models(name, params, batch.models)
    if batch.with_models or batch.with_tasks:
        params = with_subjects(name, params, default_parameters(name, batch.notebook_dir), batch.with_models,
                               batch.with_tasks)
        if batch.with_models:  # a local folder is loaded from where the kernel runs (the notebooks' folder)
            params = _each_model(params, _loadable)
    return local_models(params, batch.model_dir) if batch.model_dir is not None else params


def _loadable(model: str) -> str:
    """`model` as a kernel running in the notebooks' folder loads it: a local folder by its absolute path."""
    from papa.core.model_names import is_local_path

    return str(Path(model).expanduser().resolve()) if is_local_path(model) else model


def notebook_grids(name: str, parameters: dict | None = None, *, notebook_dir: str | Path | None = None) -> list:
    """The `GridConfig`s notebook `name` runs with `parameters` (else its own values), read off its section's
    declaration: no cell is executed."""
    from papa.sections.registry import section_grids

    here = Path(notebook_dir or NOTEBOOK_DIR)
    values = {**default_parameters(name, here), **(parameters or {})}
    settings = RunSettings(values["profile"], values["out_dir"], values["data_dir"], values["device"], values["force"])
    # out_dir is relative to the notebooks' folder, where a declaration reading saved files would look
    declared = section_grids(name, {**values, "out_dir": str(here / values["out_dir"])})
    return [cfg for grids in declared.values() for cfg in grids.configs(settings)]


@contextmanager
def named_notebook(name: str, names: Sequence[str], other_subjects: object) -> Iterator[None]:
    """With `other_subjects`, a refusal of one of the notebook's grids names the notebook and how to leave it out."""
    try:
        yield
    except InputError as exc:
        if not other_subjects:
            raise
        rest = [n for n in names if n != name]
        advice = [Arg("names", rest, flag="--notebooks")] if rest else []
        leave = f"leave it out ({advice[0]})" if rest else "run other notebooks"
        raise InputError(f"notebook {name} cannot run on these: {exc.args[0] if exc.args else exc} -- {leave}",
                         advice=[*getattr(exc, "advice", ()), *advice]) from exc


def code_cells(path: Path) -> list[tuple[list[str], str]]:
    """(tags, source) of each code cell of the notebook at `path`, read as JSON (no Jupyter package needed)."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [(c.get("metadata", {}).get("tags", []), "".join(c["source"])) for c in cells if c["cell_type"] == "code"]


def default_parameters(name: str, notebook_dir: str | Path = NOTEBOOK_DIR) -> dict:
    """The values notebook `name`'s ``parameters`` cell assigns, read as literals (nothing is executed)."""
    import ast

    path = Path(notebook_dir) / f"{name}.ipynb"
    if not path.is_file():
        raise InputError(f"notebook {path} not found; the notebooks are {', '.join(NOTEBOOKS)}")
    cells = [source for tags, source in code_cells(path) if "parameters" in tags]
    if len(cells) != 1:
        raise InputError(f"notebook {path} has {len(cells)} cells tagged 'parameters'; papermill needs exactly one")
    values = {}
    for statement in ast.parse(cells[0]).body:
        if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Name)):
            raise InputError(f"notebook {path}'s parameters cell may only assign literals to names: "
                             f"line {statement.lineno} does something else")
        values[statement.targets[0].id] = ast.literal_eval(statement.value)
    return values


def _only_models(name: str, params: dict, models: Collection[str]) -> dict:
    allowed = set(models)
    named = params.get("models") if "models" in params else [params["model"]] if "model" in params else None
    if named is None:
        raise InputError(f"notebook {name} runs its own default model under this profile, not one of "
                         f"{', '.join(sorted(allowed))}: leave it out of the notebooks to run")
    kept = [m for m in named if m in allowed]
    if not kept:
        raise InputError(f"notebook {name} runs {', '.join(named)} under this profile, none of "
                         f"{', '.join(sorted(allowed))}: leave it out of the notebooks to run")
    return {**params, "models": kept} if "models" in params else params


def _where_notebooks_run(path: str | Path, notebook_dir: Path) -> str:
    """`path` as the notebooks (run in `notebook_dir`) reach it: relative inside the same clone, else absolute."""
    path = Path(path).resolve()
    if path.is_relative_to(notebook_dir.parent):
        path = Path(os.path.relpath(path, notebook_dir))
    return path.as_posix()


def local_models(params: dict, model_dir: str | Path) -> dict:
    """`params` with each model (``model``, ``models``) that has a folder in `model_dir` (named as its hub id with
    ``/`` written ``--``) replaced by that folder's absolute path."""
    root = Path(model_dir)
    if not root.is_dir():
        raise InputError(f"no model directory at {root}: give a folder holding one folder per model, named as its "
                         "hub id with '/' written '--' (e.g. microsoft--deberta-base)")

    def local(model: str) -> str:
        folder = root / model.replace("/", "--")
        return str(folder.resolve()) if (folder / "config.json").is_file() else model

    return _each_model(params, local)


def _each_model(params: dict, change) -> dict:
    """`params` with `change` applied to its model (``model``) and to each of its models (``models``)."""
    out = dict(params)
    if isinstance(out.get("model"), str):
        out["model"] = change(out["model"])
    if isinstance(out.get("models"), list):
        out["models"] = [change(m) for m in out["models"]]
    return out


@contextmanager
def no_progress_bars(more: Mapping[str, str] | None = None) -> Iterator[None]:
    """Kernels started inside draw no progress bars (this process's own are drawn); `more` sets further variables
    alike. Every variable is restored on the way out."""
    from papa.core.progress import BATCH_ENVIRONMENT

    wanted = {**BATCH_ENVIRONMENT, **(more or {})}
    before = {name: os.environ.get(name) for name in wanted}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run_notebooks(batch: Batch) -> pd.DataFrame:
    """Execute `batch.names` in order with papermill; returns each notebook's wall time and new probe runs, and records
    the finished batch (phase times from `batch.since`). Every input is checked first (`check_batch`); a failing
    notebook stops the batch, its executed copy written as ``notebooks/NAME.failed.ipynb``."""
    import papermill  # noqa: F401 -- loaded before the clock starts: its import is no notebook's time

    out = batch.out
    _, jobs = _checked_batch(batch)
    started_empty = out.is_empty()
    batch_start, since = time.perf_counter(), time.time() if batch.since is None else batch.since
    rows = []
    for i, (name, source, params) in enumerate(jobs, 1):
        start, runs_before = time.perf_counter(), result_rows(out)
        step = f"[{i}/{len(jobs)}] {name}"
        target = _execute(batch, name, source, params, step)
        seconds = time.perf_counter() - start
        rows.append({"notebook": name, "profile": batch.profile, "seconds": round(seconds, 1),
                     "output": str(target), "new_runs": result_rows(out) - runs_before})
        record_notebook_time(out, rows[-1])
        if batch.progress:
            print(f"{step}: {seconds:.0f} s, {rows[-1]['new_runs']} probe runs computed -> {target}", flush=True)
    times = pd.DataFrame(rows, columns=TIME_COLUMNS)
    if out.constants.is_dir():  # what the constants were, for results published without them
        from papa.method.constants import write_constants_index

        write_constants_index(out.constants)
    record_run(out, profile=str(batch.profile), names=[name for name, _, _ in jobs], device=batch.device,
               seconds=time.perf_counter() - batch_start, started_empty=started_empty,
               command=batch.command or f"papa.reproduce.notebooks.run_notebooks({str(batch.profile)!r})",
               phases=read_phase_times(out, since))
    return times


def _execute(batch: Batch, name: str, source: Path, params: dict, step: str) -> Path:
    """Run notebook `name` of `batch` (from `source`, with `params`) and write the executed copy; returns where."""
    import papermill

    target = batch.out.notebook(name)
    # papermill writes as it goes: run into a side file, rename when done (a crash leaves the old notebook).
    running = target.with_name(f".{name}.running.ipynb")
    running.parent.mkdir(parents=True, exist_ok=True)
    try:
        with no_progress_bars():  # a stored bar would show the state it was saved in (0%), not where it ended
            papermill.execute_notebook(str(source), str(running), parameters=params, cwd=str(batch.notebook_dir),
                                       kernel_name="python3", log_output=False, extra_arguments=KERNEL_ARGUMENTS,
                                       progress_bar={"desc": step, "leave": False} if batch.progress else False)
    except Exception as exc:
        failed = target.with_name(f"{name}.failed.ipynb")
        if running.exists():
            running.replace(failed)
        if isinstance(exc, papermill.PapermillExecutionError):
            raise NotebookFailed(f"notebook {name} failed in cell [{exc.exec_count}] with {exc.ename}: "
                                 f"{exc.evalue}; the executed copy, with the cell's traceback, is {failed}") from exc
        raise
    portable_paths(running, _path_names(batch.notebook_dir, batch.data_dir))
    as_lab_writes(running)
    running.replace(target)
    return target


def applicable_notebooks(batch: Batch) -> tuple[list[str], dict[str, str]]:
    """(the notebooks of `batch` that can run on its `with_models` / `with_tasks`, why each other cannot); a
    refusal of every notebook is raised (it is about the batch)."""
    kept, left, first = [], {}, None
    for name in batch.names:
        try:
            check_batch(replace(batch, names=(name,)))
            kept.append(name)
        except InputError as exc:
            cause = exc.__cause__ if isinstance(exc.__cause__, InputError) else exc  # without "notebook X cannot"
            first = first or cause
            left[name] = str(cause.args[0] if cause.args else cause)
    if not kept and first is not None:
        raise first
    return kept, left


def check_batch(batch: Batch) -> Profile:
    """Check everything `batch` is given, as `run_notebooks` does before its first kernel starts; returns the
    profile."""
    return _checked_batch(batch)[0]


def _checked_batch(batch: Batch) -> tuple[Profile, list[tuple[str, Path, dict]]]:
    """The profile and, per notebook, (name, source, parameters), everything checked (other subjects' grids too)."""
    from papa.method.models import resolve_device
    from papa.tasks.data import check_data_dir

    prof = get_profile(batch.profile)  # resolved once, before any notebook runs: an unknown profile fails here
    if not batch.notebook_dir.is_dir():
        raise InputError(f"no notebooks folder at {batch.notebook_dir}: run from a clone of the papa repository "
                         "(the notebooks are not part of the installed package)")
    resolve_device(batch.device)
    check_data_dir(batch.data_dir)
    check_output_dir(batch.out)
    _check_subjects(batch.with_models, batch.with_tasks)
    jobs = []
    for name in batch.names:
        source = batch.notebook_dir / f"{name}.ipynb"
        if not source.is_file():
            raise InputError(f"notebook {source} not found; the notebooks are {', '.join(NOTEBOOKS)}")
        # The kernels are other processes: they get the profile as given (a file's path), and read it there.
        params = injected_parameters(name, batch, prof)
        if batch.with_models or batch.with_tasks:
            with named_notebook(name, batch.names, True):
                for cfg in notebook_grids(name, params, notebook_dir=batch.notebook_dir):
                    cfg.resolved()  # the profile, the task and the model (from its config): no data, no weights
        jobs.append((name, source, params))
    return prof, jobs


def _check_subjects(models: Sequence[str] | None, tasks: Sequence[str] | None) -> None:
    """Refuse unknown tasks and local model folders that hold no model."""
    from papa.core.model_names import is_local_path
    from papa.tasks.registry import get_task

    for task in tasks or ():
        get_task(task)
    for model in models or ():
        if is_local_path(model) and not (Path(model).expanduser() / "config.json").is_file():
            given = Arg("with_models", [model], flag="--models")
            raise InputError(f"{given}: no model there (a model's folder holds its config.json, as save_pretrained "
                             "writes it); give a hub id, an alias or a model's folder", advice=[given])


def reproduction_summary(profile: str = "quick", *, names: Sequence[str] = NOTEBOOKS,
                         folder: RunFolder | str | os.PathLike | None = None) -> str:
    """What a batch run of `names` computed into `folder` (None: ``artifacts/<profile>``), claim by claim: verdict,
    numbers and figure, headed by what the profile's numbers can show."""
    from papa.paper.claims import RunTables, headed_claims, learns_tables, profile_uncertainty_note, smoke_run_first, stability_note
    from papa.sections.registry import profile_claims
    from papa.paper.tables import not_learning, short_model

    prof = get_profile(profile)
    out = RunFolder.at(folder or f"artifacts/{profile}")
    run = RunTables.read(out)
    readings = profile_claims(run, profile, names)
    if not readings:
        return smoke_run_first(prof, f"No claim of the paper is read by the notebooks {', '.join(names)}.")
    head = smoke_run_first(prof, f"The paper's claims as this run reads them (profile {prof.name}, layout "
                                 f"{prof.layout}).")
    if builtin_base(prof) not in ("quick", "full"):
        head += f" {prof.sizes_text()}."
    head += " " + profile_uncertainty_note(run, prof) + " " + stability_note(run)
    skipped = not_learning(run.learns)
    if skipped:
        which = ", ".join(f"{task} ({short_model(model)})" for model, task in skipped)
        head += (f" Left out of every claim: {which}, whose probe does not beat its majority-class baseline "
                 f"({', '.join(learns_tables(out))}).")
    return headed_claims(head, readings, out)


def _path_names(notebook_dir: Path, data_dir: str | None) -> dict[str, str]:
    from papa.tasks.data import resolve_data_dir

    names = {f"{notebook_dir.resolve().parent}{os.sep}": ""}  # the clone's root: paths become relative to it
    data = resolve_data_dir(data_dir)
    if data is not None:
        names[str(Path(data).resolve())] = "$PAPA_DATA_DIR"
    return names


_WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
#: The MIME type of a widget's view in an output (its model lives in the kernel, or in the notebook's widget state).
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def as_lab_writes(notebook: str | Path) -> bool:
    """Rewrite an executed notebook's metadata as JupyterLab writes it (the kernelspec's display name, the widget
    state of shown widgets only), so that opening it does not mark it modified; returns whether it changed."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    notebook = Path(notebook)
    text = notebook.read_text(encoding="utf-8")
    nb = json.loads(text)
    meta = nb.setdefault("metadata", {})
    spec = meta.get("kernelspec")
    if spec and spec.get("name"):
        try:
            spec["display_name"] = KernelSpecManager().get_kernel_spec(spec["name"]).display_name
        except NoSuchKernel:
            pass  # a kernel not installed here: left as it was written
    state = meta.get("widgets", {}).get(_WIDGET_STATE, {}).get("state")
    if state is not None:
        shown = {out["data"][WIDGET_VIEW]["model_id"] for cell in nb.get("cells", [])
                 for out in cell.get("outputs", []) if WIDGET_VIEW in out.get("data", {})}
        kept, todo = set(), [m for m in shown if m in state]
        while todo:  # a shown widget's children, layouts and styles are referenced as "IPY_MODEL_<id>"
            model = todo.pop()
            if model not in kept:
                kept.add(model)
                todo += [m for m in _referenced_models(state[model]) if m in state]
        if kept:
            meta["widgets"][_WIDGET_STATE]["state"] = {m: v for m, v in state.items() if m in kept}
        else:
            del meta["widgets"]
    new = json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n"  # as nbformat writes it
    if new == text:
        return False
    with atomic_path(notebook) as tmp:
        Path(tmp).write_text(new, encoding="utf-8")
    return True


def _referenced_models(value) -> list[str]:
    if isinstance(value, str):
        return [value.removeprefix("IPY_MODEL_")] if value.startswith("IPY_MODEL_") else []
    if isinstance(value, dict):
        return [m for v in value.values() for m in _referenced_models(v)]
    if isinstance(value, list):
        return [m for v in value for m in _referenced_models(v)]
    return []


def portable_paths(notebook: str | Path, names: dict[str, str]) -> None:
    """Rewrite this machine's absolute paths in an executed notebook (parameters, printed paths) as `names` says,
    so that executed notebooks can be shared and committed without them."""
    notebook = Path(notebook)
    text = notebook.read_text(encoding="utf-8")
    for path, name in sorted(names.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(json.dumps(path)[1:-1], json.dumps(name)[1:-1])  # both as they appear inside JSON
    with atomic_path(notebook) as tmp:
        Path(tmp).write_text(text, encoding="utf-8")
