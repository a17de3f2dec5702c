"""Per-dimension standardisation of a probe's inputs, with statistics of the training features (an option).

Each (layer, dimension) of the hidden states is shifted by its training mean and divided by its training standard
deviation before the probe's MLP reads it. For a token probe that is an affine map of the MLP's input; for a
sentence probe the statistics are taken over real tokens and the pooling weights sum to 1 over them, so the pooled
vector is shifted and scaled the same way. Either way the first linear layer could absorb the map: the probe
represents the same functions as the paper's, and only the conditioning of its training changes. It matters where
a few input-independent dimensions are orders of magnitude larger than the rest (a decoder's un-normalised
residual stream), which would otherwise saturate the MLP's tanh units from the first step.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from papa.probing.probes import IGNORE_INDEX, SentenceProbe, TokenProbe

__all__ = ["InputStatistics", "input_statistics"]

#: Added to each variance before the square root, as BatchNorm's default, so that a dimension constant over the
#: training features is not divided by zero.
VARIANCE_EPS = 1e-5


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
    """Per (layer, dimension) mean and standard deviation over `source` (the training features): over every real
    token for a sentence probe (what its pooling averages), over the labelled tokens for a token probe (what it
    classifies). Accumulated in float64."""
    if not isinstance(probe, (SentenceProbe, TokenProbe)):
        raise TypeError(f"only sentence and token probes read standardised inputs, not {type(probe).__name__}")
    n = len(source.data)
    total = square = None
    count = 0
    for start in range(0, n, batch_size):
        feats, mask, labels = source(torch.arange(start, min(start + batch_size, n)))
        chosen = mask.bool() if isinstance(probe, SentenceProbe) else labels != IGNORE_INDEX  # [b, n]
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
