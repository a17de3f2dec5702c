"""Every kind of bad input, in one place: each is refused with an error that names the problem and the fix, before any
work and without leaving a partial artifact, and the CLI turns it into one line ``papa <cmd>: error: ...`` and exit 2.

Cases tested elsewhere are listed where they are (not repeated); the rest are tested here. Cases that need the real
model or data are in tests/integration/test_reliability.py.

| bad input | tested in |
|---|---|
| unsupported architecture (attach) | test_attach.py::test_unsupported_architecture |
| unsupported architecture (load, CLI) | here: test_unsupported_architecture_fails_before_loading_weights |
| constants for another model / head count | test_constants.py::test_attach_validates_model_identity |
| constants for another length / layout | test_constants.py::test_check_compatible_length_and_layout; here (use time) |
| ranking for another model / head count | test_selection.py::test_check_compatible |
| ranking for another checkpoint / length / layout | here: test_ranking_for_another_checkpoint_length_or_layout |
| input longer than the constants | test_attach.py::test_input_longer_than_constants |
| length beyond the model's positions | here: test_max_length_beyond_the_model_positions |
| truncated or corrupted safetensors | test_constants.py::test_truncated_and_garbled_files, |
|   | test_selection.py::test_truncated_ranking_file; CLI: test_reliability.py |
| metadata that does not match its tensors | test_constants.py::test_bad_contents_are_named, |
|   | test_selection.py::test_inconsistent_ranking_files_rejected |
| NaN or negative constants | test_constants.py::test_bad_contents_are_named, ::test_in_memory_validation |
| unknown task, profile, kind, method | here: test_grid_config_errors, test_cli_unknown_names |
| bad profile file | here: test_profile_file_errors |
| unknown draw of a head order (lambda@seed0, random@x, a fixed order's variant, no such profile) | |
|   | test_selection.py::test_a_selection_names_its_method_and_which_draw_of_its_order; grid config here |
| another profile's ranking not learned yet | test_stability.py::test_rankings_of_disjoint_parts_and_other_draws_of_an_order_run_as_selections |
| disjoint training part beyond the split | test_profiles.py::test_disjoint_parts_share_no_example_with_the_grid_or_each_other |
| a part other than the two halves of a whole-split grid | test_stability.py::test_a_grid_on_the_whole_split_draws_its_parts_as_two_halves |
| λ checkpoint of other training, or not a checkpoint | test_ranking.py::test_a_checkpoint_of_other_training_is_refused |
| data directory without the task's files | test_data_readers.py::test_missing_file_says_where_and_what_to_set, |
|   | ::test_missing_data_directory; CLI here: test_cli_data_directory_without_the_files |
| malformed TSV / CoNLL line (file and line) | test_data_readers.py::test_malformed_line_names_file_and_line, |
|   | ::test_bad_label_names_file_and_line, ::test_malformed_conll_line; corpus files here |
| empty dataset or subset | test_data_readers.py::test_header_only_file_is_an_error, |
|   | test_features.py::test_empty_examples_are_an_error; corpus, extraction and limits here |
| fraction outside [0, 1] / no whole number of heads | test_selection.py::test_fraction_out_of_range_raises, |
|   | ::test_num_input_dependent; grid config here; "before any run" in test_reliability.py |
| empty seed list | here: test_empty_lists |
| device that is not available | here: test_unavailable_device; reproduce: test_reproduce_checks_before_any_kernel |
| model that cannot be found | here: test_model_not_found |
| a local model folder that is not there, or holds no config.json: refused before any data is read, with or without |
|   a data folder set | here: test_a_missing_model_folder_is_refused_before_any_data, ::..._as_a_subprocess |
| a data folder without the task's files: refused before the model loads | here: test_run_context_checked_at_the_edge |
| --max-length, --batch-size, --limit not positive / beyond the model | here: test_cli_numbers_checked_before_any_work |
| --out that is a file, or cannot be written | here: test_out_that_is_a_file, test_out_that_cannot_be_written |
| papa report --results a directory / missing file / no match | here: test_report_results_paths |
| reproduce: no CUDA, missing data directory, --out a file | here: test_reproduce_checks_before_any_kernel |
| NaN, infinite or negative constants counts | here: test_constants_counts_are_validated |
| corpus or data file that is not UTF-8 | here: test_files_that_are_not_utf8 |
| unknown --dtype | here: test_cli_numbers_checked_before_any_work |
| bad PAPA_FEATURE_* setting (budget, placement) | here: test_feature_settings_refused_before_the_model_loads |
| Ctrl-C: one line, exit 130, the line on its own | here: test_interrupt_says_what_is_kept |
| corrupt saved λ ranking: refused when the grid opens, | test_reliability.py::test_a_corrupt_saved_ranking_is_refused_ |
|   before a fraction that does not read it runs | before_the_first_run |
| a refusal leaves no phase times (or any file) behind | test_phases.py::test_a_refusal_leaves_no_times_behind_unless_ |
|   | work_was_kept; CLI: test_reliability.py::test_bad_input_fails_before_any_run |
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from tqdm.auto import tqdm
from transformers import MPNetConfig

import papa
from conftest import REPO, tiny_model, tiny_tokenizer
from papa import cli
from papa.core.errors import InputError
from papa.method.constants import (
    ConstantMatrices,
    ConstantsMetadata,
    data_free_constants,
)
from papa.method.layout import encode
from papa.method.models import load_model, resolve_device
from papa.method.rankings import HeadRanking
from papa.runs.experiment import GridConfig, run_grid
from papa.runs.profiles import PROFILES, Profile, get_profile
from papa.runs.results import ResultRow, ResultsTable
from papa.tasks.corpus import file_corpus
from papa.tasks.data import DataFormatError, load_examples


def cli_error(capsys, argv: list[str]) -> str:
    """Run the CLI, check it failed with one `papa <cmd>: error: ...` line and exit code 2; return that line."""
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"papa {argv[0]}: error: "), err
    return err


def usage_error(capsys, argv: list[str]) -> str:
    """Run the CLI on arguments argparse itself refuses: one `papa <cmd>: error: ...` line, exit code 2."""
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and err.startswith(f"papa {argv[0]}: error: "), err
    return err


def _nothing_written(path: Path) -> bool:
    return not path.exists() or not any(path.rglob("*"))


def _no_work(monkeypatch) -> None:
    """Make loading a model or a task's data fail the test: the checks under test must come before either."""
    def work(*args, **kwargs):
        raise AssertionError("work started before the input was checked")

    for target in ("papa.method.models.load_model", "papa.runs.session._load_model",
                   "papa.tasks.data.load_examples", "papa.tasks.corpus.task_corpus"):
        monkeypatch.setattr(target, work)


