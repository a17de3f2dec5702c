"""What travels together through a run of grids: its profile, its folder, the data, the device, whether cached work
is recomputed and whether progress is shown, as one frozen object (a notebook's `papa.paper.sections.setup`)."""
from __future__ import annotations

import os
from dataclasses import dataclass

from papa.core.run_folder import RunFolder

__all__ = ["RunSettings"]


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

    def config_options(self) -> dict:
        """The fields a `papa.runs.session.GridConfig` takes from these settings (its folder as a string)."""
        data_dir = None if self.data_dir is None else os.fspath(self.data_dir)
        return {"profile": self.profile, "out_dir": str(self.folder), "data_dir": data_dir, "device": self.device,
                "force": self.force}
