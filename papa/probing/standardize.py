"""Per-dimension standardisation of a probe's inputs, with statistics of the training features (an option).

An affine map the first linear layer could absorb: the same function class, better conditioned where a few massive
dimensions (a decoder's residual stream) would saturate the tanh units.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import save_file

from papa.core.artifacts import FORMAT, atomic_path, check_format, read_safetensors
from papa.core.errors import Arg, CorruptArtifactError, InputError
from papa.core.vocabulary import DECODER_PROBE_INPUTS, PAPER_PROBE_INPUTS, PROBE_INPUTS
from papa.probing.feature_store import read_positions
from papa.probing.probes import SentenceProbe, TokenProbe

__all__ = ["InputStatistics", "input_statistics", "load_input_statistics", "probe_inputs_for",
           "save_input_statistics"]

#: Added to each variance before the square root (BatchNorm's default): a constant dimension is not divided by zero.
VARIANCE_EPS = 1e-5


def probe_inputs_for(causal: bool, requested: str | None, *, trains_probe: bool = True) -> str:
    """What a run's probe reads: `requested`, else raw for an encoder and standardized for a causal LM; a task that
    trains no probe reads raw (standardized is refused)."""
    fix = Arg("probe_inputs", None)
    if requested is not None and requested not in PROBE_INPUTS:
        raise InputError(f"unknown probe inputs {requested!r}: choose one of {', '.join(PROBE_INPUTS)}, or give "
                         f"{fix} for the model's default", advice=[fix])
    if not trains_probe:
        if requested not in (None, PAPER_PROBE_INPUTS):
            raise InputError(f"probe inputs {requested!r}: this task trains no probe (the model's own head scores "
                             f"it), so there is nothing to standardise: give {fix}", advice=[fix])
        return PAPER_PROBE_INPUTS
    return requested or (DECODER_PROBE_INPUTS if causal else PAPER_PROBE_INPUTS)


@dataclass(frozen=True)
class InputStatistics:
    """Training mean and standard deviation of each (layer, dimension), [L+1, d] each, float32, and how many
    token vectors they were taken over."""

    mean: torch.Tensor
    std: torch.Tensor
    count: int

    def __post_init__(self):
        if self.mean.shape != self.std.shape or self.mean.dim() != 2:
            raise ValueError(f"mean and std must be [L+1, d] alike, got {tuple(self.mean.shape)} and "
                             f"{tuple(self.std.shape)}")
        if not bool(torch.isfinite(self.mean).all() and torch.isfinite(self.std).all() and (self.std > 0).all()):
            raise ValueError("standardisation statistics must be finite, with every standard deviation > 0")


@torch.no_grad()
def input_statistics(probe: SentenceProbe | TokenProbe, source, *, batch_size: int = 64) -> InputStatistics:
    """Per (layer, dimension) mean and std over `source`'s real tokens (sentence probe) or labelled tokens (token
    probe), accumulated in float64."""
    if not isinstance(probe, (SentenceProbe, TokenProbe)):
        raise TypeError(f"only sentence and token probes read standardised inputs, not {type(probe).__name__}")
    n = len(source.data)
    total = square = None
    count = 0
    for start in range(0, n, batch_size):
        feats, mask, labels = source(torch.arange(start, min(start + batch_size, n), device="cpu"))
        chosen = read_positions("sentence" if isinstance(probe, SentenceProbe) else "token", mask, labels)  # [b, n]
        vectors = feats.permute(0, 2, 1, 3)[chosen].double()  # [tokens, L+1, d]
        if total is None:
            total = torch.zeros(vectors.shape[1:], dtype=torch.float64, device=vectors.device)
            square = torch.zeros_like(total)
        total += vectors.sum(0)
        square += (vectors ** 2).sum(0)
        count += vectors.shape[0]
    if not count:
        raise ValueError("the training features have no token to take statistics over")
    mean = total / count
    var = (square / count - mean ** 2).clamp_min(0)
    return InputStatistics(mean.float().cpu(), (var + VARIANCE_EPS).sqrt().float().cpu(), count)


def save_input_statistics(path: str | os.PathLike, statistics: InputStatistics, metadata: dict) -> Path:
    """Write `statistics` atomically as safetensors, `metadata` and the count in the header; returns the path."""
    path = Path(path)
    header = {"papa_input_statistics": json.dumps({**metadata, "count": statistics.count, "format_version": FORMAT},
                                                  sort_keys=True)}
    with atomic_path(path) as tmp:
        save_file({"mean": statistics.mean.contiguous(), "std": statistics.std.contiguous()}, str(tmp),
                  metadata=header)
    return path


def load_input_statistics(path: str | os.PathLike) -> tuple[InputStatistics, dict]:
    """Read and validate what `save_input_statistics` wrote: the statistics and their metadata."""
    header, tensors = read_safetensors(path, fix="delete it and re-run the grid point")
    if "papa_input_statistics" not in header or set(tensors) != {"mean", "std"}:
        raise CorruptArtifactError(f"{path} is not a papa input-statistics file (no metadata, or not exactly the "
                                   "tensors mean and std): delete it and re-run the grid point.")
    try:
        metadata = json.loads(header["papa_input_statistics"])
        statistics = InputStatistics(tensors["mean"].float(), tensors["std"].float(), int(metadata["count"]))
    except (ValueError, TypeError, KeyError) as exc:
        raise CorruptArtifactError(f"{path}: invalid input statistics ({exc}): delete it and re-run the grid "
                                   "point.") from exc
    check_format(metadata.pop("format_version", None), path, "probe-input statistics file")
    return statistics, metadata
