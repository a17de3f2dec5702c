"""papa's progress bars are off where a batch run says so (`PAPA_PROGRESS=0`), whatever their caller asked: a bar
stored in an executed notebook would show the state it was saved in (0%)."""
from __future__ import annotations

import os

from papa.core.progress import PROGRESS_ENV, tqdm
from papa.reproduce.notebooks import no_progress_bars


def test_a_batch_run_turns_every_bar_off_and_gives_the_environment_back(monkeypatch):
    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    assert not tqdm(range(2), disable=False).disable  # asked for, drawn
    monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS", raising=False)
    with no_progress_bars():  # what the kernels of `papa reproduce` start with
        assert os.environ[PROGRESS_ENV] == "0" and os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1"
        assert tqdm(range(2), disable=False).disable
    assert PROGRESS_ENV not in os.environ and "HF_HUB_DISABLE_PROGRESS_BARS" not in os.environ
    monkeypatch.setenv(PROGRESS_ENV, "1")
    with no_progress_bars():
        pass
    assert os.environ[PROGRESS_ENV] == "1"
    assert tqdm(range(2), disable=True).disable  # a bar its caller turned off stays off
