"""Progress bars, and the one switch (``PAPA_PROGRESS=0``) that turns them off where no one watches.

Batch-executed notebooks turn them off (a stored bar shows ``0%``); in a Jupyter kernel a finished bar clears its
own output, so that a saved notebook holds none.
"""
from __future__ import annotations

import os

from tqdm.auto import tqdm as _tqdm

#: The environment variable that turns papa's progress bars off (``0``); read when a bar is made.
PROGRESS_ENV = "PAPA_PROGRESS"
#: What a batch run's kernels are started with: no bar of papa's, transformers', the hub's or plain tqdm's.
BATCH_ENVIRONMENT = {PROGRESS_ENV: "0", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "TQDM_DISABLE": "1"}

#: Whether tqdm.auto draws widgets here (this process is a Jupyter kernel with ipywidgets), decided as it decides.
IN_NOTEBOOK = any(cls.__module__ == "tqdm.notebook" for cls in _tqdm.__mro__)


def bars_off() -> bool:
    """Whether ``PAPA_PROGRESS=0`` turns every bar off."""
    return os.environ.get(PROGRESS_ENV, "").strip() == "0"


class TerminalBar(_tqdm):
    """tqdm.auto's bar, off where `bars_off` says so."""

    def __init__(self, *args, disable: bool | None = False, **kwargs):
        super().__init__(*args, disable=True if bars_off() else disable, **kwargs)


class NotebookBar(TerminalBar):
    """A widget bar (tqdm.notebook's, in a Jupyter kernel) shown under a display id, so that once it finished its
    output can be emptied: a saved notebook then holds no bar. Only made where `IN_NOTEBOOK`."""

    def __init__(self, *args, **kwargs):
        self._shown = None
        super().__init__(*args, display=False, **kwargs)  # shown here, under an id, not by tqdm
        if not self.disable and self.delay <= 0:
            self._show()

    def _show(self) -> None:
        from IPython.display import display

        self._shown = display(self.container, display_id=True)
        self.displayed = True

    def display(self, *args, check_delay: bool = True, **kwargs):
        """tqdm.notebook's, except that a bar held back by ``delay`` is shown by `_show` when it first draws."""
        if check_delay and self.delay > 0 and not self.displayed:
            self._show()
        return super().display(*args, check_delay=False, **kwargs)

    def close(self) -> None:
        """tqdm.notebook's close; then, unless the bar shows an error (it stopped before its total), its output is
        emptied and its widgets closed."""
        shown = not self.disable and self._shown is not None
        super().close()
        if not shown or self.container.children[1].bar_style == "danger":
            return
        self._shown.update({}, raw=True)
        self._shown = None
        for widget in (*self.container.children, self.container):
            widget.close()


#: papa's progress bar: `NotebookBar` in a Jupyter kernel, else `TerminalBar`.
tqdm = NotebookBar if IN_NOTEBOOK else TerminalBar
