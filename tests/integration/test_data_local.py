"""Every loader on the real files of the data directory: counts and label distributions as in the data
manifest, first examples, errors, source selection, and agreement with the hub path on the same rows.

CoNLL-2003 counts are sentences: ``-DOCSTART-`` lines separate documents and are not examples (as on the
hub), giving 14,041 train / 3,250 testa sentences and 203,621 / 51,362 tokens.
"""
from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path
from typing import Any

import datasets
import pytest

import papa.tasks.data
from papa.tasks.data import DATA_DIR_ENV, DataNotFoundError, Example, load_examples, read_wikitext, split_mlm_paragraphs
from papa.tasks.registry import CONLL_NER_LABELS, CONLL_POS_LABELS, get_task

pytestmark = pytest.mark.integration

# (task, split): (number of examples, {label id: count}) from the manifest.
GLUE_COUNTS = {
    ("sst2", "train"): (67_349, {1: 37_569, 0: 29_780}),
    ("sst2", "eval"): (872, {1: 444, 0: 428}),
    ("cola", "train"): (8_551, {1: 6_023, 0: 2_528}),
    ("cola", "eval"): (1_043, {1: 721, 0: 322}),
    ("mrpc", "train"): (3_668, {1: 2_474, 0: 1_194}),
    ("mrpc", "eval"): (408, {1: 279, 0: 129}),
}
CONLL_COUNTS = {"train": (14_041, 203_621), "eval": (3_250, 51_362)}


@pytest.fixture(scope="module")
def conll(data_dir: Path) -> dict[tuple[str, str], list[Example]]:
    """NER and POS examples of both splits, read once for the module."""
    return {(t, s): load_examples(t, s, data_dir=data_dir) for t in ("ner", "pos") for s in ("train", "eval")}


@pytest.mark.parametrize(("task", "split"), sorted(GLUE_COUNTS))
def test_glue_counts_and_labels(task: str, split: str, data_dir: Path) -> None:
    n, labels = GLUE_COUNTS[(task, split)]
    examples = load_examples(task, split, data_dir=data_dir)
    assert len(examples) == n
    assert Counter(e.label for e in examples) == labels
    assert all(e.text for e in examples)
    assert all((e.text_pair is not None) == (task == "mrpc") for e in examples)


@pytest.mark.parametrize(
    ("task", "split", "first"),
    [
        ("sst2", "train", Example(text="hide new secretions from the parental units ", label=0)),
        ("sst2", "eval", Example(text="it 's a charming and often affecting journey . ", label=1)),
        ("cola", "train",
         Example(text="Our friends won't buy this analysis, let alone the next one we propose.", label=1)),
        ("cola", "eval", Example(text="The sailors rode the breeze clear of the rocks.", label=1)),
        ("mrpc", "train", Example(
            text='Amrozi accused his brother , whom he called " the witness " , of deliberately distorting his '
                 "evidence .",
            text_pair='Referring to him as only " the witness " , Amrozi accused his brother of deliberately '
                      "distorting his evidence .",
            label=1)),
        ("mrpc", "eval", Example(
            text="He said the foodservice pie business doesn 't fit the company 's long-term growth strategy .",
            text_pair='" The foodservice pie business does not fit our long-term growth strategy .',
            label=1)),
    ],
)
def test_glue_first_example(task: str, split: str, first: Example, data_dir: Path) -> None:
    assert load_examples(task, split, data_dir=data_dir, limit=1) == [first]


def test_cola_dev_last_line_without_newline(data_dir: Path) -> None:
    assert load_examples("cola", "eval", data_dir=data_dir)[-1] == Example(
        text="John talked to Bill about himself.", label=1)


@pytest.mark.parametrize("split", ["train", "eval"])
def test_conll_counts(split: str, conll: dict) -> None:
    sentences, tokens = CONLL_COUNTS[split]
    for task in ("ner", "pos"):
        examples = conll[(task, split)]
        assert len(examples) == sentences
        assert sum(len(e.words) for e in examples) == tokens
        assert all(len(e.words) == len(e.label) for e in examples)
        assert not any(e.words[0] == "-DOCSTART-" for e in examples)
    assert [e.words for e in conll[("ner", split)]] == [e.words for e in conll[("pos", split)]]


