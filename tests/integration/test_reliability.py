"""Reliability on the real offline model and data: a killed batch resumes to the uninterrupted result (and never
touched the network), and bad input found after loading still fails before any run and leaves nothing behind."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from papa import cli
from papa.core.run_folder import RunFolder
from papa.method.constants import load_constants
from papa.method.models import DEFAULT_MODEL
from papa.runs.names import constants_filename
from papa.runs.predictions_store import load_run_predictions
from papa.runs.profiles import PROFILES
from papa.runs.results import ResultsTable

pytestmark = pytest.mark.integration

# A tiny grid the `papa` command can run in a subprocess, which cannot see profiles registered by a test.
PROFILE = {"name": "reliability-test", "base": "quick", "train_limit": 32, "eval_limit": 16, "corpus_limit": 16,
           "epochs": 1, "seeds": [0, 1], "fractions": ["1", "0"]}
ROWS = 4  # fraction 1 and fraction 0 (average constants) x 2 seeds

# `papa` with every socket refused and each attempt reported on stderr (the process is killed, so it cannot report
# at exit). The hub is not switched off for it: the offline default model and local data must not need it.
_PAPA_WITHOUT_NETWORK = """
import socket, sys
def refuse(*args, **kwargs):
    sys.stderr.write(f"NETWORK ATTEMPT {args!r}\\n")
    sys.stderr.flush()
    raise OSError("network disabled by the test")
socket.socket.connect = socket.socket.connect_ex = refuse
socket.create_connection = socket.getaddrinfo = refuse
from papa.cli import main
from papa.core.run_folder import RunFolder
sys.exit(main(sys.argv[1:]))
"""


@pytest.fixture
def profile_file(tmp_path) -> Path:
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(PROFILE))
    yield path
    PROFILES.pop(PROFILE["name"], None)  # loading the file registered it in this process


def _probe_args(profile_file: Path, data_dir: Path, out: Path, *extra: str) -> list[str]:
    return ["probe", "--task", "sst2", "--profile", str(profile_file), "--constants", "average", "--data-dir",
            str(data_dir), "--out", str(out), "--quiet", *extra]


def _files(folder: Path) -> list[Path]:
    """Every file under `folder`, sorted."""
    return sorted(p for p in folder.rglob("*") if p.is_file())


def _rows(path: Path) -> int:
    try:
        return max(len(path.read_text().splitlines()) - 1, 0)
    except FileNotFoundError:
        return 0


def test_killed_batch_resumes_to_the_uninterrupted_result(tmp_path, data_dir, profile_file, capsys):
    """SIGKILL after the first result row, re-run: the uninterrupted run's rows, finished runs kept, no leftovers.

    The killed process also shows that the offline model and local data make no network call."""
    out = tmp_path / "killed"
    results = out / "results.csv"
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")}
    proc = subprocess.Popen([sys.executable, "-c", _PAPA_WITHOUT_NETWORK, *_probe_args(profile_file, data_dir, out)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while _rows(results) == 0:  # results.csv is only ever replaced by rename, so a read sees whole rows
        if proc.poll() is not None:
            pytest.fail(f"the batch ended before it could be killed: {proc.stderr.read()[-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("no result row within 300 s")
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)  # no cleanup handlers run
    proc.wait()
    stderr = proc.stderr.read()
    proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    assert "NETWORK ATTEMPT" not in stderr, stderr[-2000:]
    before = ResultsTable(results).read()
    assert 1 <= len(before) < ROWS

    assert cli.main(_probe_args(profile_file, data_dir, out)) == 0  # resume
    resumed = ResultsTable(results).read()
    assert cli.main(_probe_args(profile_file, data_dir, tmp_path / "reference")) == 0
    reference = ResultsTable(tmp_path / "reference" / "results.csv").read()
    capsys.readouterr()

    # Finished runs were kept as they were, not recomputed (a recomputed run would have a new run time).
    kept = resumed.set_index("run_id").loc[before["run_id"]].reset_index()[list(before.columns)]
    pd.testing.assert_frame_equal(kept, before, check_exact=True)
    # The result is the uninterrupted run's, value for value (the two ran in different processes).
    assert len(resumed) == len(reference) == ROWS
    by_id = lambda df: df.sort_values("run_id").drop(columns="runtime_s").reset_index(drop=True)  # noqa: E731
    pd.testing.assert_frame_equal(by_id(resumed), by_id(reference), check_exact=True)
    # Nothing half-written or temporary is left (the table's lock file stays by design: papa.runs.results), and
    # every artifact reads back.
    assert [p.name for p in out.rglob("*") if (p.name.startswith(".") or p.suffix == ".tmp")
            and p.name != ".results.csv.lock"] == []
    artifacts = sorted(p for p in out.rglob("*.safetensors") if p.parent.name != "predictions")
    assert len(artifacts) == 1 and load_constants(artifacts[0]).metadata.num_examples == PROFILE["corpus_limit"]
    predictions = load_run_predictions(RunFolder.at(out), resumed["run_id"])  # one per row, each readable
    assert len(list((out / "predictions").iterdir())) == len(predictions) == ROWS


def test_bad_input_fails_before_any_run(tmp_path, data_dir, profile_file, capsys):
    """Errors found once the model is loaded still come before the first run, and write nothing."""
    out = tmp_path / "out"
    assert cli.main(_probe_args(profile_file, data_dir, out, "--fractions", "1", "1/16", "--rounding", "exact")) == 2
    err = capsys.readouterr().err.splitlines()[-1]  # (transformers may draw its weight-loading bar first)
    assert err.startswith("papa probe: error: ") and "1/16" in err and "4.5" in err and "--rounding down" in err
    assert "rounding=" not in err  # the CLI names its flags, not the library's arguments
    assert not out.exists()  # fraction 1 was not run either

    # A truncated constants file where the grid keeps its cached constants: named, with the fix, nothing run.
    corpus = f"sst2:train[:{PROFILE['corpus_limit']}]"
    cached = out / "constants" / constants_filename(DEFAULT_MODEL, corpus, 64, "official")
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{\"a\":")
    assert cli.main(_probe_args(profile_file, data_dir, out, "--fractions", "0", "--seeds", "0")) == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert err.startswith("papa probe: error: ") and cached.name in err and "truncated" in err and "delete it" in err
    assert _files(out) == [cached]  # the refused run left nothing of its own (no results, no phase times)


def test_a_corrupt_saved_ranking_is_refused_before_the_first_run(tmp_path, data_dir, profile_file, capsys):
    """A saved λ ranking is read when the grid opens, not when its point comes: a grid whose fraction 0 would run
    first is refused whole, and leaves no file of its own behind."""
    out = tmp_path / "out"
    assert cli.main(["rank", "--task", "sst2", "--profile", str(profile_file), "--data-dir", str(data_dir),
                     "--out", str(out), "--quiet"]) == 0
    [ranking] = (out / "rankings").glob("*.safetensors")
    ranking.write_bytes(ranking.read_bytes()[:100])
    before = _files(out)
    assert cli.main(_probe_args(profile_file, data_dir, out, "--selection", "lambda", "--fractions", "0", "1/2",
                                "--seeds", "0")) == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert err.startswith("papa probe: error: ") and ranking.name in err and "papa rank" in err
    assert _files(out) == before
