"""A batch reproduction as one value: `Batch` says which notebooks run on what, where they read and write, and how
they run."""
from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from papa.core.run_folder import RunFolder
from papa.core.vocabulary import NOTEBOOKS

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"


def run_folder(profile: str, models: Sequence[str] | None = None, tasks: Sequence[str] | None = None) -> Path:
    """Where a batch run writes by default: ``artifacts/<profile>``, or for other models or tasks
    ``artifacts/<profile>--<model>[+<model>…][--<task>+…]``."""
    from papa.core.model_names import model_file_name

    name = Path(str(profile)).stem if str(profile).endswith(".json") else str(profile)
    parts = [name]
    if models:
        parts.append("+".join(model_file_name(m).replace("/", "--") for m in models))
    if tasks:
        parts.append("+".join(tasks))
    return Path("artifacts") / "--".join(parts)


@dataclass(frozen=True)
class Batch:
    """One batch run of the section notebooks, unchecked until `papa.reproduce.notebooks.check_batch`; sequences
    are kept as tuples."""

    # What runs: `models` keeps only these of the profile's models; `with_models` / `with_tasks` replace them.
    profile: str | Path = "quick"
    names: Sequence[str] = NOTEBOOKS
    models: Collection[str] | None = None
    with_models: Sequence[str] | None = None
    with_tasks: Sequence[str] | None = None

    # Where: output (None: `run_folder`), data, notebooks, and a folder of local copies of the profile's models.
    out_dir: str | Path | None = None
    data_dir: str | None = None
    notebook_dir: Path = NOTEBOOK_DIR
    model_dir: str | Path | None = None

    # How the notebooks run: the device, whether finished pieces are recomputed, whether progress is shown.
    device: str = "cpu"
    force: bool = False
    progress: bool = True

    # How the run records itself: the command, and the `time.time()` its compute began (None: the notebooks' start).
    command: str | None = None
    since: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", tuple(self.names))
        for name in ("models", "with_models", "with_tasks"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, tuple(getattr(self, name)))
        object.__setattr__(self, "notebook_dir", Path(self.notebook_dir))

    @property
    def out(self) -> RunFolder:
        """The folder the batch writes to: `out_dir`, else `run_folder`'s for its profile and subjects."""
        return RunFolder.at(self.out_dir or run_folder(self.profile, self.with_models, self.with_tasks))
