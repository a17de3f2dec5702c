"""The environment of every pytest run in this repository, tests/ and notebooks/ alike (pytest loads this file for
any path under the root, so `pytest notebooks/` gets it as `make test` does)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent

# Tests never reach the hub: models come from files, data from the data directory, hub paths are faked.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
# nbval's kernels inherit this environment but run in notebooks/: a relative data directory (PAPA_DATA_DIR=
# ../shared/data, typed from the clone's root) is made absolute here, where it was meant, or they would not find it.
if os.environ.get("PAPA_DATA_DIR", "").strip() and not Path(os.environ["PAPA_DATA_DIR"].strip()).is_absolute():
    os.environ["PAPA_DATA_DIR"] = str(Path(os.environ["PAPA_DATA_DIR"].strip()).resolve())


def _data_dir() -> Path | None:
    """The data directory the notebooks read: $PAPA_DATA_DIR, else ../shared/data beside the clone; None without."""
    path = Path(os.environ.get("PAPA_DATA_DIR", "").strip() or REPO.parent / "shared" / "data")
    return path if path.is_dir() else None


@pytest.hookimpl(wrapper=True)
def pytest_collect_file(file_path, parent):
    """nbval runs a section notebook as ``papa reproduce --profile quick`` does: the stored notebook (the cpu run's
    outputs) with the quick profile's parameters injected, writing to artifacts/quick
    (`papa.reproduce.stored.quick_notebook`); it compares the outputs of the cells tagged nbval-check-output."""
    collected = yield
    if file_path.suffix != ".ipynb" or file_path.parent != REPO / "notebooks":
        return collected
    from nbval.plugin import IPyNbFile

    return [_QuickNotebook.from_parent(parent, path=file_path) if isinstance(c, IPyNbFile) else c
            for c in collected]


def _quick_notebook_class():
    from nbval.plugin import IPyNbFile

    class QuickNotebook(IPyNbFile):
        """nbval's notebook, read as `papa.reproduce.stored.quick_notebook` gives it (the kernel still runs in
        notebooks/, where the stored notebook is)."""

        def collect(self):
            from unittest import mock

            import nbformat

            from papa.reproduce.stored import quick_notebook

            nb = quick_notebook(self.path, REPO / "artifacts" / "quick")
            with mock.patch.object(nbformat, "read", lambda *args, **kwargs: nb):
                yield from super().collect()

    return QuickNotebook


try:
    _QuickNotebook = _quick_notebook_class()
except ImportError:  # nbval is a test dependency: without it no notebook is collected at all
    _QuickNotebook = None


def pytest_collection_modifyitems(config, items):
    """Without a data directory the notebooks cannot run here (tests never download): their cells are skipped with
    one reason, said once, instead of failing one by one on the unreachable hub."""
    if _data_dir() is not None:
        return
    import pytest

    cells = [item for item in items if item.path.suffix == ".ipynb"]
    if not cells:
        return
    reason = ("no data directory: set PAPA_DATA_DIR to the folder holding glue_data/, conll2003/ and wikitext/ "
              "(the tests never download), so the notebooks were not run")
    for item in cells:
        item.add_marker(pytest.mark.skip(reason=reason))
    config._papa_notebooks_skipped = (len(cells), reason)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    skipped = getattr(config, "_papa_notebooks_skipped", None)
    if skipped:
        terminalreporter.write_line(f"{skipped[0]} notebook cells skipped: {skipped[1]}")
