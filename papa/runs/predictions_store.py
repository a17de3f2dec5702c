"""Where a grid keeps each run's per-example evaluation outcome: ``<out>/predictions/<run_id>.safetensors``.

A run's file is written before its row, so every row has one.
"""
from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from papa.core.artifacts import remove_stale_temporaries
from papa.core.errors import CorruptArtifactError, InputError
from papa.core.run_folder import RunFolder
from papa.probing.predictions import EvalPredictions, load_predictions, save_predictions


def predictions_path(folder: RunFolder, run_id: str) -> Path:
    """The file of run `run_id`'s predictions in the grid's run folder `folder`."""
    if not isinstance(run_id, str) or not run_id or Path(run_id).name != run_id or run_id.startswith("."):
        raise InputError(f"{run_id!r} is not a run id (the run_id column of results.csv)")
    return folder.predictions / f"{run_id}.safetensors"


def stores_predictions(folder: RunFolder | None) -> bool:
    """Whether the run folder `folder` stores its runs' predictions (then every row must have its file)."""
    return folder is not None and folder.predictions.is_dir()


def save_run_predictions(folder: RunFolder, run_id: str, predictions: EvalPredictions, *, task: str,
                         metric: str, **provenance: Any) -> Path:
    """Write run `run_id`'s predictions atomically in the run folder `folder`, with its task, metric and
    `provenance` in the header."""
    from papa import __version__

    created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    metadata = {"run_id": run_id, "task": task, "metric": metric, "created": created,
                "made_by": f"papa {__version__}", **provenance}
    path = predictions_path(folder, run_id)
    # Only this run's process writes its file: a temporary left beside it is a killed writer's.
    remove_stale_temporaries(path)
    return save_predictions(path, predictions, metadata)


def load_run_predictions(folder: RunFolder, run_ids: Iterable[str]) -> dict[str, EvalPredictions]:
    """run id -> the validated predictions of each run in `run_ids` under `folder`; a missing file raises
    `CorruptArtifactError`."""
    found: dict[str, EvalPredictions] = {}
    run_ids = list(dict.fromkeys(run_ids))  # each once, in order
    missing = [run_id for run_id in run_ids if not predictions_path(folder, run_id).is_file()]
    if missing:
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise CorruptArtifactError(f"{len(missing)} run(s) have no predictions file under "
                                   f"{folder.predictions}: {', '.join(missing[:5])}{more}; the folder is incomplete: "
                                   "copy the whole run folder, or re-run those runs with force.")
    for run_id in run_ids:
        path = predictions_path(folder, run_id)
        predictions = load_predictions(path)
        if predictions.metadata.get("run_id") != run_id:
            raise CorruptArtifactError(f"{path} holds the predictions of run {predictions.metadata.get('run_id')!r}, "
                                       f"not of {run_id!r}: delete it and re-run that run.")
        found[run_id] = predictions
    return found
