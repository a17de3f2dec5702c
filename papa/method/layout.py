"""The PAPA input layout (paper, Appendix A): every input padded to a fixed length with the final separator last.

Single sentences and pairs (``sep_last``)::

    [CLS] w1 … wk [PAD] … [PAD] [SEP]                      ([SEP] in slot n-1)
    [CLS] a1 … ak [PAD] … [SEP] | b1 … bm [PAD] … [SEP]     (middle [SEP] in slot n/2, final [SEP] in slot n-1)

Special tokens and token types come from the tokenizer (a template learnt from a dummy pair); each half is trimmed
at its end to fit (`LayoutBatch.truncated`). Position ids follow the registry entry's ``positions``: ``ids`` passes
``cumsum(attention_mask) - 1`` so that an unmodified model sees each real token at its ordinary position;
``from_padding`` (RoBERTa) numbers real tokens itself. DeBERTa's relative positions stay slot distances.

``standard`` is the ordinary right-padded layout. Causal LMs always use it (`DECODER_LAYOUT`): left-aligned, slot
= position, pairs joined by a newline, words with a leading space, labelled at their last sub-token.

``official`` (`REPRODUCTION_LAYOUT`) reproduces the authors' released scripts: the ordinary encoding rearranged so
that the first segment keeps at most n/2 slots, the rest starts at slot n/2 and the last separator sits in slot
n-1 (``run_papa_glue.py``); for token tasks the sentence's separator becomes padding and slot n-1 the separator
(``run_papa_ner.py``). No position ids are passed and token type ids are not moved, as in those scripts.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import copy
import json
import weakref
from typing import TYPE_CHECKING

from papa.core.errors import Arg, InputError, check_one_of
from papa.core.vocabulary import DECODER_LAYOUT, LAYOUTS, REPRODUCTION_LAYOUT

if TYPE_CHECKING:  # torch is imported where tensors are made, so the layout names cost nothing to import
    import torch

#: Layouts whose last slot always holds the final separator (constants only fit inputs of their own length).
SEPARATOR_LAST = ("official", "sep_last")


def _architecture(model_type: str | None):
    from papa.method.architectures import architecture  # here: the registry imports torch and transformers

    return architecture(model_type)


def layout_for(causal: bool, requested: str | None, default: str) -> str:
    """The layout a run uses: `requested`, else `default`; a decoder gets `DECODER_LAYOUT` (another is refused)."""
    if requested is not None:
        check_layout(requested)
    if not causal:
        return check_layout(requested or default)
    if requested is not None and requested != DECODER_LAYOUT:
        fix = Arg("layout", DECODER_LAYOUT)
        raise InputError(f"layout {requested!r} moves a final separator, which causal LMs do not have: decoders read "
                         f"left-aligned inputs: pass {fix}, the default for a causal LM", advice=[fix])
    return DECODER_LAYOUT


def positions_from_padding(model_type: str | None) -> bool:
    """Whether the model numbers real tokens itself (RoBERTa), so the layout passes no position ids."""
    return _architecture(model_type).positions == "from_padding"


def uses_prefix_space(model_type: str | None) -> bool:
    """Whether run_papa_ner.py loads this family's tokenizer with add_prefix_space=True (byte-level BPE)."""
    return _architecture(model_type).prefix_space


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


def _contents(tokenizer, texts, pretokenized: bool) -> list[tuple[list[int], list[int | None]]]:
    """Each text's (ids, word ids) without special tokens, from one tokenizer call for the whole batch."""
    batch = [list(t) for t in texts] if pretokenized else list(texts)
    enc = tokenizer(batch, add_special_tokens=False, is_split_into_words=pretokenized)
    return [(ids, enc.word_ids(i) if pretokenized else [None] * len(ids)) for i, ids in enumerate(enc["input_ids"])]


def check_layout(layout: str) -> str:
    """`layout` if it is one of `LAYOUTS`, else a ValueError naming them."""
    check_one_of(layout, LAYOUTS, "layout")
    return layout


