"""The integer codes of head modes in a controller's ``modes`` tensor (a mode's code is its position in the
vocabulary's HEAD_MODES: keep, replace, mix), and what one layer's modes ask of its attention (`LayerPlan`)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from papa.core.vocabulary import HEAD_MODES

MODE_NAMES = {name: code for code, name in enumerate(HEAD_MODES)}
KEEP, REPLACE, MIX = MODE_NAMES["keep"], MODE_NAMES["replace"], MODE_NAMES["mix"]


@dataclass(frozen=True)
class LayerPlan:
    """What one layer's head modes ask of its attention, decided on the host whenever the modes change, so that a
    forward pass never reads the modes back from the device: plain Python values, and index tensors made once on
    the controller's device."""

    changed: bool                  # some head is not kept: the layer cannot run the model's own attention alone
    mixed: bool                    # some head mixes λA + (1 − λ)C
    keep: tuple[int, ...]          # the kept heads
    replace: tuple[int, ...]       # the replaced heads
    keep_index: torch.Tensor       # `keep` as a long tensor on the controller's device
    replace_index: torch.Tensor    # `replace` likewise

    @classmethod
    def of(cls, modes: list[int], device: torch.device) -> "LayerPlan":
        keep = tuple(h for h, m in enumerate(modes) if m == KEEP)
        replace = tuple(h for h, m in enumerate(modes) if m == REPLACE)
        return cls(changed=len(keep) < len(modes), mixed=any(m == MIX for m in modes), keep=keep, replace=replace,
                   keep_index=torch.tensor(keep, dtype=torch.long, device=device),
                   replace_index=torch.tensor(replace, dtype=torch.long, device=device))