def test_conll_first_example(conll: dict) -> None:
    words = ("EU", "rejects", "German", "call", "to", "boycott", "British", "lamb", ".")
    ner = ["B-ORG", "O", "B-MISC", "O", "O", "O", "B-MISC", "O", "O"]
    pos = ["NNP", "VBZ", "JJ", "NN", "TO", "VB", "JJ", "NN", "."]
    assert conll[("ner", "train")][0] == Example(words=words, label=tuple(CONLL_NER_LABELS.index(t) for t in ner))
    assert conll[("pos", "train")][0] == Example(words=words, label=tuple(CONLL_POS_LABELS.index(t) for t in pos))


def test_conll_ner_is_valid_iob2(conll: dict) -> None:
    for split in ("train", "eval"):
        for example in conll[("ner", split)]:
            tags = ["O"] + [CONLL_NER_LABELS[i] for i in example.label]
            for prev, tag in zip(tags, tags[1:]):
                assert not tag.startswith("I-") or prev[2:] == tag[2:], example


def test_mlm_split(data_dir: Path) -> None:
    train = load_examples("mlm", "train", data_dir=data_dir)
    dev = load_examples("mlm", "eval", data_dir=data_dir)
    paragraphs = split_mlm_paragraphs(read_wikitext(data_dir / get_task("mlm").local.eval_file))
    assert len({a for a, _ in paragraphs}) == 60  # articles, as in the manifest
    assert (len(train), len(dev)) == (1_603, 238)
    assert sorted(e.text for e in train + dev) == sorted(t for _, t in paragraphs)
    assert train[0].text.startswith("Homarus gammarus , known as the European lobster")
    assert dev[0].text.startswith("Papa Stour is one of the Shetland Islands")
    assert not any(e.text.startswith("= ") or e.text != e.text.strip() for e in train + dev)


def test_limit_is_a_prefix(data_dir: Path) -> None:
    assert load_examples("sst2", "eval", data_dir=data_dir, limit=5) == load_examples(
        "sst2", "eval", data_dir=data_dir)[:5]


def test_random_limit_is_a_fixed_subset_in_file_order(data_dir: Path) -> None:
    every = load_examples("cola", "train", data_dir=data_dir)
    picked = load_examples("cola", "train", data_dir=data_dir, limit=400, sample="random")
    again = load_examples("cola", "train", data_dir=data_dir, limit=400, sample="random")
    assert picked == again and len(picked) == 400
    index = [every.index(e) for e in picked]
    assert index == sorted(index) and len(set(index)) == 400
    # CoLA's training file is sorted by source (its first 400 lines come from three of them); a random subset
    # reaches the end of the file.
    assert index[-1] > 8_000 and index[:5] != list(range(5))
    assert load_examples("cola", "eval", data_dir=data_dir, limit=5000, sample="random") == load_examples(
        "cola", "eval", data_dir=data_dir)
    with pytest.raises(ValueError, match="unknown sample 'shuffled'; choose one of first, random"):
        load_examples("cola", "train", data_dir=data_dir, limit=4, sample="shuffled")


def test_missing_file_message(data_dir: Path) -> None:
    path = data_dir / "glue_data/MNLI/dev_mismatched.tsv"
    if path.exists():
        pytest.skip("MNLI is staged here; the missing-file case is covered by the unit tests")
    with pytest.raises(DataNotFoundError) as err:
        load_examples("mnli", "eval", data_dir=data_dir)
    assert str(path) in str(err.value) and DATA_DIR_ENV in str(err.value)


def test_mnli_counts_if_staged(data_dir: Path) -> None:
    if not (data_dir / "glue_data/MNLI/dev_mismatched.tsv").exists():
        pytest.skip("MNLI is not staged in the data directory (see its manifest)")
    dev = load_examples("mnli", "eval", data_dir=data_dir)
    assert len(dev) == 9_832
    assert set(Counter(e.label for e in dev)) == {0, 1, 2}


