"""Readers on small files written by the tests, the hub path with only the network boundary faked,
and the task registry they read from."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import datasets
import pytest

import papa.tasks.data
from papa.tasks.data import (DATA_DIR_ENV, DataFormatError, DataNotFoundError, DataSourceError, Example, iob1_to_iob2,
                             load_examples, split_mlm_paragraphs)
from papa.tasks.registry import (CONLL_NER_LABELS, CONLL_POS_LABELS, MNLI_LABELS, TASKS, ProbeHParams,
                                 UnknownTaskError, corpus_label, get_task)

# --------------------------------------------------------------------------------------------- fixtures

MNLI_TRAIN_HEADER = (
    "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
    "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label"
)
MNLI_DEV_HEADER = (
    "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
    "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label"
)
MNLI_ROWS = [  # (premise, hypothesis, gold label)
    ('He said "no" twice.', "He refused.", "entailment"),
    ("The cat sat.", "A dog ran.", "neutral"),
    ("It is raining.", "It is dry .", "contradiction"),
]


def _mnli_line(i: int, premise: str, hypothesis: str, gold: str, n_labels: int) -> str:
    parses = ["( x )", "( y )", "(ROOT x)", "(ROOT y)"]
    return "\t".join([str(i), str(100 + i), f"{100 + i}e", "fiction", *parses, premise, hypothesis,
                      *([gold] * n_labels), gold])


def _write(path: Path, text: str, encoding: str = "utf-8") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode(encoding))
    return path


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make sure a PAPA_DATA_DIR of the person running the tests does not choose the source."""
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)


@pytest.fixture
def mnli_dir(tmp_path: Path) -> Path:
    """MNLI in the GLUE layout: train.tsv and dev_mismatched.tsv with their real headers."""
    lines = [_mnli_line(i, *row, n_labels=1) for i, row in enumerate(MNLI_ROWS)]
    _write(tmp_path / "glue_data/MNLI/train.tsv", "\n".join([MNLI_TRAIN_HEADER, *lines]) + "\n")
    lines = [_mnli_line(i, *row, n_labels=5) for i, row in enumerate(reversed(MNLI_ROWS))]
    _write(tmp_path / "glue_data/MNLI/dev_mismatched.tsv", "\n".join([MNLI_DEV_HEADER, *lines]) + "\n")
    return tmp_path


# Tiny copies of each original format (same quirks as the real files: CoLA without header or final newline,
# MRPC header with a BOM, SST-2 text with a trailing space, CoNLL in IOB1 with -DOCSTART- lines).
COLA_ROWS = [("The book fell.", 1), ("Book the fell.", 0), ("She left.", 1)]
SST2_ROWS = [("a gorgeous film ", 1), ("dull , dull , dull ", 0)]
MRPC_ROWS = [('He said " yes " .', "He agreed .", 1), ("Prices rose 5 % .", "Stocks fell .", 0)]
# (word, POS, NER in IOB2 as on the hub); the IOB1 file is derived below by hand-written rules.
CONLL_SENTENCES = [
    [("EU", "NNP", "B-ORG"), ("rejects", "VBZ", "O"), ("German", "JJ", "B-MISC"), ("call", "NN", "O")],
    [("Peter", "NNP", "B-PER"), ("Blackburn", "NNP", "I-PER")],
    [("Paris", "NNP", "B-LOC"), ("Berlin", "NNP", "B-LOC"), ("and", "CC", "O"), ("N.Y.", "NNP", "B-LOC")],
]
CONLL_IOB1_NER = [["I-ORG", "O", "I-MISC", "O"], ["I-PER", "I-PER"], ["I-LOC", "B-LOC", "O", "I-LOC"]]
WIKI_LINES = [" "]
for _k in range(12):  # 12 articles, so article 5 is held out for eval
    WIKI_LINES += [f" = Article {_k} = ", " ", f" First paragraph of article {_k} . ", " ",
                   " = = Section = = ", " ", f" Second paragraph of article {_k} . ", " "]


