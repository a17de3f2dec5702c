"""From task examples to model inputs and labels, and from a (PAPA-attached) backbone to probe features.

Features are the backbone's hidden states stacked as [examples, L+1, n, d] (embeddings and every layer); for the
LM task, which a decoder's own LM head scores, only the last one, [examples, 1, n, d].
When nothing in the backbone trains (no λ, no trainable constants), `FeatureSource` computes them once per head
configuration and keeps them in memory for every epoch and seed, up to a byte budget per split
(``PAPA_FEATURE_CACHE_GB``; by default 60% of the memory available when the split is cached, 4 GiB where that
cannot be read); beyond it the backbone is re-run for every batch, with the same results, and a warning says so.
"""
from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from tqdm.auto import tqdm

from papa.core import distributed
from papa.core.errors import InputError
from papa.method.architectures import backbone, is_causal
from papa.method.layout import encode
from papa.probing.probes import IGNORE_INDEX
from papa.tasks.data import Example
from papa.tasks.mlm_masking import mask_tokens
from papa.tasks.registry import TaskSpec, check_task_fits_model

CACHE_BUDGET_ENV = "PAPA_FEATURE_CACHE_GB"
MLM_MASK_SEED = 0  # one fixed masking of the MLM data, so features can be cached and seeds compare like with like


@dataclass
class EncodedTask:
    """A task split in one input layout: model `inputs` [N, n] and `labels` ([N] or [N, n] with -100 = none)."""

    kind: str
    inputs: dict[str, torch.Tensor]
    labels: torch.Tensor
    truncated: int = 0

    def __len__(self) -> int:
        return self.labels.shape[0]

    @property
    def last_layer_only(self) -> bool:
        """Whether only the last hidden state is read (LM: the model's own head scores it)."""
        return self.kind == "lm"

    def batch(self, idx: torch.Tensor) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        return {k: v[idx] for k, v in self.inputs.items()}, self.labels[idx]


def encode_task(tokenizer, spec: TaskSpec, examples: Sequence[Example], *, max_length: int, model_type: str,
                layout: str | None = None, causal: bool | None = None, mlm_seed: int = MLM_MASK_SEED) -> EncodedTask:
    """Encode examples for `spec`'s kind, in `layout` (None: the model's default; `causal` as for
    `papa.method.layout.encode`).

    Token tasks label one sub-token per word: an encoder's first (as the official code), a decoder's last, the
    first slot of a causal model that has seen the whole word. LM labels each slot with the next real token.
    """
    if len(examples) == 0:
        raise InputError(f"task {spec.name!r}: no examples to encode (the dataset or subset is empty)")
    decoder = is_causal(model_type) if causal is None else causal
    check_task_fits_model(spec, decoder, model_type)
    if spec.kind == "token":
        batch = encode(tokenizer, [list(e.words) for e in examples], max_length=max_length, layout=layout,
                       model_type=model_type, causal=decoder)
        labels = torch.full(batch.inputs["input_ids"].shape, IGNORE_INDEX, dtype=torch.long)
        for i, (example, word_ids) in enumerate(zip(examples, batch.word_ids)):
            for slot in _labelled_slots(word_ids, last=decoder):
                labels[i, slot] = example.label[word_ids[slot]]
    elif spec.kind == "lm":
        batch = encode(tokenizer, [e.text for e in examples], max_length=max_length, layout=layout,
                       model_type=model_type, causal=decoder)
        ids, real = batch.inputs["input_ids"], batch.inputs["attention_mask"].bool()
        labels = torch.full(ids.shape, IGNORE_INDEX, dtype=torch.long)
        # slot t predicts the token in slot t+1 wherever that one is real (left-aligned: real slots come first)
        labels[:, :-1] = torch.where(real[:, 1:], ids[:, 1:], torch.full_like(ids[:, 1:], IGNORE_INDEX))
    elif spec.kind == "mlm":
        batch = encode(tokenizer, [e.text for e in examples], max_length=max_length, layout=layout,
                       model_type=model_type, causal=decoder, token_task=True)
        ids = batch.inputs["input_ids"]
        special = torch.isin(ids, torch.tensor(tokenizer.all_special_ids))
        masked, labels = mask_tokens(ids, special, batch.inputs["attention_mask"], tokenizer.mask_token_id,
                                     len(tokenizer), torch.Generator().manual_seed(mlm_seed))
        batch.inputs["input_ids"] = masked
    else:
        pairs = [e.text_pair for e in examples] if spec.kind == "pair" else None
        batch = encode(tokenizer, [e.text for e in examples], pairs, max_length=max_length, layout=layout,
                       model_type=model_type, causal=decoder)
        labels = torch.tensor([e.label for e in examples], dtype=torch.long)
    return EncodedTask(kind=spec.kind, inputs=batch.inputs, labels=labels, truncated=sum(batch.truncated))