# ---- the model -----------------------------------------------------------------------------------------------------

def test_unsupported_architecture_fails_before_loading_weights(tmp_path, capsys):
    """Only config.json is there: the architecture is refused before weights or tokenizer are looked for."""
    model_dir = tmp_path / "mpnet"
    MPNetConfig(num_hidden_layers=1, num_attention_heads=2, hidden_size=8, intermediate_size=8).save_pretrained(model_dir)
    with pytest.raises(papa.UnsupportedModelError, match="'mpnet'.*AttentionInterface.*bert, deberta"):
        load_model(str(model_dir))
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a sentence\n")
    out = tmp_path / "out"
    err = cli_error(capsys, ["extract", "--model", str(model_dir), "--task", str(corpus), "--max-length", "16",
                             "--out", str(out), "--quiet"])
    assert "AttentionInterface" in err and _nothing_written(out)


def test_model_not_found(tmp_path, capsys):
    with pytest.raises(papa.ModelNotFoundError, match="no model directory at .*nope.*pass an existing directory"):
        load_model(str(tmp_path / "nope"))
    # A hub id that is neither cached nor reachable (the tests run with HF_HUB_OFFLINE=1).
    with pytest.raises(papa.ModelNotFoundError, match="could not load model 'papa-tests/no-such-model'.*local directory"):
        load_model("papa-tests/no-such-model")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a sentence\n")
    out = tmp_path / "out"
    err = cli_error(capsys, ["extract", "--model", str(tmp_path / "nope"), "--task", str(corpus), "--max-length",
                             "16", "--out", str(out), "--quiet"])
    assert "no model directory" in err and _nothing_written(out)


@pytest.mark.parametrize("data_folder", ["set", "unset"])
def test_a_missing_model_folder_is_refused_before_any_data(tmp_path, capsys, monkeypatch, data_folder):
    """A model folder that is not there is named before any data is read, whether or not the command gives a length
    and whether a data folder is set (unset: the hub, which would be asked first and could take half a minute)."""
    _no_work(monkeypatch)
    if data_folder == "unset":
        monkeypatch.delenv("PAPA_DATA_DIR", raising=False)
    missing = str(tmp_path / "no-such-model")
    out = ["--out", str(tmp_path / "out"), "--quiet"]
    for argv in (["extract", "--task", "sst2", "--model", missing, "--max-length", "64", *out],
                 ["extract", "--task", "sst2", "--model", missing, "--max-length", "64", "--split", "eval", *out],
                 ["probe", "--task", "sst2", "--model", missing, *out],
                 ["rank", "--task", "cola", "--model", missing, *out]):
        err = cli_error(capsys, argv)
        assert f"no model directory at {missing}" in err and "pass an existing directory" in err, err
    # Without the length extract needs, argparse names that first, as cheaply.
    assert "required: --max-length" in usage_error(capsys, ["extract", "--task", "sst2", "--model", missing, *out])
    # A folder that is there but holds no model.
    (tmp_path / "empty").mkdir()
    err = cli_error(capsys, ["extract", "--task", "sst2", "--model", str(tmp_path / "empty"), "--max-length", "64",
                             *out])
    assert f"no config.json in {tmp_path / 'empty'}" in err
    assert _nothing_written(tmp_path / "out")


def test_a_missing_model_folder_is_refused_before_any_data_as_a_subprocess(tmp_path):
    """`papa extract` as a user runs it, with no data folder set: one line naming the model, no traceback, at once."""
    env = {k: v for k, v in os.environ.items() if k != "PAPA_DATA_DIR"}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")  # the hub is never asked, whatever the fix does
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "papa.cli", "extract", "--task", "sst2", "--model",
                           str(tmp_path / "no-such-model"), "--max-length", "64", "--out", str(tmp_path / "out")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    took = time.perf_counter() - start
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("papa extract: error: no model directory at "), done.stderr
    assert took < 5, f"the refusal took {took:.1f} s: something was loaded before the model was checked"


