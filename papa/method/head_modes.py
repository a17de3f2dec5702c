"""The integer codes of head modes in a controller's ``modes`` tensor (names: keep, replace, mix)."""
from __future__ import annotations

KEEP, REPLACE, MIX = 0, 1, 2
MODE_NAMES = {"keep": KEEP, "replace": REPLACE, "mix": MIX}
