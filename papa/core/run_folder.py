"""One run's output folder and its layout: every reader and writer of a run takes its paths from `RunFolder`.

A grid or a reproduction writes into one folder (``--out``, a notebook's ``out_dir``)::

    <out>/
      results.csv            one row per probe run (papa.runs.results)
      predictions/           each run's per-example outcome, <run_id>.safetensors (papa.runs.predictions_store)
      constants/             average attention matrices and their index (papa.runs.constants_cache)
      rankings/              learned λ head rankings (papa.runs.lambda_ranking)
      probe_inputs/          standardization statistics of the probes' inputs (papa.runs.experiment)
      features/              cached frozen features (papa.probing.feature_store)
      tables/                the sections' tables, <name>.csv (papa.paper.tables.save_table)
      figures/               the sections' figures, <name>.png and <name>.svg (papa.paper.figures.save_figure)
      notebooks/             executed section notebooks (papa reproduce)
      notebook_times.csv     each notebook's time and probe runs (papa.reproduce.timings)
      reproduction.json      the run record of a finished batch (papa.reproduce.timings)
      phase_times/           seconds per phase, one file per process (papa.core.phases)
      jobs/                  a distributed grid's logs (papa.reproduce.jobs)
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["RunFolder"]


@dataclass(frozen=True)
class RunFolder:
    """A run's output folder; its properties are the paths of what a run writes there."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    @classmethod
    def at(cls, where: RunFolder | str | os.PathLike) -> RunFolder:
        """`where` as a run folder (a folder path, or a run folder as it is)."""
        return where if isinstance(where, RunFolder) else cls(Path(where))

    def __fspath__(self) -> str:
        return os.fspath(self.root)

    def __str__(self) -> str:
        return str(self.root)

    def is_empty(self) -> bool:
        """Whether nothing is in the folder yet (or it does not exist): a run started here starts from scratch."""
        return not self.root.exists() or not any(self.root.iterdir())

    @property
    def results(self) -> Path:
        """The results table, one row per probe run."""
        return self.root / "results.csv"

    @property
    def predictions(self) -> Path:
        """The folder of the runs' per-example predictions."""
        return self.root / "predictions"

    @property
    def constants(self) -> Path:
        """The folder of cached constant matrices."""
        return self.root / "constants"

    @property
    def rankings(self) -> Path:
        """The folder of learned λ rankings."""
        return self.root / "rankings"

    @property
    def probe_inputs(self) -> Path:
        """The folder of the probes' input statistics."""
        return self.root / "probe_inputs"

    @property
    def features(self) -> Path:
        """The folder of cached frozen features."""
        return self.root / "features"

    @property
    def tables(self) -> Path:
        """The folder of the sections' tables."""
        return self.root / "tables"

    def table(self, name: str) -> Path:
        """The csv of table `name`."""
        return self.root / self.table_file(name)

    @staticmethod
    def table_file(name: str) -> str:
        """The csv of table `name` relative to any run folder (how a claim names the table it rests on)."""
        return f"tables/{name}.csv"

    @property
    def figures(self) -> Path:
        """The folder of the sections' figures."""
        return self.root / "figures"

    @staticmethod
    def figure_file(name: str) -> str:
        """The PNG of figure `name` relative to any run folder (how a claim names the figure that shows it)."""
        return f"figures/{name}.png"

    @property
    def notebooks(self) -> Path:
        """The folder of the executed section notebooks."""
        return self.root / "notebooks"

    def notebook(self, name: str) -> Path:
        """The executed notebook `name` (no suffix)."""
        return self.notebooks / f"{name}.ipynb"

    @property
    def notebook_times(self) -> Path:
        """Each notebook's time and probe runs."""
        return self.root / "notebook_times.csv"

    @property
    def run_record(self) -> Path:
        """The record of a finished batch."""
        return self.root / "reproduction.json"

    @property
    def phase_times(self) -> Path:
        """The folder of per-process phase times."""
        return self.root / "phase_times"

    @property
    def jobs(self) -> Path:
        """The folder of a distributed grid's logs."""
        return self.root / "jobs"
