"""How sure Fig. 4's pattern shares are: a block-bootstrap interval over the corpus sentences the constants averaged.

The corpus is cut, in order, into `blocks` contiguous blocks whose attention sums and counts are extracted once; each
draw weighs the blocks multinomially, averages the weighted sums as the extraction does and reads the shares again.
The interval is the percentile interval of the draws; the value is the whole corpus's. Blocks stand for sentences
because they need one extraction pass in all; adjacent sentences kept together can only widen the interval.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Real

import numpy as np
import pandas as pd
import torch

from papa.core.errors import InputError
from papa.core.progress import tqdm
from papa.method.capture import entry_averages
from papa.method.controller import attached
from papa.method.extract import extract_constants
from papa.paper.patterns import head_patterns_of, pattern_summary
from papa.tasks.corpus import Corpus

#: The summary's entries that are not shares of heads.
_NOT_SHARES = ("heads",)
#: Entries of [S, L, H, n, n] recombined at once: S draws a chunk, the chunk's float64 temporaries ~32 MB each.
_CHUNK_ENTRIES = 4_000_000


def block_spans(size: int, blocks: int) -> list[tuple[int, int]]:
    """[start, end) of `blocks` contiguous blocks covering range(`size`), sizes differing by at most one."""
    blocks = min(blocks, size)
    edges = [round(i * size / blocks) for i in range(blocks + 1)]
    return list(zip(edges[:-1], edges[1:]))


def _check(texts: Sequence, text_pairs: Sequence | None, blocks: int, resamples: int, level: float,
           special: Sequence[int], max_length: int) -> None:
    if len(texts) == 0:
        raise InputError("texts is empty: there is no corpus to resample (check the task, split or file)")
    if text_pairs is not None and len(text_pairs) != len(texts):
        raise InputError(f"text_pairs holds {len(text_pairs)} texts but texts holds {len(texts)}: give one pair "
                         "per text")
    if isinstance(blocks, bool) or not isinstance(blocks, int) or blocks < 2:
        raise InputError(f"blocks must be a whole number of at least 2, got {blocks!r}: a bootstrap over one block "
                         "draws that block every time")
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise InputError(f"resamples must be a whole number of at least 1, got {resamples!r}")
    if isinstance(level, bool) or not isinstance(level, Real) or not 0 < level < 1:
        raise InputError(f"level must lie strictly between 0 and 1 (e.g. 0.95), got {level!r}")
    if len(texts) < 2:
        raise InputError("texts holds a single sentence: a bootstrap needs at least 2 to resample")
    bad = [s for s in special if not 0 <= s < max_length]
    if bad:
        raise InputError(f"special slots {bad} lie outside max_length {max_length}")


def block_statistics(model, tokenizer, corpus: Corpus, spans: Sequence[tuple[int, int]], *, max_length: int,
                     layout: str | None, token_task: bool, progress: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Each block's attention sums [B, L, H, n, n] and counts [B, n, n] in float64, one extraction per span."""
    sums, counts = [], []
    # attached once for all blocks: attaching fingerprints the model's weights, which would be redone per block
    with attached(model):
        for start, end in tqdm(spans, desc="pattern intervals: blocks", unit="block", disable=not progress):
            pairs = None if corpus.pairs is None else corpus.pairs[start:end]
            block = extract_constants(model, tokenizer, Corpus(corpus.name, corpus.texts[start:end], pairs),
                                      max_length=max_length, layout=layout, token_task=token_task, progress=False)
            count = block.counts.to(torch.float64)
            # an average times its count is the sum again, to float32 rounding of the average
            sums.append(block.matrices.to(torch.float64) * count)
            counts.append(count)
    return torch.stack(sums), torch.stack(counts)


@dataclass(frozen=True)
class Bootstrap:
    """How the corpus is resampled: `blocks` blocks, `resamples` draws seeded by `seed`, an interval at `level`."""

    blocks: int = 50
    resamples: int = 1000
    level: float = 0.95
    seed: int = 0


def pattern_share_intervals(model, tokenizer, corpus: Corpus, *, max_length: int, special: Sequence[int],
                            layout: str | None = None, token_task: bool = False, bootstrap: Bootstrap = Bootstrap(),
                            progress: bool = True) -> pd.DataFrame:
    """Fig. 4's pattern shares of `corpus`'s average constants with block-bootstrap intervals: one row per
    `pattern_summary` share (index ``share``), columns ``value``, ``low``, ``high``, ``heads``, ``blocks``,
    ``sentences``, ``resamples`` and ``level`` (also in ``attrs``, with ``seed`` and ``corpus``)."""
    resamples, level = bootstrap.resamples, bootstrap.level
    _check(corpus.texts, corpus.pairs, bootstrap.blocks, resamples, level, special, max_length)
    spans = block_spans(len(corpus.texts), bootstrap.blocks)
    sums, counts = block_statistics(model, tokenizer, corpus, spans, max_length=max_length, layout=layout,
                                    token_task=token_task, progress=progress)
    B, L, H, n, _ = sums.shape
    draws = np.random.default_rng(bootstrap.seed).multinomial(B, np.full(B, 1.0 / B), size=resamples)
    # the whole corpus first (every block once), then the draws: one path for both
    weights = torch.from_numpy(np.vstack([np.ones((1, B)), draws])).to(torch.float64)
    step = max(1, _CHUNK_ENTRIES // sums[0].numel())
    shares = pd.concat([_shares(weights[i:i + step], sums, counts, special)
                        for i in tqdm(range(0, len(weights), step), desc="pattern intervals: resamples",
                                      unit="chunk", disable=not progress)], ignore_index=True)
    shares = shares.drop(columns=list(_NOT_SHARES))
    value, table = shares.iloc[0], shares.iloc[1:]
    tail = (1 - level) / 2
    out = pd.DataFrame({"value": value.astype(float), "low": table.quantile(tail).astype(float),
                        "high": table.quantile(1 - tail).astype(float)})
    out.index.name = "share"
    about = {"heads": L * H, "blocks": B, "sentences": len(corpus.texts), "resamples": resamples, "level": level}
    out = out.assign(**about)
    out.attrs.update(about, seed=bootstrap.seed, corpus=corpus.name)
    return out


def _shares(weights: torch.Tensor, sums: torch.Tensor, counts: torch.Tensor, special: Sequence[int]) -> pd.DataFrame:
    """`pattern_summary` of the constants each row of `weights` [S, B] makes of the blocks' statistics."""
    S, (B, L, H, n, _) = len(weights), sums.shape
    total = (weights @ sums.reshape(B, -1)).reshape(S, L, H, n, n)
    seen = (weights @ counts.reshape(B, -1)).reshape(S, n, n)
    # float32 as the extraction stores it, so the whole corpus's row reads as its extracted constants
    matrices = entry_averages(total, seen[:, None, None]).float()
    return pattern_summary(head_patterns_of(matrices, seen, special), by="set")