def test_run_context_checked_at_the_edge(tmp_path, capsys, monkeypatch):
    """The CLI checks the run context from one table, cheapest field first, before any data or model is read: a data
    folder without the task's files is refused before the model loads."""
    _no_work(monkeypatch)
    empty = tmp_path / "data"
    empty.mkdir()
    out = ["--out", str(tmp_path / "out"), "--data-dir", str(empty), "--quiet"]
    for argv in (["probe", "--task", "sst2", *out], ["rank", "--task", "sst2", *out],
                 ["probe", "--task", "sst2", "--constants-corpus", "cola", "--data-dir", str(data_dir_of_sst2(tmp_path)),
                  "--out", str(tmp_path / "out"), "--quiet"]):
        err = cli_error(capsys, argv)
        assert "data file not found" in err and "--data-dir" in err, err
    # the model is named before the data folder: the cheapest check first
    err = cli_error(capsys, ["probe", "--task", "sst2", "--model", str(tmp_path / "none"), *out])
    assert "no model directory" in err
    assert _nothing_written(tmp_path / "out")
    from papa.runs.context import FIELDS

    assert [f.name for f in FIELDS] == ["model", "data_dir", "out", "device", "max_length"]
    assert all(f.accepts for f in FIELDS)


def data_dir_of_sst2(tmp_path: Path) -> Path:
    """A data folder holding SST-2's files alone (empty files: only their presence is checked here)."""
    root = tmp_path / "sst2-only"
    for name in ("train.tsv", "dev.tsv"):
        path = root / "glue_data" / "SST-2" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    return root


def test_max_length_beyond_the_model_positions():
    model, tok = tiny_model("bert"), tiny_tokenizer("bert")  # 128 absolute positions
    with pytest.raises(InputError, match="max_length=200 is longer than the 128 positions.*max_length=128 or less"):
        papa.extract_constants(model, tok, ["the cat sat"], max_length=200, progress=False)
    roberta, rtok = tiny_model("roberta"), tiny_tokenizer("roberta")  # positions start after the pad id
    limit = 128 - roberta.config.pad_token_id - 1
    with pytest.raises(InputError, match=f"the {limit} positions"):
        papa.extract_constants(roberta, rtok, ["a b"], max_length=limit + 1, progress=False)


# ---- artifacts made for something else -----------------------------------------------------------------------------

def _average_like(ctrl, n: int, layout: str) -> ConstantMatrices:
    """Average-kind constants (as `papa extract` makes) for `ctrl`'s model, with random non-negative entries."""
    g = torch.Generator().manual_seed(0)
    mats = torch.rand(ctrl.num_layers, ctrl.num_heads, n, n, generator=g)
    meta = ConstantsMetadata(kind="average", model=ctrl.signature, max_length=n, layout=layout)
    return ConstantMatrices(matrices=mats, metadata=meta)


def test_sep_last_constants_refuse_inputs_of_another_length():
    """In the sep_last layout the last slot is the final separator, so average constants only fit their length."""
    model, tok = tiny_model("bert"), tiny_tokenizer("bert")
    ctrl = papa.attach(model)
    ctrl.set_constants(_average_like(ctrl, 16, "sep_last"))
    ctrl.replace([(0, 1)])
    short = encode(tok, ["the cat sat"], max_length=12, model_type="bert").inputs
    with pytest.raises(InputError, match="12 positions.*padded to exactly 16.*max_length=16"):
        model(**short)
    model(**encode(tok, ["the cat sat"], max_length=16, model_type="bert").inputs)  # the right length is fine
    ctrl.keep_all()
    model(**short)  # nothing replaced: the constants are not used
    # Data-free constants are defined by slot alone, and standard-layout constants are cut to the input.
    for constants in (data_free_constants("toeplitz", ctrl.signature, 16), _average_like(ctrl, 16, "standard")):
        ctrl.set_constants(constants)
        ctrl.replace()
        model(**short)


def test_ranking_for_another_checkpoint_length_or_layout():
    model = tiny_model("bert")
    sig = papa.model_signature(model, "tiny-bert")
    ranking = HeadRanking.from_lambdas(torch.full((2, 4), 0.5), signature=sig, max_length=64, layout="sep_last")
    ranking.check_compatible(2, 4, "tiny-bert", signature=sig, max_length=64, layout="sep_last")
    other = papa.model_signature(tiny_model("bert", seed=1), "tiny-bert")  # same name and shape, other weights
    with pytest.raises(papa.IncompatibleArtifactError, match="weights_fingerprint.*papa rank"):
        ranking.check_compatible(2, 4, "tiny-bert", signature=other)
    with pytest.raises(papa.IncompatibleArtifactError, match="sequence length 64, not 128.*papa rank"):
        ranking.check_compatible(2, 4, "tiny-bert", max_length=128)
    with pytest.raises(papa.IncompatibleArtifactError, match="input layout 'sep_last', not 'standard'"):
        ranking.check_compatible(2, 4, "tiny-bert", layout="standard")


# ---- names: task, profile, kinds, methods --------------------------------------------------------------------------

