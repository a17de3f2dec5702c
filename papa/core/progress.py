"""Progress bars, and the one switch that turns them off where no one watches.

papa draws its bars with tqdm (in a notebook, as widgets). A notebook executed in a batch (`papa reproduce`,
`make notebooks`) is read later, where a stored bar shows the state it was saved in (``0%``), not where it ended, so
batch runs set ``PAPA_PROGRESS=0`` for their kernels and every bar papa draws is then off, whatever its caller asked
(with ``HF_HUB_DISABLE_PROGRESS_BARS=1`` and ``TQDM_DISABLE=1`` for the bars of transformers and the hub:
`BATCH_ENVIRONMENT`).
"""
from __future__ import annotations

import os

from tqdm.auto import tqdm as _tqdm

#: The environment variable that turns papa's progress bars off (``0``); read when a bar is made.
PROGRESS_ENV = "PAPA_PROGRESS"
#: What a batch run's kernels are started with: no bar of papa's, nor of transformers and the hub (tqdm's own switch
#: for the bars made without one, as loading a GGUF file draws).
BATCH_ENVIRONMENT = {PROGRESS_ENV: "0", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "TQDM_DISABLE": "1"}


def bars_off() -> bool:
    """Whether ``PAPA_PROGRESS=0`` turns every bar off."""
    return os.environ.get(PROGRESS_ENV, "").strip() == "0"


class tqdm(_tqdm):  # noqa: N801 -- tqdm's own name, so that modules use it as they used tqdm
    """tqdm.auto's bar, off where `bars_off` says so."""

    def __init__(self, *args, disable: bool | None = False, **kwargs):
        super().__init__(*args, disable=True if bars_off() else disable, **kwargs)