def _labelled_slots(word_ids: Sequence[int | None], *, last: bool) -> list[int]:
    """The slot that carries each word's label: its first sub-token, or its last (`last`)."""
    slots: dict[int, int] = {}
    for slot, word in enumerate(word_ids):
        if word is not None and (last or word not in slots):
            slots[word] = slot
    return sorted(slots.values())


def hidden_features(model, inputs: dict[str, torch.Tensor], last_only: bool = False) -> torch.Tensor:
    """Run the backbone (never a decoder's vocabulary-sized head); return its hidden states stacked as
    [B, L+1, n, d], or only the last one as [B, 1, n, d]."""
    out = backbone(model)(**inputs, output_hidden_states=not last_only)
    if last_only:
        return out.last_hidden_state.unsqueeze(1)
    return torch.stack(out.hidden_states, dim=1)


def feature_layers(model, last_only: bool = False) -> int:
    """How many hidden states a feature tensor holds: L+1, or 1 (`last_only`)."""
    return 1 if last_only else model.config.num_hidden_layers + 1


def feature_bytes(model, n_examples: int, max_length: int, last_only: bool = False) -> int:
    """Bytes that cached float32 features of `n_examples` take."""
    return n_examples * feature_layers(model, last_only) * max_length * model.config.hidden_size * 4


def cache_budget_bytes() -> int:
    """Bytes one split's cached features may take: ``PAPA_FEATURE_CACHE_GB`` GiB, else 60% of the memory available
    now (so that a training split cached first leaves room for its evaluation split)."""
    if CACHE_BUDGET_ENV in os.environ:
        return int(float(os.environ[CACHE_BUDGET_ENV]) * 2**30)
    available = _available_memory()
    return 4 * 2**30 if available is None else int(0.6 * available)


def _available_memory() -> int | None:
    try:  # Linux: what can be allocated without swapping, page cache included
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows)
        return None


@torch.no_grad()
def compute_features(model, data: EncodedTask, *, batch_size: int = 64, progress: bool = True,
                     desc: str = "features") -> torch.Tensor:
    """All features of `data` on the CPU, [N, L+1, n, d] float32.

    Under `accelerate launch` each process computes a block of the batches and the blocks are gathered, so every
    process ends with all of them (papa.core.distributed).
    """
    device = next(model.parameters()).device
    spans = list(distributed.batch_spans(len(data), batch_size))
    rows = sum(end - start for start, end in spans)
    # Filled in place: concatenating batches would hold every feature twice at the end (gigabytes on whole sets).
    block = torch.empty(rows, feature_layers(model, data.last_layer_only), data.inputs["input_ids"].shape[1],
                        model.config.hidden_size)
    row = 0
    for start, end in tqdm(spans, desc=desc, unit="batch", disable=not progress or not distributed.is_main(),
                           leave=False):
        inputs, _ = data.batch(torch.arange(start, end))
        block[row:row + end - start] = hidden_features(model, {k: v.to(device) for k, v in inputs.items()},
                                                       data.last_layer_only).float().cpu()
        row += end - start
    return distributed.gather_blocks(block)


class FeatureSource:
    """Features for batches of one encoded split: from a cache when the backbone is frozen, else from the model.

    `cached` is decided once: True when nothing in the backbone trains and the features fit the byte budget.
    """

    def __init__(self, model, data: EncodedTask, *, trainable_backbone: bool, progress: bool = True,
                 desc: str = "features"):
        self.model, self.data = model, data
        self.device = next(model.parameters()).device
        size = feature_bytes(model, len(data), data.inputs["input_ids"].shape[1], data.last_layer_only)
        budget = cache_budget_bytes()
        self.cached = not trainable_backbone and size <= budget
        if not trainable_backbone and not self.cached and budget > 0:
            warnings.warn(f"{desc}: the features of {len(data)} examples take {size / 2**30:.1f} GiB, more than the "
                          f"cache budget of {budget / 2**30:.1f} GiB, so the backbone runs again for every batch of "
                          f"every epoch and seed (same results, much slower). Set {CACHE_BUDGET_ENV} higher if "
                          "memory allows, or use fewer examples.", stacklevel=2)
        self._features = compute_features(model, data, progress=progress, desc=desc) if self.cached else None
        self.trainable_backbone = trainable_backbone

    def __call__(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(features, attention_mask, labels) of the examples `idx`, on the model's device."""
        idx = idx.cpu()  # the split and the cache live on the CPU
        inputs, labels = self.data.batch(idx)
        mask = inputs["attention_mask"].to(self.device)
        if self._features is not None:
            feats = self._features[idx].to(self.device)
        else:
            with torch.set_grad_enabled(self.trainable_backbone and torch.is_grad_enabled()):
                feats = hidden_features(self.model, {k: v.to(self.device) for k, v in inputs.items()},
                                        self.data.last_layer_only)
        return feats, mask, labels.to(self.device)