def test_grid_config_errors(tmp_path):
    """Checked by GridConfig.resolved, before any model or data is loaded (the run folder stays empty)."""
    cfg = dict(task="sst2", folder=str(tmp_path / "out"))
    with pytest.raises(ValueError, match="unknown profile 'huge'; choose one of quick, cpu, full"):
        run_grid(GridConfig(**cfg, profile="huge"), progress=False)
    with pytest.raises(ValueError, match="unknown constants kind 'gaussian'; choose from average"):
        run_grid(GridConfig(**cfg, constants=("gaussian",)), progress=False)
    with pytest.raises(ValueError, match="unknown head selection method 'best'; choose one of lambda"):
        run_grid(GridConfig(**cfg, selections=("best",)), progress=False)
    with pytest.raises(ValueError, match="a profile named 'huge' learned, and there is no such profile"):
        run_grid(GridConfig(**cfg, selections=("lambda@huge",)), progress=False)
    with pytest.raises(ValueError, match="last_to_first is one fixed order and has no variants"):
        run_grid(GridConfig(**cfg, selections=("last_to_first@2",)), progress=False)
    with pytest.raises(ValueError, match="unknown task 'squad'; known tasks: cola"):
        run_grid(GridConfig(task="squad", folder=str(tmp_path / "out")), progress=False)
    with pytest.raises(ValueError, match="unknown task 'squad'"):
        GridConfig(**cfg, constants_corpus="squad").resolved()
    with pytest.raises(ValueError, match=r"\[0, 1\], got '3/2'"):
        GridConfig(**cfg, fractions=("1", "3/2")).resolved()
    with pytest.raises(ValueError, match="unknown rounding 'up'"):
        GridConfig(**cfg, rounding="up").resolved()
    assert _nothing_written(tmp_path / "out")


def test_cli_unknown_names(tmp_path, capsys):
    out = ["--out", str(tmp_path / "out"), "--quiet"]
    assert "unknown task 'squad'" in cli_error(capsys, ["probe", "--task", "squad", *out])
    assert "unknown profile 'huge'" in cli_error(capsys, ["probe", "--task", "sst2", "--profile", "huge", *out])
    assert "unknown constants kind" in cli_error(capsys, ["probe", "--task", "sst2", "--constants", "gauss", *out])
    assert "[0, 1]" in cli_error(capsys, ["probe", "--task", "sst2", "--fractions", "2", *out])
    assert "unknown task 'squad'" in cli_error(capsys, ["rank", "--task", "squad", *out])
    assert "no corpus file at" in cli_error(capsys, ["extract", "--task", str(tmp_path / "missing.txt"),
                                                     "--max-length", "16", *out])
    assert f"{tmp_path} is a directory, not a corpus" in cli_error(capsys, ["extract", "--task", str(tmp_path),
                                                                            "--max-length", "16", *out])
    # the CLI names its flag, the library its argument
    assert "(given as --data-dir /no/such/dir) does not exist" in cli_error(
        capsys, ["probe", "--task", "sst2", "--data-dir", "/no/such/dir", *out])
    assert _nothing_written(tmp_path / "out")


def test_profile_file_errors(tmp_path, monkeypatch):
    monkeypatch.setattr("papa.runs.profiles.PROFILES", dict(PROFILES))  # registrations stay inside this test

    def write(obj) -> Path:
        path = tmp_path / "p.json"
        path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
        return path

    good = get_profile(write({"name": "tiny", "train_limit": 8, "seeds": [3]}))
    assert (good.train_limit, good.seeds, good.eval_limit) == (8, (3,), PROFILES["quick"].eval_limit)
    assert GridConfig(task="sst2", profile=str(tmp_path / "p.json")).resolved().profile == "tiny"
    with pytest.raises(FileNotFoundError, match="no profile file at"):
        get_profile(tmp_path / "none.json")
    with pytest.raises(ValueError, match="not valid JSON"):
        get_profile(write("{"))
    with pytest.raises(ValueError, match="unknown field.*train_limt"):
        get_profile(write({"name": "x", "train_limt": 8}))
    with pytest.raises(ValueError, match="needs a \"name\""):
        get_profile(write({"train_limit": 8}))
    with pytest.raises(ValueError, match="train_limit must be a positive integer or null .*got 0"):
        get_profile(write({"name": "x", "train_limit": 0}))
    with pytest.raises(ValueError, match="seed list is empty"):
        get_profile(write({"name": "x", "seeds": []}))
    with pytest.raises(ValueError, match="unknown sample 'shuffled'; choose one of first, random"):
        get_profile(write({"name": "x", "sample": "shuffled"}))
    with pytest.raises(ValueError, match="defines 'quick' differently.*another name"):
        get_profile(write({"name": "quick", "epochs": 3}))


# ---- data ------------------------------------------------------------------------------------------------------------

def test_cli_data_directory_without_the_files(tmp_path, capsys):
    empty = tmp_path / "data"
    empty.mkdir()
    out = tmp_path / "out"
    err = cli_error(capsys, ["extract", "--task", "cola", "--max-length", "16", "--out", str(out),
                             "--data-dir", str(empty), "--quiet"])
    assert str(empty / "glue_data/CoLA/train.tsv") in err and "--data-dir" in err and "PAPA_DATA_DIR" in err
    assert _nothing_written(out)