@pytest.fixture
def local_dir(tmp_path: Path) -> Path:
    """A data directory holding tiny files in every original format."""
    _write(tmp_path / "glue_data/CoLA/dev.tsv",
           "\n".join(f"src\t{y}\t{'*' if y == 0 else ''}\t{s}" for s, y in COLA_ROWS))
    _write(tmp_path / "glue_data/SST-2/dev.tsv",
           "sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in SST2_ROWS))
    _write(tmp_path / "glue_data/MRPC/dev.tsv",
           "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
           + "".join(f"{y}\t{10 + i}\t{20 + i}\t{a}\t{b}\n" for i, (a, b, y) in enumerate(MRPC_ROWS)))
    conll = "-DOCSTART- -X- O O\n\n"
    for sentence, ner in zip(CONLL_SENTENCES, CONLL_IOB1_NER):
        conll += "".join(f"{w} {p} I-NP {n}\n" for (w, p, _), n in zip(sentence, ner)) + "\n"
    _write(tmp_path / "conll2003/eng.testa", conll)
    _write(tmp_path / "wikitext/wiki.valid.raw", "\n".join(WIKI_LINES) + "\n")
    return tmp_path


# ------------------------------------------------------------------------------------------------- MNLI


def test_mnli_reader_glue_layout(mnli_dir: Path) -> None:
    train = load_examples("mnli", "train", data_dir=mnli_dir)
    assert train == [
        Example(text=p, text_pair=h, label=MNLI_LABELS.index(y)) for p, h, y in MNLI_ROWS
    ]
    assert [e.label for e in train] == [0, 1, 2]  # hub order: entailment, neutral, contradiction
    assert train[0].text == 'He said "no" twice.'  # quotes are text, not CSV quoting
    dev = load_examples("mnli", "eval", data_dir=mnli_dir)
    assert [e.label for e in dev] == [2, 1, 0]


def test_mnli_limit_takes_the_first_examples(mnli_dir: Path) -> None:
    full = load_examples("mnli", "train", data_dir=mnli_dir)
    assert load_examples("mnli", "train", data_dir=mnli_dir, limit=2) == full[:2]


def test_malformed_line_names_file_and_line(tmp_path: Path) -> None:
    lines = [MNLI_TRAIN_HEADER, _mnli_line(0, *MNLI_ROWS[0], n_labels=1), "0\tonly\tthree"]
    path = _write(tmp_path / "glue_data/MNLI/train.tsv", "\n".join(lines) + "\n")
    with pytest.raises(DataFormatError) as err:
        load_examples("mnli", "train", data_dir=tmp_path)
    assert str(path) in str(err.value) and "line 3" in str(err.value)


def test_bad_label_names_file_and_line(tmp_path: Path) -> None:
    lines = [MNLI_TRAIN_HEADER, _mnli_line(0, "a", "b", "maybe", n_labels=1)]
    path = _write(tmp_path / "glue_data/MNLI/train.tsv", "\n".join(lines) + "\n")
    with pytest.raises(DataFormatError, match="line 2.*'maybe'") as err:
        load_examples("mnli", "train", data_dir=tmp_path)
    assert str(path) in str(err.value)


def test_malformed_conll_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "conll2003/eng.testa", "-DOCSTART- -X- O O\n\nEU NNP I-NP I-ORG\nbroken\n")
    with pytest.raises(DataFormatError, match="line 4") as err:
        load_examples("ner", "eval", data_dir=tmp_path)
    assert str(path) in str(err.value)


def test_header_only_file_is_an_error(tmp_path: Path) -> None:
    _write(tmp_path / "glue_data/MNLI/train.tsv", MNLI_TRAIN_HEADER + "\n")
    with pytest.raises(DataFormatError, match="no examples"):
        load_examples("mnli", "train", data_dir=tmp_path)


