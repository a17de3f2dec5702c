"""The environment of every pytest run in this repository, tests/ and notebooks/ alike (pytest loads this file for
any path under the root, so `pytest notebooks/` gets it as `make test` does)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent

# Run on several workers (pytest-xdist, `make test`), each worker's torch and the processes it starts (notebook
# kernels among them) share the cores with the others instead of each taking them all.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    os.environ.setdefault("OMP_NUM_THREADS",
                          str(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))))
# Tests never reach the hub: models come from files, data from the data directory, hub paths are faked.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
# nbval's kernels inherit this environment but run in another folder: a relative data directory (PAPA_DATA_DIR=
# ../shared/data, typed from the clone's root) is made absolute here, where it was meant, or they would not find it.
if os.environ.get("PAPA_DATA_DIR", "").strip() and not Path(os.environ["PAPA_DATA_DIR"].strip()).is_absolute():
    os.environ["PAPA_DATA_DIR"] = str(Path(os.environ["PAPA_DATA_DIR"].strip()).resolve())


def _data_dir() -> Path | None:
    """The data directory the notebooks read: $PAPA_DATA_DIR, else ../shared/data beside the clone; None without."""
    path = Path(os.environ.get("PAPA_DATA_DIR", "").strip() or REPO.parent / "shared" / "data")
    return path if path.is_dir() else None


@pytest.hookimpl(wrapper=True)
def pytest_collect_file(file_path, parent):
    """nbval executes each notebook once, as stored (the cpu run's parameters), in a kernel started beside a copy of
    the committed run (`tests.stored_numbers.replay_folder`: every probe run cached, nothing trained). Each
    cell fails when it raises, when it is tagged nbval-check-output and its output changed (nbval), and, in a section
    notebook, when anything it prints differs from what it stored (`cell_difference`); after a section notebook's
    last cell, one more item fails if the rerun wrote into the copy of the run a file git would show, or changed a
    committed one."""
    collected = yield
    if file_path.suffix != ".ipynb" or file_path.parent != REPO / "notebooks":
        return collected
    from nbval.plugin import IPyNbFile

    return [_ReplayedNotebook.from_parent(parent, path=file_path) if isinstance(c, IPyNbFile) else c
            for c in collected]


#: The committed run the stored notebooks print.
STORED_RUN = REPO / "artifacts" / "cpu"


def _replay_cwd(config) -> Path:
    """Where this test run's kernels start: beside its one copy of the committed run (made on first use, removed at
    the end of the run)."""
    if not hasattr(config, "_papa_replay_cwd"):
        import shutil
        import tempfile

        from tests.stored_numbers import replay_folder

        work = Path(tempfile.mkdtemp(prefix="papa-replay-"))
        config.add_cleanup(lambda: shutil.rmtree(work, ignore_errors=True))
        config._papa_replay_cwd = replay_folder(STORED_RUN, work)
    return config._papa_replay_cwd


def _git(*args: str) -> list[str]:
    import subprocess

    done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)
    return [p for p in done.stdout.split("\0") if p] if done.returncode == 0 else []


#: Run in a notebook's kernel before nbval stops it: coverage.py's measurement of it, if any, saved.
_SAVE_COVERAGE = ("import sys\nif 'coverage' in sys.modules:\n    import coverage\n"
                  "    _measured = coverage.Coverage.current()\n"
                  "    if _measured is not None:\n        _measured.stop()\n        _measured.save()\n")


def _notebook_classes():
    import copy
    import time

    from nbval.kernel import CURRENT_ENV_KERNEL_NAME, RunningKernel
    from nbval.plugin import IPyNbCell, IPyNbFile

    from papa.core.vocabulary import NOTEBOOKS
    from tests.stored_numbers import batch_environment, cell_difference, changed_files, not_replayed

    class ReplayedNotebook(IPyNbFile):
        """nbval's notebook, its kernel started in `_replay_cwd` (the stored notebook runs there as it is)."""

        def setup(self):
            self.started_ns = time.time_ns()
            with batch_environment():
                self.kernel = RunningKernel(CURRENT_ENV_KERNEL_NAME, cwd=str(_replay_cwd(self.config)),
                                            startup_timeout=self.config.option.nbval_kernel_startup_timeout)
            self.setup_sanitize_files()

        def teardown(self):
            # nbval kills the kernel: where coverage.py measures it (a run under `coverage run` with patch =
            # subprocess), what it measured is saved first, or the notebooks' lines would be lost from the report
            if self.kernel is not None and self.kernel.is_alive():
                msg_id = self.kernel.execute_cell_input(_SAVE_COVERAGE, allow_stdin=False)
                try:
                    self.kernel.await_idle(msg_id, 60)
                except Exception:  # noqa: BLE001 - a kernel that no longer answers has nothing to save
                    pass
            super().teardown()

        def collect(self):
            for item in super().collect():
                yield ReplayedCell.from_parent(self, name=item.name, cell_num=item.cell_num, cell=item.cell,
                                               options=item.options)
            if self.path.stem in NOTEBOOKS:
                yield RunUnchanged.from_parent(self, name="the committed run unchanged")

    class ReplayedCell(IPyNbCell):
        """A cell run by nbval, then compared with what it stored: every printed line (section notebooks)."""

        def runtest(self):
            section = self.parent.path.stem in NOTEBOOKS
            why = not_replayed(self.cell.source) if section else None
            if why:
                pytest.skip(f"not replayed: {why}")
            stored = copy.deepcopy(self.cell)  # nbval merges the stored streams in place when it compares them
            super().runtest()
            diff = cell_difference(stored, self.test_outputs) if section else []
            if diff:
                self.raise_cell_error("Cell prints other numbers than the stored notebook (the committed run "
                                      "changed, or what reads it): rerun `make notebooks`", "\n".join(diff[:20]))

    class RunUnchanged(pytest.Item):
        """After a section notebook: the rerun wrote nothing into the copy of the run that git would show, and
        changed no committed file in any byte."""

        def runtest(self):
            if not _git("rev-parse", "--git-dir"):
                pytest.skip("not a git checkout")
            run_copy = _replay_cwd(self.config).parent / STORED_RUN.relative_to(REPO)
            changed, added = changed_files(STORED_RUN, run_copy, since_ns=self.parent.started_ns)
            where = STORED_RUN.relative_to(REPO).as_posix()
            tracked = {p.removeprefix(f"{where}/") for p in _git("ls-files", "-z", where)}
            ignored = {p.removeprefix(f"{where}/") for p in _git("check-ignore", "-z",
                                                                  *[f"{where}/{p}" for p in added])} if added else set()
            rewritten = [p for p in changed if p in tracked]
            new = [p for p in added if p not in tracked and p not in ignored]
            assert not rewritten and not new, (f"{self.parent.path.stem} rewrote committed files {rewritten} and added "
                                               f"{new} to a copy of the committed run")

        def reportinfo(self):
            return self.path, None, f"{self.parent.path.stem}: {self.name}"

    return ReplayedNotebook