def test_malformed_corpus_file_names_file_and_line(tmp_path, capsys):
    path = tmp_path / "corpus.tsv"
    path.write_text("sentence\tlabel\na good film\t1\nno label here\nthe end\t0\n")
    with pytest.raises(InputError, match=r"corpus\.tsv, line 3: 1 tab-separated fields, the header has 2: fix"):
        file_corpus(path)
    err = cli_error(capsys, ["extract", "--task", str(path), "--max-length", "16", "--out", str(tmp_path / "out"),
                             "--quiet"])
    assert "line 3" in err and _nothing_written(tmp_path / "out")


def test_empty_corpus_and_subsets(tmp_path):
    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n")
    with pytest.raises(InputError, match="has no examples"):
        file_corpus(blank)
    empty_tsv = tmp_path / "empty.tsv"
    empty_tsv.write_text("")
    with pytest.raises(InputError, match="is empty: a .tsv corpus needs a header"):
        file_corpus(empty_tsv)
    with pytest.raises(InputError, match="corpus is empty"):
        papa.extract_constants(tiny_model("bert"), tiny_tokenizer("bert"), [], max_length=8, progress=False)
    with pytest.raises(ValueError, match="eval_limit must be a positive integer"):
        Profile("x", train_limit=8, eval_limit=0, corpus_limit=8, rank_limit=8, rank_epochs=1, epochs=1)


# ---- the grid ----------------------------------------------------------------------------------------------------

def test_empty_lists(capsys, tmp_path):
    with pytest.raises(ValueError, match="seed list is empty: give at least one seed"):
        GridConfig(task="sst2", seeds=()).resolved()
    with pytest.raises(ValueError, match="fraction list is empty"):
        GridConfig(task="sst2", fractions=()).resolved()
    with pytest.raises(ValueError, match="seeds must be integers"):
        GridConfig(task="sst2", seeds=(0, "1")).resolved()
    assert GridConfig(task="sst2").resolved().seeds == PROFILES["quick"].seeds  # None: the profile's
    with pytest.raises(ValueError, match="seed list is empty"):
        Profile("x", train_limit=8, eval_limit=8, corpus_limit=8, rank_limit=8, rank_epochs=1, epochs=1, seeds=())
    with pytest.raises(SystemExit) as exc:  # argparse: --seeds needs at least one value
        cli.main(["probe", "--task", "sst2", "--seeds", "--out", str(tmp_path)])
    assert exc.value.code == 2 and "--seeds: expected at least one argument" in capsys.readouterr().err


def test_unavailable_device(tmp_path, capsys):
    with pytest.raises(ValueError, match="cannot read 'gpu' as a device.*use cpu, cuda"):
        resolve_device("gpu")
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    with pytest.raises(ValueError, match="CUDA is not available here: use device='cpu'"):
        resolve_device("cuda:1")
    with pytest.raises(ValueError, match="CUDA is not available"):
        GridConfig(task="sst2", device="cuda").resolved()
    out = ["--out", str(tmp_path / "out"), "--quiet"]
    assert "--device cpu" in cli_error(capsys, ["probe", "--task", "sst2", "--device", "cuda", *out])
    assert "--device cpu" in cli_error(capsys, ["extract", "--task", "sst2", "--max-length", "16", "--device",
                                                "cuda", *out])
    assert _nothing_written(tmp_path / "out")


# ---- numbers, output paths, report inputs --------------------------------------------------------------------------

def test_cli_numbers_checked_before_any_work(tmp_path, capsys, monkeypatch):
    _no_work(monkeypatch)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a sentence\n")
    out = tmp_path / "out"
    base = ["extract", "--task", str(corpus), "--out", str(out), "--quiet"]
    for option, value in (("--max-length", "-5"), ("--max-length", "0"), ("--batch-size", "0"), ("--limit", "0")):
        args = ["--max-length", "16", option, value] if option != "--max-length" else [option, value]
        err = usage_error(capsys, [*base, *args])
        assert f"argument {option}: expected a positive whole number, got '{value}'" in err
    # Beyond the offline model's 512 positions: read off its config, before the corpus or the weights.
    assert "longer than the 512 positions" in cli_error(capsys, [*base, "--max-length", "600"])
    assert "invalid choice: 'float64'" in usage_error(capsys, [*base, "--max-length", "16", "--dtype", "float64"])
    assert _nothing_written(out)


@pytest.mark.parametrize("variable, value, said", [
    ("PAPA_FEATURE_CACHE_GB", "lots", "is not a number of GiB"), ("PAPA_FEATURE_DISK_GB", "-1", "is negative"),
    ("PAPA_FEATURE_STORE", "ram", "choose one of"), ("PAPA_FEATURE_STORE", "device", "host memory is its device")])
def test_feature_settings_refused_before_the_model_loads(tmp_path, capsys, monkeypatch, variable, value, said):
    """A bad PAPA_FEATURE_* setting is refused before the model loads, not when the first features are stored (after
    the model has loaded, with phase times left in the run's folder)."""
    _no_work(monkeypatch)
    monkeypatch.setenv(variable, value)
    out = tmp_path / "out"
    err = cli_error(capsys, ["probe", "--task", "sst2", "--profile", "quick", "--out", str(out), "--quiet"])
    assert variable in err and said in err
    assert _nothing_written(out)


