"""The integer codes of head modes in a controller's ``modes`` tensor: a mode's code is its position in the
vocabulary's HEAD_MODES (keep, replace, mix)."""
from __future__ import annotations

from papa.core.vocabulary import HEAD_MODES

MODE_NAMES = {name: code for code, name in enumerate(HEAD_MODES)}
KEEP, REPLACE, MIX = MODE_NAMES["keep"], MODE_NAMES["replace"], MODE_NAMES["mix"]