def encode(tokenizer, texts: Sequence[str] | Sequence[Sequence[str]], text_pairs: Sequence[str] | None = None, *,
           max_length: int, layout: str | None = None, model_type: str | None = None, causal: bool | None = None,
           token_task: bool = False) -> LayoutBatch:
    """Encode single texts (or word lists, for token tasks) or text pairs into a fixed-length batch. `layout` None is
    the model's default. `model_type` decides position ids and prefix spaces; `causal` None asks the registry about
    `model_type`. `token_task` encodes texts with the official layout's token-task rule."""
    if causal is None:
        causal = _architecture(model_type).causal
    layout = layout_for(causal, layout, REPRODUCTION_LAYOUT)  # refuses a separator-last layout for a decoder
    if len(texts) == 0:
        raise ValueError("encode() got no texts: the batch is empty")
    if text_pairs is not None and len(text_pairs) != len(texts):
        raise ValueError(f"{len(texts)} texts but {len(text_pairs)} text pairs: they must pair up one to one")
    pretokenized = not isinstance(texts[0], str)
    if pretokenized and text_pairs is not None:
        raise ValueError("word-list inputs (token tasks) cannot be paired")
    if causal:
        return _encode_decoder(tokenizer, texts, text_pairs, max_length, pretokenized)
    if layout == "official":
        return _encode_official(tokenizer, texts, text_pairs, max_length, model_type, pretokenized,
                                token_task or pretokenized)
    return _encode_template(tokenizer, texts, text_pairs, max_length, layout, model_type, pretokenized)


def _encode_template(tokenizer, texts, text_pairs, n: int, layout: str, model_type: str | None,
                     pretokenized: bool) -> LayoutBatch:
    """papa's own layouts (`sep_last`, `standard`): each input cut to fit around its template's special tokens."""
    t = _template(tokenizer, pair=text_pairs is not None)
    pad_id = tokenizer.pad_token_id
    if pad_id is None:
        raise ValueError("the tokenizer has no pad token; PAPA pads every input to a fixed length")
    if text_pairs is None:
        rooms = (n - len(t.prefix) - len(t.suffix),)
    else:
        half = n // 2
        rooms = (half + 1 - len(t.prefix) - len(t.middle), n - (half + 1) - len(t.suffix))
    if min(rooms) < 1:
        raise ValueError(f"max_length={n} leaves no room for text after the special tokens; use a longer length")
    firsts = _contents(tokenizer, texts, pretokenized)
    if text_pairs is None:
        rows = [_single_slots(t, content, rooms[0], n, pad_id, layout) for content in firsts]
    else:
        seconds = _contents(tokenizer, text_pairs, False)
        rows = [_pair_slots(t, a[0], b[0], rooms, n, pad_id, layout) for a, b in zip(firsts, seconds)]
    all_ids, all_types, all_words, all_mask, truncated = (list(column) for column in zip(*rows))

    import torch

    attention_mask = torch.tensor(all_mask, dtype=torch.long)
    inputs = {"input_ids": torch.tensor(all_ids, dtype=torch.long), "attention_mask": attention_mask}
    if "token_type_ids" in getattr(tokenizer, "model_input_names", ["token_type_ids"]):
        inputs["token_type_ids"] = torch.tensor(all_types, dtype=torch.long)
    if model_type is not None and not positions_from_padding(model_type):
        inputs["position_ids"] = position_ids(attention_mask)
    return LayoutBatch(inputs=inputs, word_ids=all_words if pretokenized else None, truncated=truncated)


def _single_slots(t: _Template, content: tuple[list[int], list[int | None]], room: int, n: int, pad_id: int,
                  layout: str) -> tuple:
    """One single input's (ids, token types, word ids, attention mask, truncated) in `layout`."""
    a, wa = content
    cut = len(a) > room
    a, wa = a[:room], wa[:room]
    body = [*t.prefix, *a]
    body_types = [*t.prefix_types, *[t.type_a] * len(a)]
    body_words = [None] * len(t.prefix) + wa
    return (*_place(body, body_types, body_words, t.suffix, t.suffix_types, n, pad_id, layout), cut)


def _pair_slots(t: _Template, a: list[int], b: list[int], rooms: tuple[int, int], n: int, pad_id: int,
                layout: str) -> tuple:
    """One text pair's (ids, token types, word ids, attention mask, truncated) in `layout`: in `sep_last` each
    text fills its own half, separator last in each; in `standard` they follow each other."""
    room_a, room_b = rooms
    cut = len(a) > room_a or len(b) > room_b
    a, b = a[:room_a], b[:room_b]
    first = [*t.prefix, *a]
    first_types = [*t.prefix_types, *[t.type_a] * len(a)]
    if layout == "sep_last":
        half = n // 2
        ids1, types1, _, mask1 = _place(first, first_types, [None] * len(first), t.middle, t.middle_types,
                                        half + 1, pad_id, layout)
        ids2, types2, _, mask2 = _place(b, [t.type_b] * len(b), [None] * len(b), t.suffix, t.suffix_types,
                                        n - half - 1, pad_id, layout)
        ids, types, mask = ids1 + ids2, types1 + types2, mask1 + mask2
    else:
        body = [*first, *t.middle, *b]
        body_types = [*first_types, *t.middle_types, *[t.type_b] * len(b)]
        ids, types, _, mask = _place(body, body_types, [None] * len(body), t.suffix, t.suffix_types, n, pad_id,
                                     layout)
    return ids, types, [None] * n, mask, cut