try:
    _ReplayedNotebook = _notebook_classes()
except ImportError:  # nbval is a test dependency: without it no notebook is collected at all
    _ReplayedNotebook = None


#: Fixtures that read the real files (../shared's data and tokenizers) or load the real offline model: a test that
#: takes one is an integration test, wherever it lives.
REAL_FILES = frozenset({"data_dir", "hub_dir", "minilm", "minilm_model"})
#: nbval reads a cell's outputs with a 5-second limit per message once the kernel has run the cell; on a loaded
#: machine a grid cell that draws many progress bars failed that wait although it had finished. The cell's own limit
#: (--nbval-cell-timeout, pyproject.toml) is unchanged.
NBVAL_OUTPUT_TIMEOUT_S = 120


def tier(item) -> str | None:
    """The tier marker of a collected test, from where it lives and what it reads (`make test-fast` deselects them
    all): ``notebook`` (an nbval cell), ``acceptance`` (tests/acceptance: a browser, a real-size build),
    ``integration`` (tests/integration, or a test taking a `REAL_FILES` fixture), else None (a unit test)."""
    parts = item.path.resolve().relative_to(REPO).parts if item.path.resolve().is_relative_to(REPO) else ()
    if parts[:1] == ("notebooks",):
        return "notebook"
    if parts[:2] == ("tests", "acceptance"):
        return "acceptance"
    if parts[:2] == ("tests", "integration") or REAL_FILES & set(getattr(item, "fixturenames", ())):
        return "integration"
    return None


def pytest_collection_modifyitems(config, items):
    """Each test gets its tier's marker (`tier`); nbval cells get the patience for their outputs. Without a data
    directory the notebooks cannot run here (tests never download): their cells are skipped with one reason, said
    once, instead of failing one by one on the unreachable hub."""
    for item in items:
        marker = tier(item)
        if marker:
            item.add_marker(marker)
        if hasattr(item, "output_timeout"):  # an nbval cell
            item.output_timeout = max(item.output_timeout, NBVAL_OUTPUT_TIMEOUT_S)
    if _data_dir() is not None:
        return
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
