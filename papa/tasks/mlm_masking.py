"""BERT-style masking of inputs for the MLM probe (paper Sec. 5.5).

Every real, non-special token is selected with probability ``mlm_probability``; of those 80% become the mask token,
10% a random token and 10% stay, as Hugging Face's ``DataCollatorForLanguageModeling`` does.
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
    """Mask ``input_ids`` [batch, n] as BERT does: ``(masked_input_ids, labels)``, labels `IGNORE_INDEX` where nothing
    was selected. The draws come from `generator` alone, made on its device, so that masks are identical across
    devices."""
    _check_inputs(input_ids, special_tokens_mask, attention_mask, vocab_size, mlm_probability)

    device = input_ids.device
    eligible = ~special_tokens_mask.to(device=device, dtype=torch.bool)
    if attention_mask is not None:
        eligible &= attention_mask.to(device=device).bool()

    # Draws for every position in a fixed order: one position's outcome does not depend on the masks elsewhere.
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
    """Raise ValueError for inputs `mask_tokens` cannot mask."""
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids must be [batch, n], got shape {tuple(input_ids.shape)}")
    for name, mask in (("special_tokens_mask", special_tokens_mask), ("attention_mask", attention_mask)):
        if mask is not None and mask.shape != input_ids.shape:
            raise ValueError(f"{name} shape {tuple(mask.shape)} != input_ids shape {tuple(input_ids.shape)}")
    if not 0.0 <= mlm_probability <= 1.0:
        raise ValueError(f"mlm_probability must be in [0, 1], got {mlm_probability}")
    if vocab_size < 1:
        raise ValueError(f"vocab_size must be positive, got {vocab_size}")