def test_environment_variable_selects_local_files(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_hub(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the hub must not be used when PAPA_DATA_DIR is set")

    monkeypatch.setattr(papa.tasks.data, "load_dataset", no_hub)
    monkeypatch.setenv(DATA_DIR_ENV, str(data_dir))
    assert load_examples("cola", "eval") == load_examples("cola", "eval", data_dir=data_dir)


# --------------------------------------------------------------------------- hub path on the real rows
# The fake hub splits are built the way the hub's dataset scripts build them (csv.DictReader with
# QUOTE_NONE for GLUE; the IOB2 copy of CoNLL-2003, which is the hub's own source; raw WikiText lines).


def _glue_hub_split(
    path: Path, columns: dict[str, str], label_names: tuple[str, ...], header: bool
) -> datasets.Dataset:
    with path.open(encoding="utf-8-sig") as f:
        if header:
            rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
        else:  # CoLA: source, label, original label, sentence
            rows = [{"label": r[1], "sentence": r[3]} for r in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)]
    data = {hub: [r[src] for r in rows] for hub, src in columns.items()}
    data["label"] = [int(v) for v in data["label"]]
    features = {hub: datasets.Value("string") for hub in columns if hub != "label"}
    features["label"] = datasets.ClassLabel(names=list(label_names))
    return datasets.Dataset.from_dict(data, features=datasets.Features(features))


def _conll_hub_split(path: Path) -> datasets.Dataset:
    sentences: list[list[list[str]]] = [[]]
    for line in path.read_text(encoding="utf-8").split("\n"):
        if line.startswith("-DOCSTART-") or not line.strip():
            if sentences[-1]:
                sentences.append([])
        else:
            sentences[-1].append(line.split(" "))
    sentences = [s for s in sentences if s]
    features = datasets.Features({
        "tokens": datasets.List(datasets.Value("string")),
        "pos_tags": datasets.List(datasets.ClassLabel(names=list(CONLL_POS_LABELS))),
        "ner_tags": datasets.List(datasets.ClassLabel(names=list(CONLL_NER_LABELS))),
    })
    pos_ids = {name: i for i, name in enumerate(CONLL_POS_LABELS)}
    ner_ids = {name: i for i, name in enumerate(CONLL_NER_LABELS)}
    return datasets.Dataset.from_dict({
        "tokens": [[t[0] for t in s] for s in sentences],
        "pos_tags": [[pos_ids[t[1]] for t in s] for s in sentences],
        "ner_tags": [[ner_ids[t[3]] for t in s] for s in sentences],
    }, features=features)


def _install_hub(monkeypatch: pytest.MonkeyPatch, hub_split: str, dataset: datasets.Dataset) -> None:
    """Serve ``dataset`` as the hub's ``hub_split``; no data directory, so the hub path is taken."""
    def load_dataset(path: str, name: str | None = None, split: str | None = None, **kwargs: Any):
        assert split == hub_split
        return dataset

    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    monkeypatch.setattr(papa.tasks.data, "load_dataset", load_dataset)


GLUE_HUB = {
    "cola": ("glue_data/CoLA/dev.tsv", {"sentence": "sentence", "label": "label"}, False),
    "sst2": ("glue_data/SST-2/dev.tsv", {"sentence": "sentence", "label": "label"}, True),
    "mrpc": ("glue_data/MRPC/dev.tsv", {"sentence1": "#1 String", "sentence2": "#2 String", "label": "Quality"}, True),
}


@pytest.mark.parametrize("task", sorted(GLUE_HUB))
def test_hub_path_equals_local_path_glue(task: str, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    file, columns, header = GLUE_HUB[task]
    local = load_examples(task, "eval", data_dir=data_dir)
    hub_split = _glue_hub_split(data_dir / file, columns, get_task(task).label_names, header)
    _install_hub(monkeypatch, "validation", hub_split)
    assert load_examples(task, "eval") == local


@pytest.mark.parametrize(("split", "hub_split", "iob2_file"), [
    ("train", "train", "conll2003/iob2/train.txt"), ("eval", "validation", "conll2003/iob2/valid.txt")])
def test_hub_path_equals_local_path_conll(split: str, hub_split: str, iob2_file: str, data_dir: Path,
                                          conll: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    # The local path converts the original IOB1 files; the hub's source is the IOB2 copy.
    _install_hub(monkeypatch, hub_split, _conll_hub_split(data_dir / iob2_file))
    assert load_examples("ner", split) == conll[("ner", split)]
    assert load_examples("pos", split) == conll[("pos", split)]


def test_hub_path_equals_local_path_mlm(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (data_dir / "wikitext/wiki.valid.raw").read_text(encoding="utf-8")
    rows = [line + "\n" if line.strip() else "" for line in text.split("\n")[:-1]]
    _install_hub(monkeypatch, "validation", datasets.Dataset.from_dict({"text": rows}))
    for split in ("train", "eval"):
        assert load_examples("mlm", split) == load_examples("mlm", split, data_dir=data_dir)
