"""BERT-style masking of inputs for the MLM probe (paper Sec. 5.5).

The MLM probe does not use a model's own MLM head: a frozen encoder is read through a
vocabulary-sized :class:`papa.probing.probes.TokenProbe` (see :func:`papa.probing.probes.mlm_probe`), so the
same masking works for models that were never given an MLM head (e.g. ELECTRA's discriminator).

Selection follows the Hugging Face ``DataCollatorForLanguageModeling`` / BERT recipe: every real,
non-special token is selected independently with probability ``mlm_probability`` (so the rate is
15% in expectation, not exactly 15% per sequence); of the selected tokens 80% become the mask
token, 10% a uniformly random token id and 10% stay unchanged. Unlike the collator, pads are
excluded through ``attention_mask`` and do not rely on the tokenizer marking them as special.
"""
from __future__ import annotations

import torch

__all__ = ["IGNORE_INDEX", "mask_tokens"]

#: Label of positions that carry no MLM target (the default ``ignore_index`` of cross-entropy).
IGNORE_INDEX = -100

# Of the selected positions: [0, 0.8) -> [MASK], [0.8, 0.9) -> random token, [0.9, 1) -> unchanged.
_MASK_FRACTION = 0.8
_RANDOM_FRACTION = 0.1


def mask_tokens(
    input_ids: torch.LongTensor,
    special_tokens_mask: torch.BoolTensor,
    attention_mask: torch.Tensor | None,
    mask_token_id: int,
    vocab_size: int,
    generator: torch.Generator,
    mlm_probability: float = 0.15,
) -> tuple[torch.LongTensor, torch.LongTensor]:
    """Mask ``input_ids`` as BERT does; return ``(masked_input_ids, labels)``.

    Args:
        input_ids: token ids, [batch, n]. Not modified.
        special_tokens_mask: True (or 1) at special tokens ([CLS], [SEP], ...), [batch, n].
        attention_mask: 1 at real tokens, 0 at pads, [batch, n]; ``None`` means no padding.
        mask_token_id: id written at 80% of the selected positions.
        vocab_size: random replacements are drawn uniformly from ``[0, vocab_size)``.
        generator: the only source of randomness, so the result is a function of its state.
            It may live on another device than ``input_ids`` (the draws are made on the
            generator's device and moved), which keeps masks identical across devices.
        mlm_probability: chance that an eligible (real, non-special) token is selected.

    Returns:
        ``masked_input_ids`` (a new tensor) and ``labels``: the original id at selected
        positions and ``IGNORE_INDEX`` (-100) everywhere else.
    """
    _check_inputs(input_ids, special_tokens_mask, attention_mask, vocab_size, mlm_probability)

    device = input_ids.device
    eligible = ~special_tokens_mask.to(device=device, dtype=torch.bool)
    if attention_mask is not None:
        eligible &= attention_mask.to(device=device).bool()

    # All draws are made for every position (eligible or not) and in a fixed order, so the
    # outcome at one position does not depend on the masks elsewhere, only on the generator.
    def draw_uniform() -> torch.Tensor:
        return torch.rand(input_ids.shape, generator=generator, device=generator.device).to(device)

    selected = (draw_uniform() < mlm_probability) & eligible
    action = draw_uniform()
    random_ids = torch.randint(
        0, vocab_size, input_ids.shape, generator=generator, device=generator.device, dtype=torch.long
    ).to(device)

    labels = torch.where(selected, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    to_mask = selected & (action < _MASK_FRACTION)
    to_random = selected & (action >= _MASK_FRACTION) & (action < _MASK_FRACTION + _RANDOM_FRACTION)

    masked = input_ids.clone()
    masked[to_mask] = mask_token_id
    masked[to_random] = random_ids[to_random].to(masked.dtype)
    return masked, labels


def _check_inputs(input_ids: torch.Tensor, special_tokens_mask: torch.Tensor, attention_mask: torch.Tensor | None,
                  vocab_size: int, mlm_probability: float) -> None:
    """Refuse what `mask_tokens` cannot mask: a batch not [batch, n], masks of another shape, a probability outside
    [0, 1] or an empty vocabulary."""
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids must be [batch, n], got shape {tuple(input_ids.shape)}")
    if special_tokens_mask.shape != input_ids.shape:
        raise ValueError(
            f"special_tokens_mask shape {tuple(special_tokens_mask.shape)} != input_ids shape {tuple(input_ids.shape)}"
        )
    if attention_mask is not None and attention_mask.shape != input_ids.shape:
        raise ValueError(
            f"attention_mask shape {tuple(attention_mask.shape)} != input_ids shape {tuple(input_ids.shape)}"
        )
    if not 0.0 <= mlm_probability <= 1.0:
        raise ValueError(f"mlm_probability must be in [0, 1], got {mlm_probability}")
    if vocab_size < 1:
        raise ValueError(f"vocab_size must be positive, got {vocab_size}")
