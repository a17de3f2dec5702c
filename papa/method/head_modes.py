"""The integer codes of head modes (their position in HEAD_MODES), and one layer's modes as a `LayerPlan`."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from papa.core.vocabulary import HEAD_MODES

MODE_NAMES = {name: code for code, name in enumerate(HEAD_MODES)}
KEEP, REPLACE, MIX = MODE_NAMES["keep"], MODE_NAMES["replace"], MODE_NAMES["mix"]


@dataclass(frozen=True)
class LayerPlan:
    """One layer's head modes as host values and device index tensors, so that a forward pass never reads the modes
    back from the device."""

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