def test_out_that_is_a_file(tmp_path, capsys, monkeypatch):
    _no_work(monkeypatch)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a sentence\n")
    afile = tmp_path / "afile"
    afile.write_text("keep me")
    err = cli_error(capsys, ["extract", "--task", str(corpus), "--max-length", "16", "--out", str(afile), "--quiet"])
    assert f"--out {afile}: {afile} is not a directory" in err
    err = cli_error(capsys, ["probe", "--task", "sst2", "--out", str(afile / "sub"), "--quiet"])
    assert f"{afile} (on the way to {afile / 'sub'}) is not a directory" in err
    assert "is not a directory" in cli_error(capsys, ["rank", "--task", "sst2", "--out", str(afile), "--quiet"])
    assert afile.read_text() == "keep me" and sorted(p.name for p in tmp_path.iterdir()) == ["afile", "corpus.txt"]


def _unwritable_dir(tmp_path: Path) -> Path:
    """A directory this process cannot create files in: read-only permissions, or for root (whom permissions do not
    stop) a read-only system folder."""
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o555)
        return locked
    for candidate in (Path("/sys"), Path("/proc/self")):
        try:
            fd, name = tempfile.mkstemp(dir=candidate)
        except OSError:
            return candidate
        os.close(fd)
        os.unlink(name)
    pytest.skip("no directory here that root cannot write in")


def test_out_that_cannot_be_written(tmp_path, capsys, monkeypatch):
    _no_work(monkeypatch)
    locked = _unwritable_dir(tmp_path)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a sentence\n")
    err = cli_error(capsys, ["extract", "--task", str(corpus), "--max-length", "16", "--out", str(locked / "out"),
                             "--quiet"])
    assert f"cannot write in {locked}" in err and "pass a directory you can write to" in err
    assert f"cannot write in {locked}" in cli_error(capsys, ["probe", "--task", "sst2", "--out", str(locked / "o")])
    assert not (locked / "out").exists() and not (locked / "o").exists()
    assert not list(tmp_path.glob("**/.papa-write-test.*"))