def test_missing_file_says_where_and_what_to_set(tmp_path: Path) -> None:
    with pytest.raises(DataNotFoundError) as err:
        load_examples("mnli", "eval", data_dir=tmp_path)
    message = str(err.value)
    assert str(tmp_path / "glue_data/MNLI/dev_mismatched.tsv") in message
    assert "data_dir" in message and DATA_DIR_ENV in message
    assert isinstance(err.value, FileNotFoundError)


def test_missing_data_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(DataNotFoundError, match=f"nowhere.*{DATA_DIR_ENV}"):
        load_examples("cola", "train")


def test_crlf_files_read_the_same(local_dir: Path, tmp_path_factory) -> None:
    crlf = tmp_path_factory.mktemp("crlf")
    for name in ("glue_data/SST-2/dev.tsv", "conll2003/eng.testa"):
        _write(crlf / name, (local_dir / name).read_text(encoding="utf-8").replace("\n", "\r\n"))
    for task in ("sst2", "ner"):
        assert load_examples(task, "eval", data_dir=crlf) == load_examples(task, "eval", data_dir=local_dir)


def test_environment_variable_selects_the_directory(mnli_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DATA_DIR_ENV, str(mnli_dir))
    monkeypatch.setattr(papa.tasks.data, "load_dataset", _no_hub)
    assert len(load_examples("mnli", "train")) == len(MNLI_ROWS)


def test_argument_beats_environment_variable(mnli_dir: Path, tmp_path_factory, monkeypatch) -> None:
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path_factory.mktemp("empty")))
    assert len(load_examples("mnli", "train", data_dir=mnli_dir)) == len(MNLI_ROWS)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="split"):
        load_examples("cola", "validation", data_dir=".")
    with pytest.raises(ValueError, match="limit"):
        load_examples("cola", "eval", data_dir=".", limit=0)


# ------------------------------------------------------------------------------------------- hub path


def _no_hub(*args: Any, **kwargs: Any) -> None:
    raise AssertionError("the hub must not be used when a data directory is set")


class FakeHub:
    """Stands in for ``datasets.load_dataset``: in-memory datasets with the hub's columns and features."""

    def __init__(self, splits: dict[str, datasets.Dataset]) -> None:
        self.splits = splits
        self.calls: list[tuple[str, str | None, str | None]] = []

    def __call__(self, path: str, name: str | None = None, split: str | None = None, **kwargs: Any):
        self.calls.append((path, name, split))
        return datasets.DatasetDict(self.splits) if split is None else self.splits[split]


def _glue_dataset(columns: dict[str, list], label_names: tuple[str, ...]) -> datasets.Dataset:
    features = {name: datasets.Value("string") for name in columns if name != "label"}
    features["label"] = datasets.ClassLabel(names=list(label_names))
    features["idx"] = datasets.Value("int32")
    n = len(columns["label"])
    return datasets.Dataset.from_dict({**columns, "idx": list(range(n))}, features=datasets.Features(features))


def _conll_dataset() -> datasets.Dataset:
    features = datasets.Features({
        "id": datasets.Value("string"),
        "tokens": datasets.List(datasets.Value("string")),
        "pos_tags": datasets.List(datasets.ClassLabel(names=list(CONLL_POS_LABELS))),
        "ner_tags": datasets.List(datasets.ClassLabel(names=list(CONLL_NER_LABELS))),
    })
    rows = {
        "id": [str(i) for i in range(len(CONLL_SENTENCES))],
        "tokens": [[w for w, _, _ in s] for s in CONLL_SENTENCES],
        "pos_tags": [[CONLL_POS_LABELS.index(p) for _, p, _ in s] for s in CONLL_SENTENCES],
        "ner_tags": [[CONLL_NER_LABELS.index(n) for _, _, n in s] for s in CONLL_SENTENCES],
    }
    return datasets.Dataset.from_dict(rows, features=features)