def _encode_decoder(tokenizer, texts, text_pairs, n: int, pretokenized: bool) -> LayoutBatch:
    """The decoder layout: left-aligned, right-padded to `n`, position = slot."""
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    if pad is None:
        raise ValueError("the tokenizer has neither a pad nor an end-of-sequence token: set tokenizer.pad_token")
    if pretokenized:
        tokenizer = _with_prefix_space_if_byte_level(tokenizer)
        args, kwargs = ([list(t) for t in texts],), {"is_split_into_words": True}
    else:
        joined = list(texts) if text_pairs is None else [f"{a}\n{b}" for a, b in zip(texts, text_pairs)]
        args, kwargs = (joined,), {}
    enc = tokenizer(*args, **kwargs, verbose=False)
    all_ids, all_mask, all_words, truncated = [], [], [], []
    for i, ids in enumerate(enc["input_ids"]):
        if not ids:
            raise ValueError(f"input {i} encodes to no tokens: drop empty texts before encoding")
        kept = ids[:n]
        all_ids.append([*kept, *[pad] * (n - len(kept))])
        all_mask.append([1] * len(kept) + [0] * (n - len(kept)))
        if pretokenized:
            words = enc.word_ids(i)[:n]
            all_words.append([*words, *[None] * (n - len(words))])
        truncated.append(len(ids) > n)
    import torch

    mask = torch.tensor(all_mask, dtype=torch.long)
    inputs = {"input_ids": torch.tensor(all_ids, dtype=torch.long), "attention_mask": mask,
              "position_ids": position_ids(mask)}
    return LayoutBatch(inputs=inputs, word_ids=all_words if pretokenized else None, truncated=truncated)


def _with_prefix_space_if_byte_level(tokenizer):
    """`prefix_space_tokenizer(tokenizer)` where its pre-tokenizer has the setting (byte-level BPE), else itself."""
    try:
        return prefix_space_tokenizer(tokenizer)
    except ValueError:  # no add_prefix_space setting (e.g. SentencePiece): words are split on spaces already
        return tokenizer


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


def model_positions(inputs: dict[str, torch.Tensor], model_type: str, pad_token_id: int) -> torch.Tensor:
    """The 0-based position the model gives each slot of `inputs`: the position ids passed, else RoBERTa's count of
    non-pad tokens (pads: -1) or the slot."""
    if "position_ids" in inputs:
        return inputs["position_ids"]
    ids = inputs["input_ids"]
    if positions_from_padding(model_type):
        real = (ids != pad_token_id).long()
        return real.cumsum(-1) * real - 1
    return ids.new_ones(ids.shape).cumsum(-1) - 1


# ---- the released scripts' layout ---------------------------------------------------------------------------------

