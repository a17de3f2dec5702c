"""From task examples to model inputs and labels, and from a (PAPA-attached) backbone to probe features.

Features are the backbone's hidden states stacked as [examples, L+1, n, d] (for the LM task only the last one).
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch

from papa.core import distributed
from papa.core.errors import InputError
from papa.core.progress import tqdm
from papa.core.vocabulary import DEFAULT_BATCH_ORDER
from papa.method.architectures import backbone, is_causal
from papa.method.layout import encode
from papa.probing.feature_store import FeatureStore, StorePlan, plan_store, read_positions
from papa.probing.prefetch import Batch, stored_chunks, stored_steps
from papa.probing.probes import IGNORE_INDEX
from papa.tasks.data import Example
from papa.tasks.mlm_masking import mask_tokens
from papa.tasks.registry import TaskSpec, check_task_fits_model

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
                layout: str | None = None, causal: bool | None = None) -> EncodedTask:
    """Encode examples for `spec`'s kind, in `layout` (None: the model's default). Token tasks label one sub-token per
    word: an encoder's first, a decoder's last (the first slot that has seen the whole word); next-token tasks label
    each slot with the next real token."""
    if len(examples) == 0:
        raise InputError(f"task {spec.name!r}: no examples to encode (the dataset or subset is empty)")
    decoder = is_causal(model_type) if causal is None else causal
    check_task_fits_model(spec, decoder, model_type)
    encoded = partial(encode, tokenizer, max_length=max_length, layout=layout, model_type=model_type, causal=decoder)
    if spec.kind == "token":
        batch = encoded([list(e.words) for e in examples])
        labels = torch.full(batch.inputs["input_ids"].shape, IGNORE_INDEX, dtype=torch.long, device="cpu")
        for i, (example, word_ids) in enumerate(zip(examples, batch.word_ids)):
            for slot in _labelled_slots(word_ids, last=decoder):
                labels[i, slot] = example.label[word_ids[slot]]
    elif spec.predicts_next_token:
        batch = encoded([e.text for e in examples])
        ids, real = batch.inputs["input_ids"], batch.inputs["attention_mask"].bool()
        labels = torch.full(ids.shape, IGNORE_INDEX, dtype=torch.long, device="cpu")
        # slot t predicts the token in slot t+1 wherever that one is real (left-aligned: real slots come first)
        labels[:, :-1] = torch.where(real[:, 1:], ids[:, 1:], torch.full_like(ids[:, 1:], IGNORE_INDEX))
    elif spec.kind == "mlm":
        batch = encoded([e.text for e in examples], token_task=True)
        ids = batch.inputs["input_ids"]
        special = torch.isin(ids, torch.tensor(tokenizer.all_special_ids, device=ids.device))
        masked, labels = mask_tokens(ids, special, batch.inputs["attention_mask"], tokenizer.mask_token_id,
                                     len(tokenizer), torch.Generator().manual_seed(MLM_MASK_SEED))
        batch.inputs["input_ids"] = masked
    else:
        pairs = [e.text_pair for e in examples] if spec.kind == "pair" else None
        batch = encoded([e.text for e in examples], pairs)
        labels = torch.tensor([e.label for e in examples], dtype=torch.long, device="cpu")
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


@torch.no_grad()
def _fill(model, data: EncodedTask, store: FeatureStore, *, batch_size: int = 64, progress: bool = True,
          desc: str = "features") -> None:
    """Run the backbone once over `data` and keep what its probe reads in `store` (every process gathers all)."""
    spans = list(distributed.batch_spans(len(data), batch_size))
    bar = tqdm(spans, desc=desc, unit="batch", disable=not progress or not distributed.is_main(), leave=False)
    if distributed.world_size() > 1:
        block = torch.cat([padded_features(model, data, torch.arange(a, b, device="cpu")).cpu() for a, b in bar])
        store.put(0, distributed.gather_blocks(block))
    else:
        for start, end in bar:
            store.put(start, padded_features(model, data, torch.arange(start, end, device="cpu")))
    store.finish()


@torch.no_grad()
def padded_features(model, data: EncodedTask, idx: torch.Tensor, *, batch_size: int = 64) -> torch.Tensor:
    """The backbone's padded float32 features of examples `idx` of `data`, [len(idx), L+1, n, d], on its device."""
    device = next(model.parameters()).device
    return torch.cat([hidden_features(model, {k: v.to(device) for k, v in data.batch(idx[i:i + batch_size])[0]
                                              .items()}, data.last_layer_only).float()
                      for i in range(0, len(idx), batch_size)])


def fetched_steps(fetch, orders: Sequence[torch.Tensor], start: int, batch_size: int, n: int
                  ) -> Iterator[Iterable]:
    """Each step of one epoch from example `start` of `n` on: every order's batch as `fetch` gives it, lazily."""
    for a in range(start, n, batch_size):
        yield (fetch(order[a:a + batch_size]) for order in orders)


