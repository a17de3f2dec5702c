"""nbval, for the notebooks: how long to wait for a cell's output once the kernel has run it.

nbval reads a cell's outputs with a 5-second limit per message after the cell finishes; a grid cell on a loaded
machine (other work beside the suite) has failed with "Timeout of 5 seconds exceeded waiting for output" although it
had run to its end. The cell's own limit (--nbval-cell-timeout, pyproject.toml) is unchanged.
"""
from __future__ import annotations

from nbval.plugin import IPyNbCell

OUTPUT_TIMEOUT_S = 120
_init = IPyNbCell.__init__


def _init_with_patience(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    self.output_timeout = OUTPUT_TIMEOUT_S


IPyNbCell.__init__ = _init_with_patience
