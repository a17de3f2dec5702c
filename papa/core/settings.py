"""The settings that travel together through a run: data folder, device and progress (`Resources`), and for a run
of grids its profile, folder and `force` as well (`RunSettings`)."""
from __future__ import annotations

import os
from dataclasses import dataclass

from papa.core.run_folder import RunFolder

__all__ = ["Resources", "RunSettings"]


@dataclass(frozen=True)
class Resources:
    """What any piece of work runs with: `data_dir` (None: $PAPA_DATA_DIR, else the Hugging Face hub), `device`
    and `progress` (progress bars and per-step lines)."""

    data_dir: str | os.PathLike | None = None
    device: str = "cpu"
    progress: bool = True


@dataclass(frozen=True)
class RunSettings:
    """A run's settings: `profile` (a name or a JSON profile file), `folder` (where it writes: a `RunFolder`, or a
    path made into one), `data_dir` (None: $PAPA_DATA_DIR, else the Hugging Face hub), `device`, `force` (recompute
    cached constants, rankings and runs) and `progress` (progress bars and per-grid lines)."""

    profile: str
    folder: RunFolder
    data_dir: str | os.PathLike | None = None
    device: str = "cpu"
    force: bool = False
    progress: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "folder", RunFolder.at(self.folder))

    @property
    def resources(self) -> Resources:
        """The data folder, device and progress of these settings, for work that takes no profile."""
        return Resources(self.data_dir, self.device, self.progress)

    def config_options(self) -> dict:
        """The fields a `papa.runs.session.GridConfig` takes from these settings."""
        data_dir = None if self.data_dir is None else os.fspath(self.data_dir)
        return {"profile": self.profile, "folder": self.folder, "data_dir": data_dir, "device": self.device,
                "force": self.force}