class FeatureSource:
    """Features for batches of one encoded split: a frozen backbone runs once, when the source is made, into a
    `FeatureStore` (`folder`, `store`, `dtype` and `batch_order` as `plan_store` takes them); a trainable one runs
    for every batch. `close` frees it."""

    def __init__(self, model, data: EncodedTask, *, trainable_backbone: bool, progress: bool = True,
                 desc: str = "features", folder: Path | None = None, store: str | None = None,
                 dtype: str = "float32", batch_order: str = DEFAULT_BATCH_ORDER):
        self.model, self.data = model, data
        self.device = next(model.parameters()).device
        self.trainable_backbone = trainable_backbone
        self.plan: StorePlan | None = None
        self.store: FeatureStore | None = None
        if trainable_backbone:
            return
        keep = read_positions(data.kind, data.inputs["attention_mask"], data.labels)
        layers, hidden = feature_layers(model, data.last_layer_only), model.config.hidden_size
        self.plan = plan_store(keep, layers, hidden, self.device, folder=folder, forced=store, desc=desc, dtype=dtype,
                               batch_order=batch_order)
        if progress and distributed.is_main():
            tqdm.write(self.plan.line(desc))
        if self.plan.stored:
            # the split's masks and labels, small, where the steps read them: a step indexes them on the device
            self._mask = data.inputs["attention_mask"].to(self.device)
            self._labels = data.labels.to(self.device)
            self.store = FeatureStore(self.plan, keep, layers, hidden, self.device, desc=desc)
            try:
                _fill(model, data, self.store, progress=progress, desc=desc)
            except BaseException:
                self.close()
                raise

    @property
    def cached(self) -> bool:
        """Whether the features are stored (the backbone ran once), rather than computed for every batch."""
        return self.store is not None

    @property
    def path(self) -> str:
        """The path the features take (`papa.probing.feature_store.StorePlan.path`; "backbone" when not stored)."""
        return self.plan.path if self.plan is not None else "backbone"

    @property
    def placement(self) -> str:
        """Where the features come from: a `FEATURE_STORES` name ("backbone" also when the backbone trains)."""
        return self.plan.placement if self.plan is not None else "backbone"

    def close(self) -> None:
        """Free the stored features (a disk store's file is removed)."""
        if self.store is not None:
            self.store.close()
            self.store = None

    def __call__(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(features, attention_mask, labels) of the examples `idx`, on the model's device."""
        return self.from_fetched(*self.fetch(idx))

    def fetch(self, idx: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """What `from_fetched` needs for the examples `idx`, on the model's device: the stored features, mask and
        labels, or the mask, labels and model inputs."""
        idx = idx.cpu()  # the split lives on the CPU
        inputs, labels = self.data.batch(idx)
        mask = inputs["attention_mask"].to(self.device)
        if self.store is not None:
            return self.store.get(idx, self.device), mask, labels.to(self.device)
        return (mask, labels.to(self.device), *(inputs[k].to(self.device) for k in self.data.inputs))

    def from_fetched(self, *batch: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(features, attention_mask, labels) from what `fetch` gave, running the backbone where nothing is stored."""
        if self.store is not None:
            return batch
        mask, labels, *values = batch
        with torch.set_grad_enabled(self.trainable_backbone and torch.is_grad_enabled()):
            feats = hidden_features(self.model, dict(zip(self.data.inputs, values)), self.data.last_layer_only)
        return feats, mask, labels

    def steps(self, orders: Sequence[torch.Tensor], start: int, batch_size: int) -> Iterator[Iterable[Batch]]:
        """Each step of one epoch from example `start` on: every order's (seed's) batch; from a store read a step
        ahead, else fetched only when taken (a trained backbone changes between two seeds' steps)."""
        if self.store is not None:
            return stored_steps(self.store, orders, start, batch_size, self.device, self._mask, self._labels)
        return fetched_steps(self.fetch, orders, start, batch_size, len(self.data))

    def check_chunks(self) -> None:
        """Refuse batch order ``chunks`` where the split is not stored (before any work: `chunks` reads lazily)."""
        if self.store is None:
            raise InputError("batch order 'chunks' reads a stored split, and this one is not stored (a trained "
                             "backbone, or PAPA_FEATURE_STORE=backbone): give another batch order")

    def chunks(self, size: int, seed: int) -> Iterator[Batch]:
        """The stored split in chunks of `size` consecutive examples, in an order `seed` draws, each one read."""
        self.check_chunks()
        n = len(self.data)
        starts = list(range(0, n, size))
        order = torch.randperm(len(starts), generator=torch.Generator().manual_seed(seed), device="cpu").tolist()
        spans = [(starts[i], min(starts[i] + size, n)) for i in order]
        yield from stored_chunks(self.store, spans, self.device, self._mask, self._labels)