def _encode_official(tokenizer, texts, text_pairs, n: int, model_type: str | None, pretokenized: bool,
                     token_task: bool) -> LayoutBatch:
    """The `official` layout: the ordinary encoding, rearranged as the released scripts do."""
    sep, pad = tokenizer.sep_token_id, tokenizer.pad_token_id
    if sep is None or pad is None:
        raise ValueError("the tokenizer has no separator or pad token; the official layout needs both")
    if n < 4:
        raise ValueError(f"max_length={n} leaves no room for text after the special tokens; use a longer length")
    if token_task:
        if model_type is None:
            raise ValueError("the official layout encodes token-task inputs as the released code does, which "
                             "depends on the model: pass model_type=model.config.model_type")
        if uses_prefix_space(model_type):
            tokenizer = prefix_space_tokenizer(tokenizer)
    args = (list(texts),) if text_pairs is None else (list(texts), list(text_pairs))
    words = [list(t) for t in texts] if pretokenized else None
    if words is not None:
        args = (words,)
    ordinary = tokenizer(*args, padding="max_length", truncation=True, max_length=n,
                         is_split_into_words=pretokenized)
    # Untruncated lengths, only to report which inputs lost tokens (the layout keeps every special token once).
    full = tokenizer(*args, is_split_into_words=pretokenized, verbose=False)["input_ids"]
    all_ids, all_mask, all_words, truncated = [], [], [], []
    for i, ids in enumerate(ordinary["input_ids"]):
        if len(ids) != n:
            raise ValueError(f"the tokenizer did not pad/truncate input {i} to {n} tokens (got {len(ids)})")
        if token_task:
            ids, mask = official_token_slots(ids, ordinary["attention_mask"][i], sep, pad)
        else:
            ids, mask = official_sequence_slots(ids, n, sep, pad)
        all_ids.append(ids)
        all_mask.append(mask)
        all_words.append(ordinary.word_ids(i) if pretokenized else None)
        truncated.append(sum(mask) < len(full[i]))
    import torch

    inputs = {"input_ids": torch.tensor(all_ids, dtype=torch.long),
              "attention_mask": torch.tensor(all_mask, dtype=torch.long)}
    if "token_type_ids" in ordinary:  # as the tokenizer laid them out: the released scripts leave them in place
        inputs["token_type_ids"] = torch.tensor(ordinary["token_type_ids"], dtype=torch.long)
    return LayoutBatch(inputs=inputs, word_ids=all_words if pretokenized else None, truncated=truncated)


def official_sequence_slots(ids: Sequence[int], n: int, sep: int, pad: int) -> tuple[list[int], list[int]]:
    """run_papa_glue.py's rule on one ordinary encoding `ids` (length n): (input ids, attention mask)."""
    first = ids.index(sep)
    last = len(ids) - 1 - ids[::-1].index(sep)
    half = n // 2
    out, mask = [pad] * n, [0] * n
    head = min(first, half)
    out[:head], mask[:head] = ids[:head], [1] * head
    tail = min(last - first, n - 1 - half)  # slots n/2 .. n-2
    out[half:half + tail], mask[half:half + tail] = ids[first:first + tail], [1] * tail
    out[n - 1], mask[n - 1] = ids[last], 1
    return out, mask


def official_token_slots(ids: Sequence[int], attention_mask: Sequence[int], sep: int,
                         pad: int) -> tuple[list[int], list[int]]:
    """run_papa_ner.py's rule on one ordinary encoding (`ids`, `attention_mask`, padded to n): the sentence's
    separator becomes padding and the last slot the separator."""
    out, mask = list(ids), list(attention_mask)
    at = out.index(sep)
    out[at], mask[at] = pad, 0
    out[-1], mask[-1] = sep, 1
    return out, mask


_PREFIX_SPACE_TWINS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def prefix_space_tokenizer(tokenizer):
    """`tokenizer` as if loaded with ``add_prefix_space=True`` (byte-level BPE: RoBERTa, DeBERTa); cached per
    tokenizer, which itself is left unchanged."""
    if getattr(tokenizer, "add_prefix_space", False):
        return tokenizer
    twin = _PREFIX_SPACE_TWINS.get(tokenizer)
    if twin is not None:
        return twin
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise ValueError(f"{type(tokenizer).__name__} has no fast (tokenizers) backend: the official layout cannot "
                         "add the prefix space the released code uses; load the tokenizer with add_prefix_space=True")
    from tokenizers import Tokenizer

    state = json.loads(backend.to_str())
    changed = _set_prefix_space(state.get("pre_tokenizer")) | _set_prefix_space(state.get("post_processor"))
    if not changed:
        raise ValueError(f"{type(tokenizer).__name__}'s pre-tokenizer has no add_prefix_space setting: load the "
                         "tokenizer with add_prefix_space=True")
    twin = copy.copy(tokenizer)
    twin._tokenizer = Tokenizer.from_str(json.dumps(state))
    twin.add_prefix_space = True
    _PREFIX_SPACE_TWINS[tokenizer] = twin
    return twin


def _set_prefix_space(component) -> bool:
    """Set add_prefix_space in a tokenizers component's JSON (and in the members of a Sequence); whether any was."""
    if not isinstance(component, dict):
        return False
    changed = False
    if "add_prefix_space" in component:
        component["add_prefix_space"] = True
        changed = True
    for key in ("pretokenizers", "processors"):
        for member in component.get(key) or []:
            changed |= _set_prefix_space(member)
    return changed
