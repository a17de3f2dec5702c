"""Errors in the caller's language: the library's advice names arguments (``rounding='down'``), the CLI's names flags
(``--rounding down``). Every message that suggests a setting holds it as a `papa.core.errors.Arg`; each is triggered
here from the library and, where the CLI can reach it, from the command line, and both spellings are checked. A
static pass over papa/ finds every `Arg` and every flag written into a library message, so a new one cannot be left
out of the table below."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import torch

import papa
from conftest import tiny_model, tiny_tokenizer
from papa import cli
from papa.core.artifacts import check_output_dir, check_output_file
from papa.core.errors import Arg, InputError, PapaError
from papa.core.settings import Resources
from papa.core.vocabulary import DECODER_LAYOUT
from papa.method.capture import AttentionStats
from papa.method.layout import layout_for
from papa.method.models import resolve_device
from papa.method.selection import num_input_dependent, replacement_order
from papa.reproduce.batch import Batch
from papa.reproduce.jobs import notebook_jobs
from papa.reproduce.notebooks import check_batch, with_subjects
from papa.runs.constants_cache import extract_to_file
from papa.runs.experiment import GridConfig
from papa.runs.stability import ranking_stability
from papa.tasks.corpus import CorpusSource, file_corpus
from papa.tasks.data import load_examples

PAPA = Path(papa.__file__).parent
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]+")
ARGUMENT = re.compile(r"\b[a-z][a-z_]*=(?!=)")


# ---- the two spellings ---------------------------------------------------------------------------------------------

def test_arg_spellings():
    assert (Arg("rounding", "down").for_library(), Arg("rounding", "down").for_cli()) == \
        ("rounding='down'", "--rounding down")
    assert (Arg("data_dir").for_library(), Arg("data_dir").for_cli()) == ("data_dir=", "--data-dir")
    assert Arg("fractions", ["1", "1/2"]).for_cli() == "--fractions 1 1/2"
    assert Arg("out_dir", "x", flag="--out").for_cli() == "--out x"
    assert Arg("layout", None).for_cli() == "no --layout"
    assert f"pass {Arg('max_length', 64)}" == "pass max_length=64"


def test_cli_message_replaces_longest_first():
    given, most = Arg("max_length", 512), Arg("max_length", 5)
    err = InputError(f"{given} is too long: use {most}", advice=(most, given))
    assert str(err) == "max_length=512 is too long: use max_length=5"
    assert err.cli_message() == "--max-length 512 is too long: use --max-length 5"


def test_advice_missing_from_its_message_is_a_bug():
    with pytest.raises(ValueError, match="not in the message"):
        InputError("pass something", advice=[Arg("rounding", "down")])


# ---- every message that suggests a setting, from both sides --------------------------------------------------------

def _cli_flags() -> set[str]:
    flags = set()
    parser = cli.build_parser()
    for action in parser._subparsers._group_actions:  # noqa: SLF001 -- argparse keeps subcommands here
        for sub in action.choices.values():
            flags |= {s for a in sub._actions for s in a.option_strings}  # noqa: SLF001
    return flags


def _arg_sites() -> set[tuple[str, str]]:
    """(module, argument) of every `Arg(...)` written in papa/ (its first argument, a string literal)."""
    sites = set()
    for path in PAPA.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Arg":
                first = node.args[0]  # a literal name, or the variable a helper takes it in (check_output_dir)
                name = first.value if isinstance(first, ast.Constant) else ast.unparse(first)
                sites.add((path.relative_to(PAPA).as_posix(), name))
    return sites


def _tiny_dir(tmp_path: Path) -> Path:
    path = tmp_path / "tiny-bert"
    tiny_model("bert").save_pretrained(path)
    tiny_tokenizer("bert").save_pretrained(path)
    return path


def _mismatched_constants():
    model, tok = tiny_model("bert"), tiny_tokenizer("bert")
    made = papa.extract_constants(model, tok, ["the cat sat"], max_length=16, layout="official", progress=False)
    return made, papa.attach(model).signature


def _no_header_tsv(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.tsv"
    path.write_text("words\tlabel\nthe cat\t1\n")
    return path


def _offline(*args, **kwargs):
    raise ConnectionError("the hub cannot be reached")


def _no_store_fits(tmp_path: Path, monkeypatch):
    from papa.probing.feature_store import CACHE_BUDGET_ENV, DISK_BUDGET_ENV, plan_store

    monkeypatch.setenv(CACHE_BUDGET_ENV, "0")
    monkeypatch.setenv(DISK_BUDGET_ENV, "0")
    plan_store(torch.ones(2, 4, dtype=torch.bool), 3, 8, torch.device("cpu"), folder=tmp_path)


def _afile(tmp_path: Path) -> Path:
    path = tmp_path / "afile"
    path.write_text("keep me")
    return path


# One case per message: what raises it in the library, the CLI arguments that reach it (None: no command can), the
# (module, argument) of the `Arg`s it covers, and the advice each side must show.
CASES: dict[str, dict] = {
    "rounding": dict(
        library=lambda tmp, mp: num_input_dependent("1/16", 72, rounding="exact"),
        cli=lambda tmp: ["probe", "--model", str(_tiny_dir(tmp)), "--task", "sst2", "--fractions", "1/3",
                         "--rounding", "exact", "--out", str(tmp / "out"), "--quiet"],
        sites={("method/selection.py", "rounding")}, library_says=["rounding='down'"], cli_says=["--rounding down"]),
    "random seed": dict(
        library=lambda tmp, mp: replacement_order("random", 2, 4, seed=None),
        cli=None, sites={("method/selection.py", "seed")}, library_says=["seed=0"], cli_says=["--seeds 0"]),
    "empty fractions": dict(
        library=lambda tmp, mp: GridConfig(task="sst2", fractions=[]).resolved(),
        cli=None, sites={("runs/session.py", "fractions")}, library_says=["fractions=['1', '1/2', '0']"],
        cli_says=["--fractions 1 1/2 0"]),
    "one seed to compare rankings": dict(
        library=lambda tmp, mp: ranking_stability(GridConfig(task="sst2"), seeds=(0, 0)),
        cli=None, sites={("runs/stability.py", "seeds")}, library_says=["seeds=[0, 1]"], cli_says=["--seeds 0 1"]),
    "empty seeds": dict(
        library=lambda tmp, mp: GridConfig(task="sst2", seeds=[]).resolved(),
        cli=None, sites={("runs/session.py", "seeds")}, library_says=["seeds=[0, 1, 2]"],
        cli_says=["--seeds 0 1 2"]),
    "lm task on an encoder": dict(
        library=lambda tmp, mp: GridConfig(task="lm").resolved(),
        cli=lambda tmp: ["probe", "--task", "lm", "--out", str(tmp / "out"), "--quiet"],
        sites={("tasks/registry.py", "model")}, library_says=["model='smollm2'"], cli_says=["--model smollm2"]),
    "capture length": dict(
        library=lambda tmp, mp: AttentionStats(1, 1, 4).add(0, torch.ones(1, 1, 8, 8), torch.ones(1, 8, dtype=bool)),
        cli=None, sites={("method/capture.py", "max_length")}, library_says=["max_length=4", "larger max_length="],
        cli_says=["--max-length 4", "larger --max-length"]),
    "constants length": dict(
        library=lambda tmp, mp: (lambda c, s: c.check_compatible(s, max_length=32))(*_mismatched_constants()),
        cli=None, sites={("method/constants.py", "max_length")}, library_says=["max_length=32"],
        cli_says=["--max-length 32"]),
    "constants layout": dict(
        library=lambda tmp, mp: (lambda c, s: c.check_compatible(s, layout="sep_last"))(*_mismatched_constants()),
        cli=None, sites={("method/constants.py", "layout")}, library_says=["layout='sep_last'"],
        cli_says=["--layout sep_last"]),
    "length beyond the positions": dict(
        library=lambda tmp, mp: papa.extract_constants(tiny_model("bert"), tiny_tokenizer("bert"), ["a cat"],
                                                   max_length=200, progress=False),
        cli=None,  # the CLI refuses it from the config alone (the case below)
        sites={("method/extract.py", "max_length")}, library_says=["max_length=200", "max_length=128 or less"],
        cli_says=["--max-length 200", "--max-length 128 or less"]),
    "length beyond the positions, from the config": dict(
        library=lambda tmp, mp: extract_to_file("sentence-transformers/all-MiniLM-L6-v2", CorpusSource("sst2"),
                                                max_length=600, into=tmp / "out",
                                                resources=Resources(progress=False)),
        cli=lambda tmp: ["extract", "--task", "sst2", "--max-length", "600", "--out", str(tmp / "out"), "--quiet"],
        sites={("method/extract.py", "max_length")}, library_says=["max_length=600", "max_length=512 or less"],
        cli_says=["--max-length 600", "--max-length 512 or less"]),
    "layout of a decoder": dict(
        library=lambda tmp, mp: layout_for(True, "sep_last", "official"),
        cli=lambda tmp: ["extract", "--model", "smollm2", "--task", "sst2", "--layout", "sep_last", "--max-length",
                         "16", "--out", str(tmp / "out"), "--quiet"],
        sites={("method/layout.py", "layout")}, library_says=[f"layout={DECODER_LAYOUT!r}"],
        cli_says=[f"--layout {DECODER_LAYOUT}"]),
    "probe inputs of a task without a probe": dict(
        library=lambda tmp, mp: GridConfig(task="lm", model="smollm2", probe_inputs="standardized").resolved(),
        cli=lambda tmp: ["probe", "--model", "smollm2", "--task", "lm", "--probe-inputs", "standardized", "--out",
                         str(tmp / "out"), "--quiet"],
        sites={("probing/standardize.py", "probe_inputs")}, library_says=["probe_inputs=None"],
        cli_says=["no --probe-inputs"]),
    "device": dict(
        library=lambda tmp, mp: resolve_device("cuda"),
        cli=lambda tmp: ["probe", "--task", "sst2", "--device", "cuda", "--out", str(tmp / "out"), "--quiet"],
        sites={("method/models.py", "device")}, library_says=["device='cpu'"], cli_says=["--device cpu"]),
    "tf32 on the CPU": dict(
        library=lambda tmp, mp: GridConfig(task="sst2", precision="tf32").resolved(),
        cli=lambda tmp: ["probe", "--task", "sst2", "--precision", "tf32", "--out", str(tmp / "out"), "--quiet"],
        sites={("method/precision.py", "precision"), ("method/precision.py", "device")},
        library_says=["precision='float32'", "precision='bf16'", "device='cuda'"],
        cli_says=["--precision float32", "--precision bf16", "--device cuda"]),
    "graphed steps on the CPU": dict(
        library=lambda tmp, mp: GridConfig(task="sst2", steps="graphed").resolved(),
        cli=lambda tmp: ["probe", "--task", "sst2", "--steps", "graphed", "--out", str(tmp / "out"), "--quiet"],
        sites={("probing/step_modes.py", "steps"), ("probing/step_modes.py", "device")},
        library_says=["steps='eager'", "steps='compiled'", "device='cuda'"],
        cli_says=["--steps eager", "--steps compiled", "--device cuda"]),
    "features fit no store": dict(
        library=lambda tmp, mp: _no_store_fits(tmp, mp),
        cli=None,  # the CLI reaches it only by a run whose features exceed the machine's memory and disk
        sites={("probing/feature_store.py", "precision"), ("probing/feature_store.py", "batch_order")},
        library_says=["batch_order='chunks'", "precision='bf16_with_store'", "precision='bf16_store'",
                      "batch_order='blocks'"],
        cli_says=["--batch-order chunks", "--precision bf16_with_store", "--precision bf16_store",
                  "--batch-order blocks"]),
    "unknown batch order": dict(
        library=lambda tmp, mp: GridConfig(task="sst2", batch_order="shuffled").resolved(),
        cli=None,  # argparse's choices refuse it first
        sites={("runs/session.py", "batch_order")}, library_says=["batch_order='per_seed'"],
        cli_says=["--batch-order per_seed"]),
    "text column": dict(
        library=lambda tmp, mp: file_corpus(_no_header_tsv(tmp)),
        cli=lambda tmp: ["extract", "--task", str(_no_header_tsv(tmp)), "--max-length", "16", "--out",
                         str(tmp / "out"), "--quiet"],
        sites={("tasks/corpus.py", "text_column")}, library_says=["text_column="], cli_says=["--text-column"]),
    "data file missing": dict(
        library=lambda tmp, mp: load_examples("cola", "train", data_dir=tmp),
        cli=lambda tmp: ["extract", "--task", "cola", "--data-dir", str(tmp), "--max-length", "16", "--out",
                         str(tmp / "out"), "--quiet"],
        sites={("tasks/data.py", "data_dir")}, library_says=["Point data_dir= or"], cli_says=["Point --data-dir or"]),
    "hub unreachable": dict(
        library=lambda tmp, mp: (mp.setattr("papa.tasks.data.load_dataset", _offline),
                                 mp.delenv("PAPA_DATA_DIR", False), load_examples("cola", "train", data_dir=None)),
        cli=None, sites=set(), library_says=["pass data_dir= or"], cli_says=["pass --data-dir or"]),
    "out is a file": dict(
        library=lambda tmp, mp: check_output_dir(_afile(tmp)),
        cli=lambda tmp: ["extract", "--task", "sst2", "--max-length", "16", "--out", str(_afile(tmp)), "--quiet"],
        sites={("core/artifacts.py", "argument")}, library_says=["out_dir='"], cli_says=["--out /"]),
    "one-model notebook given several": dict(
        library=lambda tmp, mp: with_subjects("01_method", {}, {"model": "m"}, ["org/a", "org/b"], None),
        cli=lambda tmp: ["reproduce", "--models", "org/a", "org/b", "--notebooks", "01_method", "--out",
                         str(tmp / "out"), "--quiet"],
        sites={("reproduce/notebooks.py", "names"), ("reproduce/notebooks.py", "with_models"),
               ("reproduce/notebooks.py", "with_tasks")},  # and the names of a notebook the models cannot run
        library_says=["with_models=['org/a', 'org/b']", "names=['01_method'] with_models=['org/a']"],
        cli_says=["--models org/a org/b", "--notebooks 01_method --models org/a"]),
    "no model in the folder": dict(
        library=lambda tmp, mp: check_batch(Batch(names=["01_method"], out_dir=tmp / "out",
                                                  with_models=[str(tmp / "no")])),
        cli=lambda tmp: ["reproduce", "--models", str(tmp / "no"), "--out", str(tmp / "out"), "--quiet"],
        sites=set(), library_says=["with_models=['/"], cli_says=["--models /"]),
    "a notebook the models cannot run": dict(
        library=lambda tmp, mp: notebook_jobs("quick", ["07_mlm_electra", "08_decoders"], folder=tmp / "out",
                                              with_models=[str(_tiny_dir(tmp))]),
        cli=lambda tmp: ["jobs", "list", "--models", str(_tiny_dir(tmp)), "--notebooks", "07_mlm_electra",
                         "08_decoders", "--out", str(tmp / "out")],
        sites=set(), library_says=["names=['07_mlm_electra']", "model='smollm2'"],
        cli_says=["--notebooks 07_mlm_electra", "--model smollm2"]),
    "no constants file": dict(
        library=lambda tmp, mp: GridConfig(task="sst2", constants_file=str(tmp / "no.safetensors")).resolved(),
        cli=lambda tmp: ["probe", "--task", "sst2", "--constants-file", str(tmp / "no.safetensors"), "--out",
                         str(tmp / "out"), "--quiet"],
        sites={("runs/session.py", "constants_file")}, library_says=["constants_file='/"],
        cli_says=["--constants-file /"]),
    "report out is a folder": dict(
        library=lambda tmp, mp: check_output_file(tmp),
        cli=None,  # `papa report` checks it after reading its table: test_bad_input.py::test_report_results_paths
        sites=set(), library_says=["out='"], cli_says=["--out /"]),
}


def test_every_arg_is_in_the_table():
    covered = set().union(*(case["sites"] for case in CASES.values()))
    assert _arg_sites() == covered, "an Arg written in papa/ has no case here (or a case names one that is gone)"


def test_every_suggested_flag_exists():
    flags = _cli_flags()
    for case in CASES.values():
        for said in case["cli_says"]:
            assert FLAG.search(said)[0] in flags, said


@pytest.mark.parametrize("name", CASES)
def test_library_names_arguments(name, tmp_path, monkeypatch):
    case = CASES[name]
    if name == "device" and torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    with pytest.raises(PapaError) as caught:
        case["library"](tmp_path, monkeypatch)
    message = str(caught.value)
    for said in case["library_says"]:
        assert said in message, message
    assert not FLAG.search(message), f"a library error names a CLI flag: {message}"
    # the same error, read by the CLI: its flags, no argument spelling
    cli_message = caught.value.cli_message()
    for said in case["cli_says"]:
        assert said in cli_message, cli_message
    assert not ARGUMENT.search(cli_message.replace(str(tmp_path), "")), cli_message


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c["cli"]])
def test_cli_names_flags(name, tmp_path, capsys, data_dir):
    case = CASES[name]
    if name == "device" and torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    argv = case["cli"](tmp_path)
    if "--data-dir" not in argv:
        argv += ["--data-dir", str(data_dir)]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"papa {argv[0]}: error: "), err
    for said in case["cli_says"]:
        assert said in err, err
    assert not ARGUMENT.search(err.replace(str(tmp_path), "")), f"a CLI error names a library argument: {err}"


# ---- what no table can list: flags written into library messages, arguments into the CLI's -------------------------

def _message_strings(path: Path) -> list[tuple[int, str]]:
    """The text of every raise and warning in `path` (string constants, f-string parts joined)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        call = node.exc if isinstance(node, ast.Raise) else node
        if isinstance(call, ast.Call) and (isinstance(node, ast.Raise) or getattr(call.func, "attr", "") == "warn"):
            text = "".join(n.value for n in ast.walk(call) if isinstance(n, ast.Constant) and isinstance(n.value, str))
            found.append((node.lineno, text))
    return found


def test_library_messages_name_no_flag():
    offenders = []
    for path in PAPA.rglob("*.py"):
        if path.name == "cli.py":
            continue
        for line, text in _message_strings(path):
            text = re.sub(r"`papa [^`]*`", "", text)  # a whole command to run is advice to anyone
            if FLAG.search(text):
                offenders.append(f"{path.relative_to(PAPA)}:{line}: {text[:100]}")
    assert not offenders, "library messages naming CLI flags (use papa.core.errors.Arg):\n" + "\n".join(offenders)


def test_cli_messages_name_no_argument():
    text = [(line, t) for line, t in _message_strings(PAPA / "cli.py") if ARGUMENT.search(t)]
    assert not text, text
