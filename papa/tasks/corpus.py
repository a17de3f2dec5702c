"""Unlabeled corpora for extracting constants: a task's split with its labels dropped, or a text/TSV file."""
from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass
from pathlib import Path

from papa.core.errors import Arg, InputError


@dataclass
class Corpus:
    """Texts (or word lists) and optional second texts, with a name recorded in the constants' metadata."""

    name: str
    texts: list
    pairs: list[str] | None = None

    def __len__(self) -> int:
        return len(self.texts)


@dataclass(frozen=True)
class CorpusSource:
    """Where an unlabeled corpus comes from: a registered task's split (`name` a task), or a ``.txt``/``.tsv``
    file (`name` its path; the columns as `file_corpus` takes them)."""

    name: str
    split: str = "train"
    limit: int | None = None
    text_column: str | None = None
    pair_column: str | None = None

    @property
    def is_file(self) -> bool:
        return Path(self.name).is_file()

    def check(self) -> None:
        """Refuse, before anything is read, a corpus file that is not there (a task name is checked on loading)."""
        if Path(self.name).is_dir():
            raise FileNotFoundError(f"{self.name} is a directory, not a corpus: give a .txt file (one text per line), "
                                    "a .tsv file (with its text column), or a task name")
        if Path(self.name).suffix.lower() in (".txt", ".tsv") and not self.is_file:
            raise FileNotFoundError(f"no corpus file at {self.name}: give an existing .txt/.tsv file or a task name")

    @property
    def token_task(self) -> bool:
        """Whether the corpus is a token-level task's (encoded with the token-task rule: `papa.method.layout`)."""
        if self.is_file:
            return False
        from papa.tasks.registry import get_task

        return get_task(self.name).token_level

    def load(self, data_dir: str | os.PathLike | None = None) -> Corpus:
        """The corpus's texts (`data_dir` for a task's: None = $PAPA_DATA_DIR, else the hub)."""
        self.check()
        if self.is_file:
            return file_corpus(self.name, self.text_column, self.pair_column, limit=self.limit)
        return task_corpus(self.name, self.split, data_dir=data_dir, limit=self.limit)


def task_corpus(task: str, split: str = "train", data_dir: str | os.PathLike | None = None,
                limit: int | None = None, sample: str = "first") -> Corpus:
    """The inputs of a registered task's split, labels unused; `limit` and `sample` as in `load_examples`."""
    from papa.tasks.data import load_examples

    examples = load_examples(task, split, data_dir=data_dir, limit=limit, sample=sample)
    texts = [list(e.words) if e.words is not None else e.text for e in examples]
    pairs = [e.text_pair for e in examples] if examples[0].text_pair is not None else None
    return Corpus(name=corpus_name(task, split, limit, sample), texts=texts, pairs=pairs)


def corpus_name(task: str, split: str, limit: int | None, sample: str = "first") -> str:
    """``sst2:train``, ``sst2:train[:96]`` (first 96) or ``sst2:train[random:500]``: recorded in the constants."""
    if not limit:
        return f"{task}:{split}"
    return f"{task}:{split}[:{limit}]" if sample == "first" else f"{task}:{split}[{sample}:{limit}]"


def read_utf8(path: str | os.PathLike) -> str:
    """The text of `path` (UTF-8, a leading BOM dropped); another encoding raises an `InputError` naming the line."""
    path = Path(path)
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise InputError(f"{path}, line {line}: byte 0x{raw[exc.start]:02x} is not UTF-8 text; papa reads corpus files "
                         "as UTF-8: convert the file (e.g. `iconv -f latin1 -t utf-8`)") from None


def file_corpus(path: str | os.PathLike, text_column: str | None = None, pair_column: str | None = None,
                limit: int | None = None) -> Corpus:
    """A ``.txt`` file (one example per non-empty line) or a ``.tsv`` file with a header row (`text_column` defaults
    to ``sentence``, ``text``, ``sentence1`` or ``#1 String``, `pair_column` to its partner)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no corpus file at {path}")
    text = read_utf8(path)
    if path.suffix.lower() != ".tsv":
        texts = [line.strip() for line in text.splitlines() if line.strip()]
        pairs = None
    else:
        rows = list(csv.reader(io.StringIO(text, newline=""), delimiter="\t", quoting=csv.QUOTE_NONE))
        if not rows:
            raise InputError(f"{path} is empty: a .tsv corpus needs a header row and one example per line")
        header, body = rows[0], rows[1:]
        partners = {"sentence1": "sentence2", "#1 String": "#2 String", "question": "sentence"}
        if text_column is None:
            text_column = next((c for c in ("sentence", "text", "sentence1", "#1 String") if c in header), None)
            if text_column is None:
                column = Arg("text_column")
                raise InputError(f"{path}: no text column among {header}; name it with {column}", advice=[column])
            if pair_column is None and partners.get(text_column) in header:
                pair_column = partners[text_column]
        for col in filter(None, (text_column, pair_column)):
            if col not in header:
                raise InputError(f"{path}: column {col!r} is not in the header {header}")
        ti = header.index(text_column)
        pi = header.index(pair_column) if pair_column else None
        for line_no, row in enumerate(body, start=2):
            if len(row) != len(header):
                raise InputError(f"{path}, line {line_no}: {len(row)} tab-separated fields, the header has "
                                 f"{len(header)}: fix or remove that line")
        texts = [row[ti] for row in body]
        pairs = [row[pi] for row in body] if pi is not None else None
    if limit is not None:
        texts = texts[:limit]
        pairs = pairs[:limit] if pairs is not None else None
    if not texts:
        raise InputError(f"the corpus {path} has no examples: there is nothing to average")
    return Corpus(name=path.name, texts=texts, pairs=pairs)