def test_report_results_paths(tmp_path, capsys):
    err = cli_error(capsys, ["report", "--results", str(tmp_path)])
    assert f"--results {tmp_path} is a directory" in err and "results.csv" in err
    table = ResultsTable(tmp_path / "results.csv")
    table.append(ResultRow(model="org/m", task="sst2", constants="none", constants_corpus="none", selection="none",
                           fraction=1.0, n_input_dependent=8, seed=0, profile="quick", metric="accuracy", value=0.9,
                           run_id="r0"))
    # The directory holding a table: the error names the file to pass.
    assert f"--results {tmp_path / 'results.csv'}" in cli_error(capsys, ["report", "--results", str(tmp_path)])
    missing = tmp_path / "nope.csv"
    assert f"no results table at {missing}" in cli_error(capsys, ["report", "--results", str(missing)])
    # A filter that matches no row is an answer, not an error: exit code 1 and one line saying so.
    assert cli.main(["report", "--results", str(tmp_path / "results.csv"), "--task", "cola"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("papa report: no rows of") and "--task cola" in err
    afile_dir = tmp_path / "out.csv"
    afile_dir.mkdir()
    assert "is a directory: give a file name" in cli_error(
        capsys, ["report", "--results", str(tmp_path / "results.csv"), "--out", str(afile_dir)])


def test_report_sorts_fractions_as_numbers(tmp_path, capsys):
    table = ResultsTable(tmp_path / "results.csv")
    for label, kind, method in (("1/8", "average", "lambda"), ("1/2", "average", "lambda"), ("0", "average", "none"),
                                ("1", "none", "none"), ("1/16", "average", "lambda")):
        table.append(ResultRow(model="org/m", task="sst2", constants=kind, constants_corpus="task", selection=method,
                               fraction=label, n_input_dependent=0, seed=0, profile="quick", metric="accuracy",
                               value=0.5, run_id=f"r{label}"))
    assert cli.main(["report", "--results", str(tmp_path / "results.csv")]) == 0
    lines = capsys.readouterr().out.splitlines()[1:]
    assert [line.split()[7] for line in lines] == ["1", "1/2", "1/8", "1/16", "0"]


def test_report_compare(tmp_path, capsys):
    table = ResultsTable(tmp_path / "results.csv")
    for layout, shift in (("official", 0.0), ("sep_last", 0.01)):
        for seed in range(3):
            table.append(ResultRow(model="org/m", task="sst2", constants="none", constants_corpus="none",
                                   selection="none", fraction=1.0, n_input_dependent=8, seed=seed, profile="quick",
                                   layout=layout, metric="accuracy", value=0.8 + seed / 100 + shift * (1 + seed / 10),
                                   run_id=f"{layout}{seed}"))
    results = str(tmp_path / "results.csv")
    assert cli.main(["report", "--results", results, "--compare", "layout", "official", "sep_last"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "difference" in out[0] and "detectable" in out[0] and len(out) == 2
    assert "0.0110" in out[1]  # the mean paired difference: 0.01 * (1 + 0.1)
    err = cli_error(capsys, ["report", "--results", results, "--compare", "layout", "official", "standard"])
    assert "no row has layout 'standard'" in err and "official, sep_last" in err
    err = cli_error(capsys, ["report", "--results", results, "--compare", "seed", "0", "1"])
    assert "compare settings by one of" in err


#: (column, reference, other) for every column docs/cli.md names for --compare
COMPARED = [("constants", "average", "identity"), ("selection", "lambda", "random"), ("fraction_label", "1", "0"),
            ("constants_corpus", "task", "mlm"), ("layout", "official", "sep_last"),
            ("probe_inputs", "raw", "standardized"), ("dtype", "float32", "bfloat16")]


def _settings_table(path: Path) -> Path:
    """A results table whose rows vary every compared column: the unchanged model, constants of two kinds and two
    corpora at fraction 0, two selections at 1/2, in two layouts, probe inputs and dtypes, 3 seeds each."""
    table = ResultsTable(path)
    settings = [("none", "none", "none", 1.0), ("average", "task", "none", 0.0), ("average", "mlm", "none", 0.0),
                ("identity", "none", "none", 0.0), ("average", "task", "lambda", 0.5),
                ("average", "task", "random", 0.5)]
    rows = []
    for i, (constants, corpus, selection, fraction) in enumerate(settings):
        for layout in ("official", "sep_last"):
            for inputs in ("raw", "standardized"):
                for dtype in ("float32", "bfloat16"):
                    for seed in range(3):
                        rows.append(ResultRow(model="org/m", task="sst2", constants=constants,
                                              constants_corpus=corpus, selection=selection, fraction=fraction,
                                              n_input_dependent=int(8 * fraction), seed=seed, profile="quick",
                                              layout=layout, dtype=dtype, probe_inputs=inputs, metric="accuracy",
                                              value=0.7 + i / 100 + seed / 1000, run_id=f"r{len(rows)}"))
    table.append(rows)
    return path


@pytest.mark.parametrize("column, reference, other", COMPARED)
def test_report_compares_every_column_it_names(tmp_path, capsys, column, reference, other):
    results = str(_settings_table(tmp_path / "results.csv"))
    assert cli.main(["report", "--results", results, "--compare", column, reference, other]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "difference" in out[0] and len(out) >= 2
    header = out[0].split()
    assert column not in header  # the compared column is what differs, not a row's setting
    # every other column held fixed (8 combinations of layout, probe inputs and dtype; 4 where one of them is
    # compared), a "none" where nothing applies pairing with any value: the unchanged model with each of the 3
    # constants at fraction 0, average constants of both corpora with identity, the two corpora, the two selections
    expected = {"constants": 8 * 2, "selection": 8, "fraction_label": 8 * 3, "constants_corpus": 8,
                "layout": 4 * 6, "probe_inputs": 4 * 6, "dtype": 4 * 6}[column]
    assert len(out) - 1 == expected


def test_report_on_a_table_of_another_format_says_so_in_one_line(tmp_path, capsys):
    import pandas as pd

    path = _settings_table(tmp_path / "results.csv")
    pd.read_csv(path).drop(columns=["format"]).to_csv(path, index=False)  # papa's first format had no such column
    assert cli.main(["report", "--results", str(path), "--compare", "layout", "official", "sep_last"]) == 2
    err = capsys.readouterr().err
    assert "results table that is in artifact format 1; this papa reads format 2" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


# ---- reproduce ---------------------------------------------------------------------------------------------------

def test_reproduce_checks_before_any_kernel(tmp_path, capsys, monkeypatch):
    def kernel(*args, **kwargs):
        raise AssertionError("a notebook was started before the input was checked")

    monkeypatch.setattr("papermill.execute_notebook", kernel)
    out = tmp_path / "out"
    err = cli_error(capsys, ["reproduce", "--data-dir", str(tmp_path / "nodata"), "--out", str(out), "--quiet"])
    assert f"data directory {tmp_path / 'nodata'}" in err and "does not exist" in err
    afile = tmp_path / "afile"
    afile.write_text("")
    assert "is not a directory" in cli_error(capsys, ["reproduce", "--out", str(afile), "--quiet"])
    if not torch.cuda.is_available():
        assert "--device cpu" in cli_error(capsys, ["reproduce", "--device", "cuda", "--out", str(out), "--quiet"])
    assert _nothing_written(out) and not list(tmp_path.rglob("*.failed.ipynb"))


def test_reproduce_on_other_models_and_tasks_refuses_before_any_kernel(tmp_path, capsys, monkeypatch):
    def kernel(*args, **kwargs):
        raise AssertionError("a notebook was started before the input was checked")

    monkeypatch.setattr("papermill.execute_notebook", kernel)
    model = tmp_path / "my-encoder"
    tiny_model("bert", layers=2, heads=4).save_pretrained(model)
    tiny_tokenizer("bert").save_pretrained(model)
    capsys.readouterr()  # the progress bar of the save
    out = ["--out", str(tmp_path / "out"), "--quiet"]
    err = cli_error(capsys, ["reproduce", "--models", str(model), "--tasks", "sst2", "cola", "--notebooks",
                             "01_method", *out])
    assert "notebook 01_method takes one task, and --tasks sst2 cola gives 2" in err
    assert "--notebooks 01_method --tasks sst2" in err
    err = cli_error(capsys, ["reproduce", "--models", str(model), "bert-base-uncased", "--notebooks", "03_constant_patterns",
                             *out])
    assert "takes one model" in err
    err = cli_error(capsys, ["reproduce", "--models", str(model), "--notebooks", "07_mlm_electra", "08_decoders",
                             *out])
    assert "notebook 08_decoders cannot run on these" in err and "'lm'" in err and "--notebooks 07_mlm_electra" in err
    err = cli_error(capsys, ["reproduce", "--tasks", "sst3", "--notebooks", "01_method", *out])
    assert "unknown task 'sst3'" in err
    err = cli_error(capsys, ["reproduce", "--models", str(tmp_path / "nothing-here"), *out])
    assert "no model there" in err
    assert cli_error(capsys, ["jobs", "list", "--models", str(model), "--tasks", "sst2", "cola", "--notebooks",
                              "01_method", *out[:2]]).count("takes one task") == 1
    # the ids of `papa jobs run` may follow the options
    assert "no job abc, def in this reproduction" in cli_error(capsys, ["jobs", "run", "--profile", "quick", "abc",
                                                                        "def", *out[:2]])
    assert _nothing_written(tmp_path / "out") and not list(tmp_path.rglob("*.failed.ipynb"))


def test_an_encoder_without_notebooks_named_runs_every_notebook_that_applies(tmp_path, capsys):
    """`--models <an encoder>` alone: the decoders' notebook is left out, named once with its reason, the rest run."""
    model = tmp_path / "my-encoder"
    tiny_model("bert", layers=2, heads=4).save_pretrained(model)
    tiny_tokenizer("bert").save_pretrained(model)
    capsys.readouterr()
    assert cli.main(["jobs", "list", "--models", str(model), "--out", str(tmp_path / "out")]) == 0
    out, err = capsys.readouterr()
    assert err.count("leaving out") == 1 and "papa jobs: leaving out 08_decoders: task 'lm' scores a causal LM" in err
    assert "|lm|" not in out and "|sst2|" in out and "jobs done" in out
    # a refusal of every notebook is the batch's, said as such
    err = cli_error(capsys, ["jobs", "list", "--models", str(tmp_path / "nothing-here"), "--out", str(tmp_path / "o")])
    assert "no model there" in err and "cannot run on these" not in err


# ---- artifacts and files ------------------------------------------------------------------------------------------

def test_constants_counts_are_validated(tmp_path):
    model = tiny_model("bert")
    constants = papa.extract_constants(model, tiny_tokenizer("bert"), ["the cat sat", "a dog ran"], max_length=8,
                                       progress=False, model_name="tiny-bert")
    good = constants.save(tmp_path / "good.safetensors")
    assert torch.equal(papa.load_constants(good).counts, constants.counts)
    for name, value, message in (("nan", float("nan"), "non-finite .*observation count at row 1, column 2"),
                                 ("inf", float("inf"), "non-finite"),
                                 ("negative", -1.0, "negative observation count at row 1, column 2")):
        counts = constants.counts.clone()
        counts[1, 2] = value
        path = tmp_path / f"{name}.safetensors"
        save_file({"matrices": constants.matrices, "counts": counts}, str(path),
                  metadata={"papa": constants.metadata.to_json()})
        with pytest.raises(papa.CorruptArtifactError, match=message):
            papa.load_constants(path)
        with pytest.raises(papa.CorruptArtifactError, match=message):  # and in memory
            ConstantMatrices(matrices=constants.matrices, metadata=constants.metadata, counts=counts)


def test_files_that_are_not_utf8(tmp_path, capsys, data_dir):
    latin = tmp_path / "corpus.txt"
    latin.write_bytes("first line\ncafé au lait\n".encode("latin-1"))
    with pytest.raises(InputError, match=r"corpus\.txt, line 2: byte 0xe9 is not UTF-8 text.*convert"):
        file_corpus(latin)
    tsv = tmp_path / "corpus.tsv"
    tsv.write_bytes("sentence\tlabel\nna\xefve\t1\n".encode("latin-1"))
    with pytest.raises(InputError, match=r"corpus\.tsv, line 2: byte 0xef"):
        file_corpus(tsv)
    err = cli_error(capsys, ["extract", "--task", str(latin), "--max-length", "16", "--out", str(tmp_path / "out"),
                             "--quiet"])
    assert "corpus.txt, line 2" in err and _nothing_written(tmp_path / "out")
    # A task's data file: the reader names the file and the line too.
    glue = tmp_path / "data" / "glue_data" / "SST-2"
    glue.mkdir(parents=True)
    original = (data_dir / "glue_data" / "SST-2" / "dev.tsv").read_bytes().splitlines(keepends=True)
    (glue / "dev.tsv").write_bytes(b"".join(original[:3]) + "caf\xe9\t1\n".encode("latin-1"))
    with pytest.raises(DataFormatError, match=r"dev\.tsv, line 4: byte 0xe9 is not UTF-8"):
        load_examples("sst2", "eval", data_dir=tmp_path / "data")


def test_interrupt_says_what_is_kept(tmp_path, capsys, monkeypatch):
    """Ctrl-C: no KeyboardInterrupt traceback but one line, on a line of its own below the progress bar, exit 130."""
    def interrupted(*args, **kwargs):
        bar = tqdm(total=4, desc="extract constants", file=sys.stderr)
        bar.update(1)
        raise KeyboardInterrupt

    monkeypatch.setattr("papa.runs.constants_cache.extract_constants", interrupted)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a sentence\n")
    out = tmp_path / "out"
    assert cli.main(["extract", "--task", str(corpus), "--max-length", "16", "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert "\npapa extract: interrupted: nothing was written" in err and "run the same command again" in err
    assert err.endswith("again\n") and err.count("papa extract") == 1
    assert _nothing_written(out)
