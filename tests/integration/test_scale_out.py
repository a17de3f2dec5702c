"""Scale-out on the real offline model and data: `accelerate launch` with 2 CPU processes (gloo) gives the
single-process constants and results; the reproduction's jobs run on a local pool and through submitit's local
executor into the same table, finished jobs are not re-run, and a failing job is reported without stopping the
others."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from papa import cli
from papa.core.run_folder import RunFolder
from papa.core.settings import Resources
from papa.method.constants import load_constants
from papa.method.extract import extract_constants
from papa.method.models import DEFAULT_MODEL
from papa.method.rankings import load_ranking
from papa.reproduce.jobs import Job, finished, grid_jobs, notebook_jobs, run_jobs, submitit_executor
from papa.runs.constants_cache import record_dtype
from papa.runs.experiment import GridConfig
from papa.runs.predictions_store import load_run_predictions
from papa.runs.profiles import PROFILES, get_profile
from papa.runs.results import ResultsTable
from papa.tasks.corpus import task_corpus

pytestmark = pytest.mark.integration

# Large enough that each of two processes gets feature batches (64 examples each) and extraction batches.
PROFILE = {"name": "scale-out-test", "base": "quick", "train_limit": 130, "eval_limit": 70, "corpus_limit": 70,
           "rank_limit": 32, "epochs": 1, "seeds": [0, 1], "fractions": ["1", "1/2", "0"]}


# Jobs need no split batches: smaller.
SMALL = {**PROFILE, "name": "scale-out-jobs-test", "train_limit": 32, "eval_limit": 16, "corpus_limit": 16,
         "rank_limit": 16}


def _profile(tmp_path: Path, spec: dict) -> Path:
    path = tmp_path / f"{spec['name']}.json"
    path.write_text(json.dumps(spec))
    return path


@pytest.fixture
def profile_file(tmp_path) -> Path:
    yield _profile(tmp_path, PROFILE)
    PROFILES.pop(PROFILE["name"], None)


def _accelerate(*args: str, cwd: Path) -> None:
    """`accelerate launch` of the papa CLI on 2 processes; without GPUs accelerate forms a gloo group."""
    launcher = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([launcher, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
                           "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "29517",
                           "-m", "papa.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


def test_extraction_on_two_processes_equals_one(tmp_path, data_dir, minilm):
    model, tokenizer = minilm
    corpus = task_corpus("mrpc", "train", data_dir=data_dir, limit=70)  # 9 batches of 8: blocks of 4 and 5
    one = extract_constants(model, tokenizer, corpus, max_length=48, batch_size=8, layout="official",
                            model_name=DEFAULT_MODEL, progress=False)  # papa extract's default layout
    _accelerate("extract", "--task", "mrpc", "--limit", "70", "--max-length", "48", "--batch-size", "8",
                "--data-dir", str(data_dir), "--out", str(tmp_path / "two"), "--quiet", cwd=tmp_path)
    (path,) = (tmp_path / "two").glob("*.safetensors")
    two = load_constants(path)
    # Counts are integers; sums differ only in the order of float64 additions, which float32 averages absorb.
    assert torch.equal(two.counts, one.counts) and torch.equal(two.matrices, one.matrices)
    # `papa extract` also records the dtype the model ran in (papa.runs.constants_cache.record_dtype)
    assert two.metadata.num_examples == 70
    assert two.metadata.preprocessing == one.metadata.preprocessing
    assert two.metadata.dtype == record_dtype(one, "float32").metadata.dtype == "float32"
    assert two.metadata.corpus_fingerprint == one.metadata.corpus_fingerprint


def test_probing_on_two_processes_equals_one(tmp_path, data_dir, profile_file):
    args = ["probe", "--task", "sst2", "--profile", str(profile_file), "--data-dir", str(data_dir), "--quiet"]
    assert cli.main([*args, "--out", str(tmp_path / "one")]) == 0
    _accelerate(*args, "--out", str(tmp_path / "two"), cwd=tmp_path)
    keys = ["run_id", "value", "n_input_dependent"]
    one = ResultsTable(tmp_path / "one" / "results.csv").read().sort_values("run_id")[keys].reset_index(drop=True)
    two = ResultsTable(tmp_path / "two" / "results.csv").read().sort_values("run_id")[keys].reset_index(drop=True)
    assert len(one) == 6  # fractions 1, 1/2, 0 x 2 seeds, each written once (by the main process)
    pd.testing.assert_frame_equal(one, two)
    # The same constants and λ ranking (files differ only in their creation time).
    (c1,), (c2,) = (tmp_path / "one" / "constants").iterdir(), (tmp_path / "two" / "constants").iterdir()
    assert c1.name == c2.name and torch.equal(load_constants(c1).matrices, load_constants(c2).matrices)
    (r1,), (r2,) = ((tmp_path / run / "rankings").glob("*.safetensors") for run in ("one", "two"))
    assert r1.name == r2.name and torch.equal(load_ranking(r1).lambdas, load_ranking(r2).lambdas)
    # The same per-example predictions, written once (by the main process).
    p1 = load_run_predictions(RunFolder.at(tmp_path / "one"), one["run_id"])
    p2 = load_run_predictions(RunFolder.at(tmp_path / "two"), one["run_id"])
    assert all(np.array_equal(p1[r].predicted, p2[r].predicted) for r in one["run_id"])


def _values(out: Path) -> pd.Series:
    df = ResultsTable(out / "results.csv").read()
    return df.set_index("run_id")["value"].sort_index()


@pytest.fixture(scope="module")
def small_jobs(tmp_path_factory, data_dir):
    """The smallest grid that reaches every kind of job, run here once: (jobs, the folder they wrote, resources)."""
    tmp = tmp_path_factory.mktemp("jobs")
    profile = _profile(tmp, SMALL)
    # The workers are fresh processes: they learn the profile read from a file with their units.
    cfg = GridConfig(task="sst2", profile=str(profile), constants=("average", "zeros"), data_dir=str(data_dir))
    jobs = grid_jobs(cfg)
    # fraction 1 once, 1/2 with average (zeros at 1/2 too: ranked with zeros), fraction 0 per kind; 2 seeds each
    assert len(jobs) == 10 and len({j.id for j in jobs}) == 10
    assert {(j.constants, j.selection, j.fraction) for j in jobs} == {
        ("none", "none", "1"), ("average", "lambda", "1/2"), ("average", "none", "0"), ("zeros", "lambda", "1/2"),
        ("zeros", "none", "0")}
    # One seed of the shared fraction 1, a λ-ranked 1/2 and an all-constant 0 (of the other constants).
    jobs = [j for j in jobs if j.seed == 0 and (j.constants, j.fraction) in {("none", "1"), ("average", "1/2"),
                                                                               ("zeros", "0")}]
    assert len(jobs) == 3
    resources = Resources(str(data_dir), progress=False)
    sequential = run_jobs(jobs, RunFolder.at(tmp / "here"), resources)
    assert not sequential.failed, sequential.summary()
    yield jobs, tmp / "here", resources
    PROFILES.pop(SMALL["name"], None)


def test_jobs_on_a_pool_give_what_one_process_gives(small_jobs, tmp_path):
    jobs, here, resources = small_jobs
    pool = run_jobs(jobs, RunFolder.at(tmp_path / "pool"), resources, workers=2)
    assert not pool.failed, pool.summary()
    pd.testing.assert_series_equal(_values(tmp_path / "pool"), _values(here))
    assert finished(jobs, RunFolder.at(tmp_path / "pool")) == {j.key for j in jobs}


def test_jobs_through_submitit_give_what_one_process_gives(small_jobs, tmp_path):
    jobs, here, resources = small_jobs
    executor = submitit_executor(tmp_path / "submitit", cluster="local", timeout_min=20)
    submitted = run_jobs(jobs, RunFolder.at(tmp_path / "sub"), resources, executor=executor)
    assert not submitted.failed, submitted.summary()
    pd.testing.assert_series_equal(_values(tmp_path / "sub"), _values(here))


def test_finished_jobs_are_not_run_again_and_a_failing_one_is_reported(small_jobs, tmp_path):
    jobs, here, resources = small_jobs
    # Finished jobs are never dispatched again.
    shutil.copytree(here, tmp_path / "pool")
    before = (tmp_path / "pool" / "results.csv").read_bytes()
    again = run_jobs(jobs, RunFolder.at(tmp_path / "pool"), resources, workers=2)
    assert not again.done and not again.failed
    assert (tmp_path / "pool" / "results.csv").read_bytes() == before

    # A failing job (MNLI's data is not in the data directory) is reported with its id; the others still run.
    broken = Job(DEFAULT_MODEL, "mnli", "none", "none", "none", "1", 0, SMALL["name"], "official")
    fresh = [j for j in jobs if j.fraction == "0" and j.constants == "zeros"]
    report = run_jobs([broken, *fresh], RunFolder.at(tmp_path / "mixed"), resources, workers=2)
    assert [j.id for j in report.failed_jobs()] == [broken.id] and len(report.done) == 1
    assert broken.id in report.summary() and "papa jobs run" in report.summary()
    assert "MNLI" in (tmp_path / "mixed" / "jobs" / "failed.log").read_text() or \
        "mnli" in (tmp_path / "mixed" / "jobs" / "failed.log").read_text()
    assert finished(fresh, RunFolder.at(tmp_path / "mixed")) == {j.key for j in fresh}


def test_notebook_jobs_are_the_sections_grids(data_dir, monkeypatch):
    monkeypatch.setenv("PAPA_DATA_DIR", str(data_dir))
    jobs = notebook_jobs("quick")
    keys = [j.key for j in jobs]
    assert len(keys) == len(set(keys))
    by = pd.Series([(j.task, j.constants, j.constants_corpus, j.selection) for j in jobs]).value_counts()
    # 02: 5 tasks x the profile's fractions (1, those between, 0) x the seeds; 04: five more kinds at fraction 0;
    # 05: constants from WikiText ("mlm", MNLI not being here); 06: four more selection methods on SST-2 at the
    # fractions between; 07: the MLM task's own curve; 08: the decoder's LM curve for three methods (fraction 1, the
    # fractions between x three methods, fraction 0), its SST-2 and POS probe curves and its LM probe at 1 and 0.
    quick = get_profile("quick")
    seeds, fractions = len(quick.seeds), len(quick.fractions)
    mid = fractions - 2
    assert len(jobs) == seeds * (5 * fractions + 25 + 5 + 4 * mid + fractions + (2 + 3 * mid) + 2 * fractions + 2)
    assert by[("lm_probe", "none", "none", "none")] == seeds == by[("lm_probe", "average", "task", "none")]
    assert by[("pos", "average", "task", "lambda")] == 2 * mid * seeds  # the encoder's (02) and the decoder's (08)
    assert by[("lm", "average", "task", "lambda")] == mid * seeds == by[("lm", "average", "task", "first_to_last")]
    assert by[("sst2", "average", "task", "lambda")] == 2 * mid * seeds
    assert by[("cola", "zeros", "none", "none")] == seeds
    assert by[("ner", "average", "mlm", "none")] == seeds and by[("sst2", "average", "task", "random")] == mid * seeds
    assert by[("mlm", "average", "task", "lambda")] == mid * seeds
    assert {j.profile for j in jobs} == {"quick"}


def test_jobs_cli(tmp_path, data_dir, capsys):
    out = ["--profile", "quick", "--notebooks", "07_mlm_electra", "--out", str(tmp_path), "--data-dir",
           str(data_dir)]
    assert cli.main(["jobs", "list", *out]) == 0
    listed = capsys.readouterr().out.splitlines()
    quick = get_profile("quick")
    jobs = 2 * len(quick.fractions) * len(quick.seeds)  # MLM and SST-2, the profile's fractions each
    assert listed[-1] == f"0 of {jobs} jobs done ({tmp_path}/results.csv)"
    assert cli.main(["jobs", "run", "nosuchjob", *out]) == 2
    assert "no job nosuchjob in this reproduction" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["reproduce", "--workers", "0"])
    assert "expected a positive whole number" in capsys.readouterr().err
