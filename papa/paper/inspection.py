"""Looking at single inputs: their readable tokens, one input's live attention, a mean-pooled embedding."""
from __future__ import annotations

from collections.abc import Sequence

import torch

from papa.method.architectures import backbone
from papa.method.extract import extract_constants
from papa.tasks.corpus import Corpus


def readable_tokens(tokenizer, ids: Sequence[int]) -> list[str]:
    """Each token of `ids` decoded ("Ġmovie" -> "movie"); one that decodes to whitespace keeps its piece."""
    pieces = tokenizer.convert_ids_to_tokens(list(ids))
    return [tokenizer.decode([i]).strip() or piece for i, piece in zip(ids, pieces)]


def live_attention(model, tokenizer, text: str, pair: str | None = None, *, max_length: int,
                   layout: str = "sep_last") -> torch.Tensor:
    """Every head's attention on one input, [L, H, n, n] (0 at pads), in `layout`, under the heads' current modes."""
    one_input = Corpus("", [text], None if pair is None else [pair])
    return extract_constants(model, tokenizer, one_input, max_length=max_length, layout=layout, progress=False).matrices


def mean_pooled(model, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """The last layer's hidden states averaged over real tokens, [B, d] (a causal LM's, without its LM head)."""
    with torch.no_grad():
        hidden = backbone(model)(**inputs).last_hidden_state
    mask = inputs["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(1) / mask.sum(1)