def _wikitext_dataset() -> datasets.Dataset:
    # The hub keeps each raw line with its newline, and blank lines as "".
    rows = [line + "\n" if line.strip() else "" for line in WIKI_LINES]
    return datasets.Dataset.from_dict({"text": rows}, features=datasets.Features({"text": datasets.Value("string")}))


HUB_CASES = {
    # task: (expected load_dataset call, hub split contents)
    "cola": (("nyu-mll/glue", "cola", "validation"), lambda: _glue_dataset(
        {"sentence": [s for s, _ in COLA_ROWS], "label": [y for _, y in COLA_ROWS]}, TASKS["cola"].label_names)),
    "sst2": (("nyu-mll/glue", "sst2", "validation"), lambda: _glue_dataset(
        {"sentence": [s for s, _ in SST2_ROWS], "label": [y for _, y in SST2_ROWS]}, TASKS["sst2"].label_names)),
    "mrpc": (("nyu-mll/glue", "mrpc", "validation"), lambda: _glue_dataset(
        {"sentence1": [a for a, _, _ in MRPC_ROWS], "sentence2": [b for _, b, _ in MRPC_ROWS],
         "label": [y for _, _, y in MRPC_ROWS]}, TASKS["mrpc"].label_names)),
    "ner": (("eriktks/conll2003", None, "validation"), _conll_dataset),
    "pos": (("eriktks/conll2003", None, "validation"), _conll_dataset),
    "mlm": (("Salesforce/wikitext", "wikitext-103-raw-v1", "validation"), _wikitext_dataset),
}


@pytest.mark.parametrize("task", sorted(HUB_CASES))
def test_hub_path_matches_local_path(task: str, local_dir: Path, no_env: None, monkeypatch) -> None:
    call, make = HUB_CASES[task]
    hub = FakeHub({call[2]: make()})
    monkeypatch.setattr(papa.tasks.data, "load_dataset", hub)
    from_hub = load_examples(task, "eval")
    assert hub.calls == [call]
    assert from_hub == load_examples(task, "eval", data_dir=local_dir)


