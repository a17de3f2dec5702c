"""Where a grid keeps each run's per-example evaluation outcome: ``<out>/predictions/<run_id>.safetensors``.

A run's predictions (`papa.probing.predictions.EvalPredictions`) are written before its row of ``results.csv``, so
every row written since they are stored has them; rows of older runs do not, and `load_run_predictions` names those
runs, so that a caller falls back to statistics over seeds alone for them and can say so.
"""
from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from papa.core.artifacts import remove_stale_temporaries
from papa.core.errors import CorruptArtifactError, InputError
from papa.probing.predictions import EvalPredictions, load_predictions, save_predictions

PREDICTIONS_DIR = "predictions"


def predictions_path(out_dir: str | os.PathLike, run_id: str) -> Path:
    """The file of run `run_id`'s predictions under the grid folder `out_dir`."""
    if not isinstance(run_id, str) or not run_id or Path(run_id).name != run_id or run_id.startswith("."):
        raise InputError(f"{run_id!r} is not a run id (the run_id column of results.csv)")
    return Path(out_dir) / PREDICTIONS_DIR / f"{run_id}.safetensors"


def save_run_predictions(out_dir: str | os.PathLike, run_id: str, predictions: EvalPredictions, *, task: str,
                         metric: str, **provenance: Any) -> Path:
    """Write run `run_id`'s predictions atomically under `out_dir`, with its task, metric and any further
    `provenance` (value, model, seed, ...) in the header, and when and by what papa they were made."""
    from papa import __version__

    created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    metadata = {"run_id": run_id, "task": task, "metric": metric, "created": created,
                "made_by": f"papa {__version__}", **provenance}
    path = predictions_path(out_dir, run_id)
    # Only the process running a run writes its file, so a temporary folder of this run was left by a writer killed
    # mid-write: the resumed run removes it.
    remove_stale_temporaries(path)
    return save_predictions(path, predictions, metadata)


class RunPredictions(dict):
    """run id -> `EvalPredictions` of the runs that have them; `missing` lists, in the order asked, the run ids
    that have no predictions file (runs made before predictions were stored)."""

    def __init__(self, found: dict[str, EvalPredictions], missing: Iterable[str]):
        super().__init__(found)
        self.missing: tuple[str, ...] = tuple(missing)

    def missing_note(self) -> str:
        """A sentence saying which runs have no predictions ("" when every run has them)."""
        if not self.missing:
            return ""
        return (f"{len(self.missing)} of {len(self) + len(self.missing)} runs have no per-example predictions "
                f"(made before they were stored): {_listed(self.missing)}; their uncertainty comes from the seeds "
                "alone.")


def _listed(run_ids: tuple[str, ...], shown: int = 5) -> str:
    more = f" and {len(run_ids) - shown} more" if len(run_ids) > shown else ""
    return ", ".join(run_ids[:shown]) + more


def load_run_predictions(out_dir: str | os.PathLike, run_ids: Iterable[str], *,
                         strict: bool = False) -> RunPredictions:
    """The predictions of each run in `run_ids` under the grid folder `out_dir` (each file validated, and checked to
    be that run's). Runs without a file are listed in the result's `missing` (``strict``: a FileNotFoundError
    naming them); a file that is there but unreadable or another run's is a `CorruptArtifactError` either way."""
    found: dict[str, EvalPredictions] = {}
    missing: list[str] = []
    for run_id in dict.fromkeys(run_ids):  # each once, in order
        path = predictions_path(out_dir, run_id)
        if not path.is_file():
            missing.append(run_id)
            continue
        predictions = load_predictions(path)
        if predictions.metadata.get("run_id") != run_id:
            raise CorruptArtifactError(f"{path} holds the predictions of run {predictions.metadata.get('run_id')!r}, "
                                       f"not of {run_id!r}: delete it and re-run that run.")
        found[run_id] = predictions
    result = RunPredictions(found, missing)
    if strict and missing:
        raise FileNotFoundError(f"{len(missing)} of {len(result) + len(missing)} runs have no predictions file under "
                                f"{Path(out_dir) / PREDICTIONS_DIR} (made before predictions were stored, or "
                                f"elsewhere): {_listed(result.missing)}; re-run them with force to store them.")
    return result
