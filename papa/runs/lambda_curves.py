"""λ's learning curve, saved beside its ranking: λ of every head after every `CURVE_EVERY` steps and after the last.

A curve is one safetensors file, ``rankings/curves/<ranking file name>`` (``steps``, ``seconds``, ``lambdas``
[records, L, H]), its header under ``papa_lambda_curve``.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from papa.core.artifacts import FORMAT, atomic_path, check_format, read_safetensors
from papa.core.errors import CorruptArtifactError
from papa.probing.ranking import LambdaTrace

CURVE_EVERY = 100  # optimizer steps between records: about 85 records for SST-2 at the paper's 8,420 steps
CURVE_HEADER_KEY = "papa_lambda_curve"


def curve_path(ranking_path: str | os.PathLike) -> Path:
    """Where the learning curve of the ranking saved at `ranking_path` lies."""
    ranking_path = Path(ranking_path)
    return ranking_path.parent / "curves" / ranking_path.name


def checkpoint_path(ranking_path: str | os.PathLike) -> Path:
    """Where the λ learning of the ranking to be saved at `ranking_path` checkpoints itself (``checkpoints/``)."""
    ranking_path = Path(ranking_path)
    return ranking_path.parent.parent / "checkpoints" / ranking_path.name


def save_curve(path: str | os.PathLike, trace: LambdaTrace, ranking: str) -> Path:
    """Write `trace` (λ of the ranking file named `ranking`) atomically at `path`."""
    if not trace.steps:
        raise ValueError("the trace holds no record: learn λ with a LambdaTrace before saving its curve")
    header = {"format_version": FORMAT, "ranking": ranking, "every": trace.every}
    from safetensors.torch import save_file

    with atomic_path(path) as tmp:
        save_file({k: v.contiguous() for k, v in trace.to_tensors().items()}, str(tmp),
                  metadata={CURVE_HEADER_KEY: json.dumps(header, sort_keys=True)})
    return Path(path)


def load_curve(path: str | os.PathLike) -> tuple[LambdaTrace, dict]:
    """(the recorded trace, the header) of the curve saved at `path`, checked to be whole."""
    fix = "learn the ranking again (papa rank --force) to record it"
    header, tensors = read_safetensors(path, fix=fix)
    try:
        head = json.loads(header[CURVE_HEADER_KEY])
        steps, seconds, lambdas = tensors["steps"], tensors["seconds"], tensors["lambdas"]
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptArtifactError(f"{path} is not a papa λ learning curve ({exc!r}): {fix}.") from exc
    check_format(head.get("format_version"), path, "λ learning curve")
    if not (len(steps) == len(seconds) == len(lambdas) > 0) or lambdas.dim() != 3:
        raise CorruptArtifactError(f"{path}: {len(steps)} steps, {len(seconds)} times and λ of shape "
                                   f"{tuple(lambdas.shape)} do not make one record per step: {fix}.")
    if (steps[1:] <= steps[:-1]).any():
        raise CorruptArtifactError(f"{path}: the recorded steps do not increase: {fix}.")
    trace = LambdaTrace(every=head["every"])
    trace.load_tensors(tensors)
    return trace, head
