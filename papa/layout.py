"""The PAPA input layout (paper, Appendix A): every input padded to a fixed length with the final separator last.

Single sentences::

    [CLS] w1 … wk [PAD] … [PAD] [SEP]                      ([SEP] in slot n-1)

Pairs (the separator between the sentences ends in slot n/2, the second sentence starts right after it)::

    [CLS] a1 … ak [PAD] … [SEP] | b1 … bm [PAD] … [SEP]     (middle [SEP] in slot n/2, final [SEP] in slot n-1)

RoBERTa's double separator ``</s></s>`` occupies slots n/2-1 and n/2. Special tokens and token types come from the
tokenizer itself (a template learnt by encoding a dummy pair), never from hard-coded ids. Each half is trimmed at
its end to fit; `LayoutBatch.truncated` says which examples were.

Position ids. A constant matrix is indexed by *slot*, but the model should see each real token at the position it
has in the ordinary layout, so that the unmodified model ("keep" everywhere) computes exactly what it computes
on ordinary inputs. Hence:

* BERT, ELECTRA and DeBERTa with absolute position embeddings get ``position_ids = cumsum(attention_mask) - 1``
  (the [SEP] after the padding gets the position right after the last word); a test checks that BERT's outputs
  at real tokens then equal those of the ordinary layout.
* RoBERTa derives positions from non-pad tokens itself (the same cumulative count), so none are passed.
* DeBERTa's relative positions always use slot indices inside the model; they cannot be changed without forking
  the modeling code, so for DeBERTa the final [SEP] is seen at its slot distance (as in the paper's setup).

``layout="standard"`` gives the ordinary right-padded layout with the same truncation, for comparisons.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

LAYOUTS = ("sep_last", "standard")
_NO_POSITION_IDS = {"roberta"}  # derives position ids from the padding itself


@dataclass(frozen=True)
class _Template:
    prefix: list[int]
    middle: list[int]
    suffix: list[int]
    prefix_types: list[int]
    middle_types: list[int]
    suffix_types: list[int]
    type_a: int
    type_b: int


@dataclass
class LayoutBatch:
    """A batch in the PAPA layout: ``model(**batch.inputs)``; `word_ids` maps slots to words for token tasks."""

    inputs: dict[str, torch.Tensor]
    word_ids: list[list[int | None]] | None
    truncated: list[bool]


def _template(tokenizer, pair: bool) -> _Template:
    # Learn where the tokenizer puts its special tokens (and their token types) from a dummy input.
    enc = tokenizer("a", "b") if pair else tokenizer("a")
    ids, seq = enc["input_ids"], enc.sequence_ids()
    types = enc.get("token_type_ids") or [0] * len(ids)
    first_a, last_a = seq.index(0), len(seq) - 1 - seq[::-1].index(0)
    first_b, last_b = (seq.index(1), len(seq) - 1 - seq[::-1].index(1)) if pair else (last_a + 1, last_a)
    return _Template(
        prefix=ids[:first_a], middle=ids[last_a + 1:first_b], suffix=ids[last_b + 1:],
        prefix_types=types[:first_a], middle_types=types[last_a + 1:first_b], suffix_types=types[last_b + 1:],
        type_a=types[first_a], type_b=types[first_b] if pair else types[first_a],
    )


def _content(tokenizer, text, pretokenized: bool) -> tuple[list[int], list[int | None]]:
    enc = tokenizer(list(text) if pretokenized else text, add_special_tokens=False, is_split_into_words=pretokenized)
    ids = enc["input_ids"]
    return ids, (enc.word_ids() if pretokenized else [None] * len(ids))


def encode(tokenizer, texts: Sequence[str] | Sequence[Sequence[str]], text_pairs: Sequence[str] | None = None, *,
           max_length: int, layout: str = "sep_last", model_type: str | None = None) -> LayoutBatch:
    """Encode single texts (or word lists, for token tasks) or text pairs into a fixed-length batch.

    `model_type` (a transformers ``config.model_type``) decides whether ``position_ids`` are added (see module doc).
    """
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; choose one of {LAYOUTS}")
    if len(texts) == 0:
        raise ValueError("encode() got no texts: the batch is empty")
    if text_pairs is not None and len(text_pairs) != len(texts):
        raise ValueError(f"{len(texts)} texts but {len(text_pairs)} text pairs: they must pair up one to one")
    pretokenized = not isinstance(texts[0], str)
    if pretokenized and text_pairs is not None:
        raise ValueError("word-list inputs (token tasks) cannot be paired")
    t = _template(tokenizer, pair=text_pairs is not None)
    n = max_length
    pad_id = tokenizer.pad_token_id
    if pad_id is None:
        raise ValueError("the tokenizer has no pad token; PAPA pads every input to a fixed length")
    if text_pairs is None:
        room = n - len(t.prefix) - len(t.suffix)
    else:
        half = n // 2
        room_a = half + 1 - len(t.prefix) - len(t.middle)
        room_b = n - (half + 1) - len(t.suffix)
        room = min(room_a, room_b)
    if room < 1:
        raise ValueError(f"max_length={n} leaves no room for text after the special tokens; use a longer length")

    all_ids, all_mask, all_types, all_words, truncated = [], [], [], [], []
    for i, text in enumerate(texts):
        a, wa = _content(tokenizer, text, pretokenized)
        if text_pairs is None:
            cut = len(a) > room
            a, wa = a[:room], wa[:room]
            body = [*t.prefix, *a]
            body_types = [*t.prefix_types, *[t.type_a] * len(a)]
            body_words = [None] * len(t.prefix) + wa
            ids, types, words, mask = _place(body, body_types, body_words, t.suffix, t.suffix_types, n, pad_id, layout)
        else:
            b, wb = _content(tokenizer, text_pairs[i], False)
            cut = len(a) > room_a or len(b) > room_b
            a, b = a[:room_a], b[:room_b]
            first = [*t.prefix, *a]
            first_types = [*t.prefix_types, *[t.type_a] * len(a)]
            if layout == "sep_last":
                ids1, types1, _, mask1 = _place(first, first_types, [None] * len(first), t.middle, t.middle_types,
                                                half + 1, pad_id, layout)
                ids2, types2, _, mask2 = _place(b, [t.type_b] * len(b), [None] * len(b), t.suffix, t.suffix_types,
                                                n - half - 1, pad_id, layout)
                ids, types, mask = ids1 + ids2, types1 + types2, mask1 + mask2
            else:
                body = [*first, *t.middle, *b]
                body_types = [*first_types, *t.middle_types, *[t.type_b] * len(b)]
                ids, types, _, mask = _place(body, body_types, [None] * len(body), t.suffix, t.suffix_types, n,
                                             pad_id, layout)
            words = [None] * n
        all_ids.append(ids)
        all_mask.append(mask)
        all_types.append(types)
        all_words.append(words)
        truncated.append(cut)

    attention_mask = torch.tensor(all_mask, dtype=torch.long)
    inputs = {"input_ids": torch.tensor(all_ids, dtype=torch.long), "attention_mask": attention_mask}
    if "token_type_ids" in getattr(tokenizer, "model_input_names", ["token_type_ids"]):
        inputs["token_type_ids"] = torch.tensor(all_types, dtype=torch.long)
    if model_type is not None and model_type not in _NO_POSITION_IDS:
        inputs["position_ids"] = position_ids(attention_mask)
    return LayoutBatch(inputs=inputs, word_ids=all_words if pretokenized else None, truncated=truncated)


def _place(body, body_types, body_words, tail, tail_types, length, pad_id, layout):
    """Fill `length` slots with body + tail; pads go between them (sep_last) or after them (standard)."""
    pads = length - len(body) - len(tail)
    if layout == "sep_last":
        ids = [*body, *[pad_id] * pads, *tail]
        types = [*body_types, *[0] * pads, *tail_types]
        words = [*body_words, *[None] * (pads + len(tail))]
        mask = [1] * len(body) + [0] * pads + [1] * len(tail)
    else:
        ids = [*body, *tail, *[pad_id] * pads]
        types = [*body_types, *tail_types, *[0] * pads]
        words = [*body_words, *[None] * (len(tail) + pads)]
        mask = [1] * (len(body) + len(tail)) + [0] * pads
    return ids, types, words, mask


def position_ids(attention_mask: torch.Tensor) -> torch.Tensor:
    """Each real token's position in the ordinary layout: cumsum(mask) - 1 (pads get the previous position)."""
    return (attention_mask.long().cumsum(-1) - 1).clamp_min(0)