def test_hub_path_mnli_mismatched(mnli_dir: Path, no_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = list(reversed(MNLI_ROWS))
    split = _glue_dataset({"premise": [p for p, _, _ in rows], "hypothesis": [h for _, h, _ in rows],
                           "label": [MNLI_LABELS.index(y) for _, _, y in rows]}, MNLI_LABELS)
    hub = FakeHub({"validation_mismatched": split})
    monkeypatch.setattr(papa.tasks.data, "load_dataset", hub)
    assert load_examples("mnli", "eval") == load_examples("mnli", "eval", data_dir=mnli_dir)
    assert hub.calls == [("nyu-mll/glue", "mnli", "validation_mismatched")]


def test_hub_label_names_are_checked(no_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    split = _glue_dataset({"sentence": ["x"], "label": [0]}, ("bad", "good"))
    monkeypatch.setattr(papa.tasks.data, "load_dataset", FakeHub({"validation": split}))
    with pytest.raises(DataFormatError, match="labels"):
        load_examples("sst2", "eval")


def test_hub_failure_says_how_to_use_local_files(no_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    def offline(*args: Any, **kwargs: Any) -> None:
        raise ConnectionError("no network")

    monkeypatch.setattr(papa.tasks.data, "load_dataset", offline)
    with pytest.raises(DataSourceError, match=f"nyu-mll/glue.*no network.*{DATA_DIR_ENV}"):
        load_examples("cola", "train")


# ------------------------------------------------------------------------------------- format details


def test_local_quirks(local_dir: Path) -> None:
    cola = load_examples("cola", "eval", data_dir=local_dir)
    assert cola[-1] == Example(text="She left.", label=1)  # last line has no newline
    mrpc = load_examples("mrpc", "eval", data_dir=local_dir)
    assert mrpc[0] == Example(text='He said " yes " .', text_pair="He agreed .", label=1)  # BOM header
    assert load_examples("sst2", "eval", data_dir=local_dir)[0].text == "a gorgeous film "
    ner = load_examples("ner", "eval", data_dir=local_dir)
    assert len(ner) == 3  # -DOCSTART- is no sentence
    assert ner[2].label == tuple(CONLL_NER_LABELS.index(t) for t in ["B-LOC", "B-LOC", "O", "B-LOC"])


def test_iob1_to_iob2() -> None:
    assert iob1_to_iob2(["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-LOC", "I-ORG"]) == [
        "B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC", "B-ORG"]


def test_mlm_split_is_by_article(local_dir: Path) -> None:
    train = load_examples("mlm", "train", data_dir=local_dir)
    dev = load_examples("mlm", "eval", data_dir=local_dir)
    assert [e.text for e in dev] == ["First paragraph of article 5 .", "Second paragraph of article 5 ."]
    assert len(train) == 2 * 11 and not {e.text for e in train} & {e.text for e in dev}
    assert all(e.label is None and e.text_pair is None for e in train + dev)
    assert [e.text for e in load_examples("lm", "eval", data_dir=local_dir)] == [e.text for e in dev]


def test_split_mlm_paragraphs_drops_headings_and_blanks() -> None:
    lines = [" ", " = A = ", " p1 ", " = = Sub = = ", " = = = Subsub = = = ", " p2 ", " = B = ", " p3 "]
    assert split_mlm_paragraphs(lines) == [(0, "p1"), (0, "p2"), (1, "p3")]


# ------------------------------------------------------------------------------------------- registry


def test_table3_hyperparameters() -> None:
    table3 = {
        "cola": (2e-5, 16, 15, 64), "sst2": (1e-4, 32, 4, 64), "mnli": (2e-4, 8, 4, 256),
        "mrpc": (2e-5, 16, 15, 128), "ner": (1e-4, 8, 4, 128), "pos": (5e-4, 8, 4, 128),
        "mlm": (5e-4, 8, 2, 128),
    }
    decoder_only = ("lm", "lm_probe")
    assert {name: spec.hparams for name, spec in TASKS.items() if name not in decoder_only} == {
        name: ProbeHParams(*row) for name, row in table3.items()}
    # LM and LM probe (decoders; no paper value) take MLM's row (the probe's, and LM's λ ranking), and read MLM's text
    # with its held-out articles
    mlm = get_task("mlm")
    for name in decoder_only:
        spec = get_task(name)
        assert spec.hparams == mlm.hparams and (spec.local, spec.hub, spec.holdout_every, spec.holdout_offset) == (
            mlm.local, mlm.hub, mlm.holdout_every, mlm.holdout_offset)
        assert spec.metric == mlm.metric and spec.label_names == () and spec.vocabulary_targets
    assert not get_task("lm").trains_probe and all(spec.trains_probe for name, spec in TASKS.items() if name != "lm")


def test_registry_entries() -> None:
    assert get_task("mnli").eval_split == "validation_mismatched"
    assert get_task("mrpc").metric == "f1" and get_task("cola").metric == "matthews_correlation"
    assert len(CONLL_POS_LABELS) == 47 and len(CONLL_NER_LABELS) == 9
    assert get_task("mlm").label_names == () and get_task("mlm").num_labels == 0
    for name, spec in TASKS.items():
        assert spec.name == name


def test_unknown_task() -> None:
    with pytest.raises(ValueError, match="unknown task 'qqp'.*cola.*mlm") as err:
        get_task("qqp")
    assert isinstance(err.value, UnknownTaskError)


def test_a_constants_corpus_is_named_by_the_text_it_reads() -> None:
    """Table 2's other corpus is the MLM task's text: pages say WikiText, not "mlm"."""
    assert corpus_label("mlm") == "WikiText" and corpus_label("lm_probe") == "WikiText"
    assert corpus_label("mnli") == "MNLI" and corpus_label("task") == "the task's own"
    assert corpus_label("my_corpus") == "my_corpus"
