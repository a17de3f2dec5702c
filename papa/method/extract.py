"""Extracting average constant matrices from an unlabeled corpus (paper 3.1)."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import torch

from papa.core import distributed
from papa.core.artifacts import fingerprint_texts
from papa.core.errors import Arg, InputError
from papa.core.progress import tqdm
from papa.core.vocabulary import REPRODUCTION_LAYOUT
from papa.method.architectures import architecture, backbone, is_causal
from papa.method.constants import ConstantMatrices
from papa.method.controller import attached
from papa.method.layout import encode, layout_for


def max_positions(config) -> int | None:
    """How many positions a model's absolute position embeddings cover (None: relative positions only)."""
    return architecture(config.model_type).max_positions(config)


def check_length(config, max_length: int) -> None:
    """Refuse a `max_length` beyond the positions the model of `config` has (its absolute position embeddings)."""
    limit = max_positions(config)
    if limit is not None and max_length > limit:
        given, most = Arg("max_length", max_length), Arg("max_length", limit)
        raise InputError(f"{given} is longer than the {limit} positions the model has: extract with {most} or less.",
                         advice=(given, most))


def tokenizer_name(tokenizer, model_name: str | None = None) -> str:
    """The tokenizer as recorded in metadata: the model's name when known, never a local directory's path."""
    name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
    return model_name if model_name and Path(name).is_absolute() else name


@runtime_checkable
class NamedCorpus(Protocol):
    """Texts (or word lists), optional second texts, and the name the constants' metadata records."""

    name: str
    texts: Sequence
    pairs: Sequence[str] | None


def extract_constants(model, tokenizer, corpus: NamedCorpus | Sequence[str] | Sequence[Sequence[str]], *,
                      max_length: int, batch_size: int = 32, layout: str | None = None,
                      model_name: str | None = None, token_task: bool = False,
                      progress: bool = True) -> ConstantMatrices:
    """Average every head's attention over `corpus` (a `NamedCorpus`, or plain texts or word lists), encoded at
    `max_length` in `layout` (None: the model's default); `token_task` encodes the texts as a token-level task's. Heads
    of an already attached model keep their modes."""
    if isinstance(corpus, NamedCorpus):
        texts, text_pairs, name = corpus.texts, corpus.pairs, corpus.name
    else:
        texts, text_pairs, name = corpus, None, ""
    if len(texts) == 0:
        raise InputError("the corpus is empty: there is nothing to average (check the task, split or file)")
    causal = is_causal(model)
    layout = layout_for(causal, layout, REPRODUCTION_LAYOUT)
    check_length(model.config, max_length)
    device = next(model.parameters()).device
    hidden_model = backbone(model)
    truncated = 0
    with attached(model, model_name=model_name) as controller:
        # Under `accelerate launch` each process takes a block of the batches; the statistics are summed below.
        with controller.capturing(max_length) as stats, torch.no_grad():
            for start, end in tqdm(distributed.batch_spans(len(texts), batch_size), desc="extract constants",
                                   unit="batch", disable=not progress or not distributed.is_main()):
                batch = encode(tokenizer, texts[start:end], None if text_pairs is None else text_pairs[start:end],
                               max_length=max_length, layout=layout, model_type=model.config.model_type,
                               causal=causal, token_task=token_task)
                truncated += sum(batch.truncated)
                # the backbone only: a causal LM's vocabulary projection would be computed and thrown away
                hidden_model(**{k: v.to(device) for k, v in batch.inputs.items()})
    if distributed.launched():
        stats.sums, stats.counts = distributed.sum_across(stats.sums), distributed.sum_across(stats.counts)
        seen = distributed.sum_across(torch.tensor([stats.num_examples, truncated], dtype=torch.long))
        stats.num_examples, truncated = int(seen[0]), int(seen[1])
    flat = list(texts) if text_pairs is None else [f"{a}\t{b}" for a, b in zip(texts, text_pairs)]
    flat = [t if isinstance(t, str) else " ".join(t) for t in flat]
    preprocessing = (f"papa.method.layout.encode(layout={layout}, max_length={max_length}"
                     f"{', token_task=True' if token_task else ''}); "
                     f"tokenizer={tokenizer_name(tokenizer, model_name)}; "
                     f"truncated={truncated}/{len(texts)}")
    return stats.to_constants(controller.signature, layout=layout, corpus=name,
                              corpus_fingerprint=fingerprint_texts(flat), preprocessing=preprocessing,
                              pairs=text_pairs is not None)
