"""A batch reproduction as one value: `Batch` says which notebooks run on what, where they read and write, and how
they run. `papa reproduce` and `papa jobs` build it once from their flags; `papa.reproduce.notebooks` (the checks,
the parameters injected into each notebook, the run) and `papa.reproduce.jobs` (the same grids as jobs) take it
whole."""
from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from papa.core.run_folder import RunFolder
from papa.core.vocabulary import NOTEBOOKS

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"


def run_folder(profile: str, models: Sequence[str] | None = None, tasks: Sequence[str] | None = None) -> Path:
    """Where a batch run writes by default: ``artifacts/<profile>`` for the notebooks' own models and tasks; a run on
    other models or tasks gets a folder named for it (``artifacts/<profile>--<model>[+<model>…][--<task>+…]``, a
    local model by its folder's name), never the reproduction's own."""
    from papa.core.model_names import model_file_name

    name = Path(str(profile)).stem if str(profile).endswith(".json") else str(profile)
    parts = [name]
    if models:
        parts.append("+".join(model_file_name(m).replace("/", "--") for m in models))
    if tasks:
        parts.append("+".join(tasks))
    return Path("artifacts") / "--".join(parts)


def _tuple(values: Collection[str] | None) -> tuple[str, ...] | None:
    return None if values is None else tuple(values)


@dataclass(frozen=True)
class Batch:
    """One batch run of the section notebooks (`papa.reproduce.notebooks.run_notebooks`). Nothing is checked when it
    is built: `papa.reproduce.notebooks.check_batch` checks it all before any kernel starts. Sequences are kept as
    tuples."""

    # What runs: a profile (a built-in name, or a JSON file, passed to the kernels as given), the notebooks in
    # order, and what they run on. `models` keeps only these of the models the profile gives each notebook (hub
    # ids, e.g. the full profile's large ones); `with_models` / `with_tasks` run the notebooks on other models (hub
    # ids, aliases, local folders) and tasks instead of their own (`papa.reproduce.notebooks.with_subjects`).
    profile: str | Path = "quick"
    names: Sequence[str] = NOTEBOOKS
    models: Collection[str] | None = None
    with_models: Sequence[str] | None = None
    with_tasks: Sequence[str] | None = None

    # Where: the output folder (None: `run_folder`, see `out`), the data (None: $PAPA_DATA_DIR, else the hub), the
    # notebooks, and a folder of local copies of the profile's models (`papa.reproduce.notebooks.local_models`).
    out_dir: str | Path | None = None
    data_dir: str | None = None
    notebook_dir: Path = NOTEBOOK_DIR
    model_dir: str | Path | None = None

    # How the notebooks run: the device, whether finished pieces are recomputed, whether progress is shown.
    device: str = "cpu"
    force: bool = False
    progress: bool = True

    # How the run records itself (`papa.reproduce.timings.record_run`): the command that ran it, and the
    # `time.time()` its compute began (None: when the notebooks start; `papa reproduce --workers` runs jobs first).
    command: str | None = None
    since: float | None = None

    def __post_init__(self) -> None:
        # Lists given become tuples, so that a batch passed around cannot change under its readers.
        object.__setattr__(self, "names", tuple(self.names))
        for name in ("models", "with_models", "with_tasks"):
            object.__setattr__(self, name, _tuple(getattr(self, name)))
        object.__setattr__(self, "notebook_dir", Path(self.notebook_dir))

    @property
    def out(self) -> RunFolder:
        """The folder the batch writes to: `out_dir`, else the one `run_folder` names for its profile and subjects
        (worked out on each call, so that `dataclasses.replace` of a subject moves it too)."""
        return RunFolder.at(self.out_dir or run_folder(self.profile, self.with_models, self.with_tasks))
